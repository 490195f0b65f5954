package web

import (
	"bytes"
	"cmp"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// adminActions is GET /admin/actions: the admin action log, newest first.
func (s *Server) adminActions(c echo.Context) error {
	p := newParams(c.QueryParams())
	f := admins.ActionFilter{Admin: p.text("admin"), Action: p.text("action"), Before: p.id("before"), Limit: p.limit()}
	if err := p.check(c); err != nil {
		return err
	}
	as, next, err := s.deps.Admins.ListActions(c.Request().Context(), f)
	if err != nil {
		return err
	}
	v := listPage(s, c, "/admin/actions", as, formatID(next), actionRow)
	return s.show(c, "Actions", "actions", v, views.ActionsPage(v, views.ActionFilter{Admin: f.Admin, Action: f.Action}))
}

// adminHelp is GET /admin/help: the debugging guide.
func (s *Server) adminHelp(c echo.Context) error {
	return s.page(c, http.StatusOK, "Help", "help", views.HelpPage())
}

// adminNotFound is GET /admin/<anything the console does not have>: a
// 404, in the console's frame with its navigation for a logged-in admin.
// It does not ask a stranger to log in first.
func (s *Server) adminNotFound(c echo.Context) error {
	if email := s.deps.Sessions.GetString(c.Request().Context(), sessionAdmin); email != "" {
		c.Set(ctxAdmin, email)
	}
	return models.Errorf(models.ENotFound, "the console has no page %s", c.Request().URL.Path)
}

// queuesHandler serves the queue's own UI (asynqmon) under /admin/queues,
// behind the console's log-in. What it changes — deleting, running or
// archiving tasks — is written to the action log like every admin action.
// Its HTML page is served as queuesPage makes it.
func (s *Server) queuesHandler() echo.HandlerFunc {
	h := echo.WrapHandler(s.deps.Queues)
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			if isQueuesPage(r.URL.Path) {
				return s.serveQueuesPage(c)
			}
			return h(c)
		}
		err := h(c)
		result := models.ActionOK
		if err != nil || c.Response().Status >= 400 {
			result = models.ActionError
		}
		s.record(c, adminOf(c), "queues "+strings.ToLower(r.Method), strings.TrimPrefix(r.URL.Path, "/admin/queues"), result, "")
		return err
	}
}

// isQueuesPage tells the UI's page (every route of the single-page app:
// /admin/queues, /admin/queues/queues/default, …) from its assets and its
// JSON API.
func isQueuesPage(p string) bool {
	rest := strings.TrimPrefix(p, "/admin/queues")
	return rest == "" || !strings.HasPrefix(rest, "/api/") && !strings.Contains(path.Base(rest), ".")
}

// serveQueuesPage serves asynqmon's HTML page, changed by queuesPage.
func (s *Server) serveQueuesPage(c echo.Context) error {
	page := &pageBuffer{header: http.Header{}}
	s.deps.Queues.ServeHTTP(page, c.Request())
	h := c.Response().Header()
	for k, v := range page.header {
		if k != "Content-Length" {
			h[k] = v
		}
	}
	body := page.body.Bytes()
	if strings.HasPrefix(page.header.Get("Content-Type"), "text/html") || strings.HasPrefix(http.DetectContentType(body), "text/html") {
		body = queuesPage(body)
		h.Set("Content-Type", "text/html; charset=utf-8")
	}
	c.Response().WriteHeader(cmp.Or(page.status, http.StatusOK))
	_, err := c.Response().Write(body)
	return err
}

// queuesPage is asynqmon's page as Sekali serves it: without the Google
// Fonts stylesheets it would fetch (the console loads nothing from
// elsewhere, and a console behind a firewall could not; the UI's icons are
// SVG, its text falls back to the system's sans-serif), without its web
// app manifest (which a browser fetches without the session cookie, so
// it would get the log-in page), and with a link back to the console in
// its bottom right corner.
func queuesPage(html []byte) []byte {
	html = externalStylesheet.ReplaceAll(html, nil)
	html = manifestLink.ReplaceAll(html, nil)
	back := `<a href="/admin" id="back-to-console" style="position:fixed;right:16px;bottom:16px;z-index:2000;padding:6px 12px;border-radius:6px;` +
		`background:#1f4e79;color:#fff;font:600 14px sans-serif;text-decoration:none;box-shadow:0 1px 4px rgba(0,0,0,.3)">« Sekali admin</a>`
	return bytes.Replace(html, []byte("<body>"), []byte("<body>"+back), 1)
}

var (
	externalStylesheet = regexp.MustCompile(`<link rel="stylesheet" href="https?://[^"]*"/?>`)
	manifestLink       = regexp.MustCompile(`<link rel="manifest" href="[^"]*"/?>`)
)

// pageBuffer is a ResponseWriter that keeps what it is given.
type pageBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *pageBuffer) Header() http.Header { return b.header }

func (b *pageBuffer) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *pageBuffer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// gatewayPhases are the phase filter's choices: the open ones (planned or
// sent: not over), then each phase.
var gatewayPhases = []string{gatewaycalls.PhaseOpen, string(models.GatewayAwaitingApproval), string(models.GatewayPlanned), string(models.GatewaySent),
	string(models.GatewayDone), string(models.GatewayFailed), string(models.GatewayDeclined), string(models.GatewayDiscarded),
	string(models.GatewayConflict)}

// adminGatewayRequests is GET /admin/gateway-requests: the calls Sekali
// made to payment gateways (docs/gateway-calls.md), newest first; ?phase=open
// lists those not over.
func (s *Server) adminGatewayRequests(c echo.Context) error {
	p := newParams(c.QueryParams())
	f := gatewaycalls.Filter{Phase: p.oneOf("phase", gatewayPhases...), Before: p.id("before"), Limit: p.limit()}
	if err := p.check(c); err != nil {
		return err
	}
	var rs []models.GatewayRequest
	var next int64
	if s.deps.Calls != nil {
		var err error
		if rs, next, err = s.deps.Calls.List(c.Request().Context(), f); err != nil {
			return err
		}
	}
	v := listPage(s, c, "/admin/gateway-requests", rs, formatID(next), gatewayRow)
	page := views.GatewayRequestsPage(v, f.Phase, gatewayPhases, s.deps.Checkout != nil || s.deps.Refunds != nil)
	return s.show(c, "Gateway calls", "orders", v, page) // reached from an order's page and the outbox
}
