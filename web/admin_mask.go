package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/models"
)

// A viewer sees the console with customers' email addresses masked by
// rule (models.MaskEmail: "b***@e***.com"). The mask is laid over the
// whole answer — page, JSON, the queue UI — rather than over each field
// that holds an email, because emails also travel inside kept delivery
// bodies, job payloads and error messages, and a field missed would
// leak. Two nets, both from models.MaskEmailsIn: the email of every order
// the answer names, found by its id and masked however it is written
// (literally, JSON- or HTML-escaped, in a query), and every other
// address of the form the shop accepts. A JSON answer is decoded and
// written again by encoding/json, its strings masked in between, so that
// no content can make it invalid. The admins' own emails (the action
// log's actors) are left as they are.

// maskedTypes are the answers masked; anything else (a script, an image)
// is passed on as it is.
var maskedTypes = []string{"text/html", "application/json", "application/problem+json", "text/plain"}

// maxNamedOrders bounds the orders whose emails one answer looks up: a
// list page names at most 200.
const maxNamedOrders = 500

// orderIDInText finds an order id (models.NewOrderID) in an answer.
var orderIDInText = regexp.MustCompile(regexp.QuoteMeta(models.OrderIDPrefix) + `[0-9A-HJKMNP-TV-Z]{26}`)

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
		ctx := c.Request().Context()
		admins, lerr := s.deps.Admins.Emails(ctx)
		if lerr != nil {
			return lerr
		}
		known, lerr := s.deps.Orders.CustomerEmails(ctx, namedOrders(body))
		if lerr != nil {
			return lerr
		}
		keep := func(lower string) bool { return admins[lower] }
		if strings.Contains(ct, "json") {
			body = maskJSON(body, known, keep)
		} else {
			body = []byte(models.MaskEmailsIn(string(body), known, keep))
		}
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

// namedOrders are the distinct order ids body names, at most
// maxNamedOrders.
func namedOrders(body []byte) []string {
	seen := map[string]bool{}
	for _, id := range orderIDInText.FindAll(body, -1) {
		if len(seen) == maxNamedOrders {
			break
		}
		seen[string(id)] = true
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	return ids
}

// maskJSON is body, a JSON value, decoded token by token and written
// again by encoding/json with each string (member names too) masked.
// What is not one JSON value is masked as text: it was not valid JSON
// to begin with.
func maskJSON(body []byte, known []string, keep func(string) bool) []byte {
	mask := func(s string) string { return models.MaskEmailsIn(s, known, keep) }
	out, err := rewriteJSON(body, mask)
	if err != nil {
		return []byte(mask(string(body)))
	}
	return out
}

// rewriteJSON copies the JSON value in body with mask applied to every
// string, keeping the order of members.
func rewriteJSON(body []byte, mask func(string) string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var out bytes.Buffer
	// inObject[i] says whether the i-th open container is an object;
	// count[i] how many tokens it has held so far.
	var inObject []bool
	var count []int
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			inObject, count = inObject[:len(inObject)-1], count[:len(count)-1]
			out.WriteByte(byte(d))
			continue
		}
		if n := len(count); n == 0 && out.Len() > 0 {
			return nil, errors.New("more than one JSON value")
		} else if n > 0 {
			switch {
			case inObject[n-1] && count[n-1]%2 == 1:
				out.WriteByte(':')
			case count[n-1] > 0:
				out.WriteByte(',')
			}
			count[n-1]++
		}
		switch v := tok.(type) {
		case json.Delim:
			inObject, count = append(inObject, v == '{'), append(count, 0)
			out.WriteByte(byte(v))
			continue
		case string:
			tok = mask(v)
		}
		b, err := json.Marshal(tok)
		if err != nil {
			return nil, err
		}
		out.Write(b)
	}
	if len(count) > 0 || out.Len() == 0 {
		return nil, io.ErrUnexpectedEOF
	}
	return append(out.Bytes(), '\n'), nil
}

// heldWriter keeps an answer instead of sending it.
type heldWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *heldWriter) WriteHeader(status int)      { w.status = status }
func (w *heldWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
