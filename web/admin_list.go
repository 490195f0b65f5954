package web

import (
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/web/views"
)

// listPage makes one page of a console list — callbacks, deliveries,
// orders, jobs, outbox, products, actions, a product's ledger — which is
// both the page and its JSON. Every list handler parses its filter, reads
// one page from its service, and hands it here:
//
//   - path is the list's console page, /admin/...;
//   - ms are the page's rows as the service read them, newest first;
//   - cursor is where the next page starts (its ?before=), "" on the last;
//   - toRow makes one row.
//
// The page's links — to itself, the first page and the next — are on
// path and keep the request's filters. The next page of JSON is on the
// URL that was asked, so from /api/admin/... it stays on the API.
func listPage[M, R any](s *Server, c echo.Context, path string, ms []M, cursor string, toRow func(M) R) views.List[R] {
	q := c.QueryParams()
	next := path
	if wantsJSON(c) {
		next = c.Request().URL.EscapedPath()
	}
	return views.List[R]{Now: s.deps.Now(), Rows: rows(ms, toRow), Self: selfURL(path, q), First: firstURL(path, q),
		Next: views.NullText(nextURL(next, q, cursor))}
}
