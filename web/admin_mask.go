package web

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"
)

// A viewer sees the console with customers' email addresses masked:
// "a***@example.com". The mask is laid over the whole answer — page,
// JSON, the queue UI — rather than over each field that holds an email,
// because emails also travel inside kept delivery bodies, job payloads
// and error messages, and a field missed would leak. The admins' own
// emails (the action log's actors) are left as they are.

// emailPattern finds an email address in text, also as a query value
// (the @ written %40).
var emailPattern = regexp.MustCompile(`[A-Za-z0-9._+\-]+(?:@|%40)[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+`)

// maskedTypes are the answers masked; anything else (a script, an image)
// is passed on as it is.
var maskedTypes = []string{"text/html", "application/json", "application/problem+json", "text/plain"}

// maskEmails runs next with its answer held back, then sends it with
// every customer email masked.
func (s *Server) maskEmails(c echo.Context, next echo.HandlerFunc) error {
	res := c.Response()
	out := res.Writer
	held := &heldWriter{ResponseWriter: out, status: http.StatusOK}
	res.Writer = held
	err := next(c)
	if err != nil {
		// The error page is written here, while the answer is held, so
		// that it is masked too.
		c.Error(err)
	}
	res.Writer = out
	body := held.body.Bytes()
	if ct := out.Header().Get(echo.HeaderContentType); masked(ct) {
		admins, lerr := s.deps.Admins.Emails(c.Request().Context())
		if lerr != nil {
			return lerr
		}
		body = maskEmailsIn(body, admins)
		out.Header().Del(echo.HeaderContentLength)
	}
	out.WriteHeader(held.status)
	_, werr := out.Write(body)
	return werr
}

func masked(contentType string) bool {
	for _, t := range maskedTypes {
		if strings.HasPrefix(contentType, t) {
			return true
		}
	}
	return false
}

// maskEmailsIn masks each email in body that is not one of keep (lower
// case).
func maskEmailsIn(body []byte, keep map[string]bool) []byte {
	return emailPattern.ReplaceAllFunc(body, func(m []byte) []byte {
		at := "@"
		local, domain, ok := bytes.Cut(m, []byte("@"))
		if !ok {
			at = "%40"
			local, domain, _ = bytes.Cut(m, []byte("%40"))
		}
		if keep[strings.ToLower(string(local)+"@"+string(domain))] {
			return m
		}
		return []byte(string(local[:1]) + "***" + at + string(domain))
	})
}

// heldWriter keeps an answer instead of sending it.
type heldWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *heldWriter) WriteHeader(status int)      { w.status = status }
func (w *heldWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
