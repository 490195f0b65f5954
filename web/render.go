package web

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/web/views"
)

// Context keys the console's middleware sets.
const (
	ctxAdmin   = "admin"   // the logged-in admin's email
	ctxSession = "session" // true once the session is loaded
)

// page renders a console page with status: the whole page, or, for an
// htmx request, only its content (the element that asked picks out what
// it needs with hx-select). The page is rendered into a buffer first, so
// a failure halfway is still answered by the error handler.
func (s *Server) page(c echo.Context, status int, title, section string, content templ.Component) error {
	m := views.Meta{Title: title, Section: section, Admin: adminOf(c), Flash: s.popFlash(c)}
	comp := views.Layout(m, content)
	if isHTMX(c) {
		comp = views.Content(m, content)
	}
	return renderHTML(c, status, comp)
}

// renderHTML renders comp into a buffer, then sends it. The rendering
// ignores the request's cancellation: an error page is often rendered
// after the request's deadline has been released, and rendering touches
// no I/O.
//
// Every page here is a whole page or, for htmx, a fragment, on one URL:
// Vary: HX-Request tells a cache that they differ.
func renderHTML(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Add("Vary", "HX-Request")
	var buf bytes.Buffer
	if err := comp.Render(context.WithoutCancel(c.Request().Context()), &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// show answers a console read: the page, or on the /api/admin twin of
// its route, the same view struct as JSON.
func (s *Server) show(c echo.Context, title, section string, v any, content templ.Component) error {
	if isAdminAPI(c) {
		return c.JSON(http.StatusOK, v)
	}
	return s.page(c, http.StatusOK, title, section, content)
}

// isHTMX reports whether htmx sent the request (it asks for a fragment).
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// isAdminAPI reports whether the request came in on the JSON twin of a
// console page, /api/admin/...
func isAdminAPI(c echo.Context) bool { return strings.HasPrefix(c.Request().URL.Path, "/api/admin") }

// adminOf is the logged-in admin's email, "" outside the console.
func adminOf(c echo.Context) string {
	email, _ := c.Get(ctxAdmin).(string)
	return email
}

// flash keeps a message for the next page the admin sees (after a
// redirect).
func (s *Server) flash(c echo.Context, tone, text string) {
	if c.Get(ctxSession) != true {
		return
	}
	s.deps.Sessions.Put(c.Request().Context(), "flash", tone+"|"+text)
}

func (s *Server) popFlash(c echo.Context) *views.Flash {
	if c.Get(ctxSession) != true {
		return nil
	}
	v := s.deps.Sessions.PopString(c.Request().Context(), "flash")
	tone, text, ok := strings.Cut(v, "|")
	if !ok {
		return nil
	}
	return &views.Flash{Tone: tone, Text: text}
}

// seeOther answers a form post the way the form expects: a 303 to url,
// which htmx follows too (HX-Location would skip the history entry).
func seeOther(c echo.Context, url string) error {
	if isHTMX(c) {
		c.Response().Header().Set("HX-Redirect", url)
		return c.NoContent(http.StatusOK)
	}
	return c.Redirect(http.StatusSeeOther, url)
}
