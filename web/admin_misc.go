package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// adminActions is GET /admin/actions: the admin action log, newest first.
func (s *Server) adminActions(c echo.Context) error {
	p := newParams(c.QueryParams())
	f := admins.ActionFilter{Admin: p.text("admin"), Action: p.text("action"), Before: p.id("before"), Limit: int(p.id("limit"))}
	if p.err != nil {
		return p.err
	}
	as, next, err := s.deps.Admins.ListActions(c.Request().Context(), f)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	v := views.Actions{
		Now: s.deps.Now(), Filter: views.ActionFilter{Admin: f.Admin, Action: f.Action}, Rows: rows(as, actionRow),
		Next: nextURL("/admin/actions", q, formatID(next)), Self: selfURL("/admin/actions", q),
	}
	return s.show(c, "Actions", "actions", v, views.ActionsPage(v, firstURL("/admin/actions", q)))
}

// adminHelp is GET /admin/help: the debugging guide.
func (s *Server) adminHelp(c echo.Context) error {
	return s.page(c, http.StatusOK, "Help", "help", views.HelpPage())
}

// queuesHandler serves the queue's own UI (asynqmon) under /admin/queues,
// behind the console's log-in. What it changes — deleting, running or
// archiving tasks — is written to the action log like every admin action.
func (s *Server) queuesHandler() echo.HandlerFunc {
	h := echo.WrapHandler(s.deps.Queues)
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
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
