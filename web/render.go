package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// Context keys the console's middleware sets.
const (
	ctxAdmin   = "admin"   // the logged-in admin's email
	ctxRole    = "role"    // the logged-in admin's role (models.AdminRole)
	ctxSession = "session" // true once the session is loaded
	ctxToken   = "token"   // true once the admin API token is checked
	ctxNotice  = "notice"  // a warning for this page alone (params.check)
)

// page renders a console page with status: the whole page, or, for an
// htmx request, only its content (the element that asked picks out what
// it needs with hx-select). The page is rendered into a buffer first, so
// a failure halfway is still answered by the error handler.
func (s *Server) page(c echo.Context, status int, title, section string, content templ.Component) error {
	m := views.Meta{Title: title, Section: section, Admin: adminOf(c), Role: string(roleOf(c)), Flash: s.popFlash(c)}
	if notice, ok := c.Get(ctxNotice).(string); ok && m.Flash == nil {
		m.Flash = &views.Flash{Tone: "warn", Text: notice}
	}
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
	addVary(c, "HX-Request")
	var buf bytes.Buffer
	ctx := views.WithRole(context.WithoutCancel(c.Request().Context()), string(roleOf(c)))
	if err := comp.Render(ctx, &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// show answers a console read — the dashboard, a list, a detail page —
// on either of its URLs: view, the page's value (web/views), as JSON to a
// client that wants JSON, else the page that content draws from that
// same value. Only one is written.
func (s *Server) show(c echo.Context, title, section string, view any, content templ.Component) error {
	if wantsJSON(c) {
		return renderJSON(c, http.StatusOK, view)
	}
	return s.page(c, http.StatusOK, title, section, content)
}

// renderJSON encodes view whole before a byte is sent, so that an
// answer is either complete or an error's status: an encoding that
// fails halfway is answered by the error handler, never cut off after a
// 200. What a view holds of untrusted content is bounded where it is
// built (a kept body, a conflict's diff), so the whole is too.
func renderJSON(c echo.Context, status int, view any) error {
	b, err := json.Marshal(view)
	if err != nil {
		return fmt.Errorf("web: encode the answer: %w", err)
	}
	return c.JSONBlob(status, b)
}

// wantsJSON decides how a console read answers, on /admin/... (a
// session) and /api/admin/... (the admin API token) alike:
//
//   - with the admin API token: JSON, whatever Accept says — the API
//     speaks JSON, as its errors do (wantsProblemJSON);
//   - an htmx request: HTML, the fragment it swaps in;
//   - otherwise by Accept: JSON when it ranks application/json above
//     text/html; the page when it ranks text/html higher (a browser) or
//     ranks them alike (no Accept, */*).
//
// The answer depends on Accept, so Vary says so.
func wantsJSON(c echo.Context) bool {
	addVary(c, echo.HeaderAccept)
	switch {
	case c.Get(ctxToken) == true:
		return true
	case isHTMX(c):
		return false
	}
	return preferredType(c.Request().Header.Get(echo.HeaderAccept)) == "json"
}

// preferredType is which of JSON and HTML an Accept header ranks higher:
// "json", "html", or "" when it ranks them alike.
func preferredType(accept string) string {
	j, h := acceptQ(accept, "application/json"), acceptQ(accept, "text/html")
	switch {
	case j > h:
		return "json"
	case h > j:
		return "html"
	}
	return ""
}

// acceptQ is the weight (q) that an Accept header gives the media type
// typ: that of the most specific range matching it — typ itself, then
// its type/*, then */* — and 0 when none does (RFC 9110, 12.5.1).
func acceptQ(accept, typ string) float64 {
	major, _, _ := strings.Cut(typ, "/")
	q, best := 0.0, 0
	for _, r := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(r)
		if err != nil {
			continue
		}
		specificity := 0
		switch mediaType {
		case typ:
			specificity = 3
		case major + "/*":
			specificity = 2
		case "*/*":
			specificity = 1
		}
		if specificity <= best {
			continue
		}
		q, best = 1, specificity
		if v, err := strconv.ParseFloat(params["q"], 64); err == nil {
			q = v
		}
	}
	return q
}

// addVary adds a request header to the answer's Vary, once.
func addVary(c echo.Context, header string) {
	h := c.Response().Header()
	for _, v := range h.Values(echo.HeaderVary) {
		for _, name := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(name), header) {
				return
			}
		}
	}
	h.Add(echo.HeaderVary, header)
}

// isHTMX reports whether htmx sent the request (it asks for a fragment).
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// adminOf is the logged-in admin's email, "" outside the console.
func adminOf(c echo.Context) string {
	email, _ := c.Get(ctxAdmin).(string)
	return email
}

// roleOf is the logged-in admin's role, "" outside the console.
func roleOf(c echo.Context) models.AdminRole {
	role, _ := c.Get(ctxRole).(models.AdminRole)
	return role
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
