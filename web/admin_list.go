package web

import (
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/web/views"
)

// listPage makes one page of a console list — callbacks, deliveries,
// orders, jobs, outbox, products, actions, a product's ledger — in its
// two forms. Every list handler parses its filter, reads one page from
// its service, and hands it here:
//
//   - path is the list's console page, /admin/...;
//   - ms are the page's rows as the service read them, newest first;
//   - cursor is where the next page starts (its ?before=), "" on the last;
//   - toJSON and toView make one row of the JSON and of the page.
//
// The JSON is the rows and the next page's URL, on the URL that was
// asked (from /api/admin/... it stays on the API); the view has the links
// to this page, the first and the next, on path. Links keep the request's
// filters.
func listPage[M, J, R any](s *Server, c echo.Context, path string, ms []M, cursor string, toJSON func(M) J, toView func(M) R) (listJSON[J], views.List[R]) {
	q := c.QueryParams()
	js := listJSON[J]{Rows: rows(ms, toJSON), Next: optional(nextURL(c.Request().URL.EscapedPath(), q, cursor))}
	v := views.List[R]{Now: s.deps.Now(), Rows: rows(ms, toView), Self: selfURL(path, q), First: firstURL(path, q), Next: nextURL(path, q, cursor)}
	return js, v
}
