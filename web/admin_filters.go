package web

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Filters come from query parameters, so that a filtered list is a URL
// that can be shared. Each list parses its own parameters once, with
// these helpers, then checks them (params.check): a value that cannot be
// understood is a 422 that names the parameter, and a parameter the list
// does not take is a 400 in the API that names the ones it does (on the
// page, a notice above the list) — never a silently ignored filter.

// maxFilterLength bounds a text filter.
const maxFilterLength = 200

// params reads a list's query parameters.
type params struct {
	q    url.Values
	err  error
	read map[string]bool // the parameters the list took
}

func newParams(q url.Values) *params { return &params{q: q, read: map[string]bool{}} }

// text is a trimmed text parameter of at most maxFilterLength characters.
// Every parameter is single-valued: given twice (?status=a&status=b) it
// is refused, not read as either.
func (p *params) text(name string) string {
	p.read[name] = true
	if len(p.q[name]) > 1 {
		p.fail(name, "must be given once, not %d times", len(p.q[name]))
		return ""
	}
	v := strings.TrimSpace(p.q.Get(name))
	if len(v) > maxFilterLength || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		p.fail(name, "must be at most %d characters of text", maxFilterLength)
		return ""
	}
	return v
}

// oneOf is a parameter that must be empty or one of allowed.
func (p *params) oneOf(name string, allowed ...string) string {
	v := p.text(name)
	if v == "" {
		return ""
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail(name, "must be one of %s", strings.Join(allowed, ", "))
	return ""
}

// id is a positive integer parameter, 0 when absent.
func (p *params) id(name string) int64 {
	v := p.text(name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		p.fail(name, "must be a positive whole number")
		return 0
	}
	return n
}

// limit is the page size a list is asked for, 1 to store.MaxPageSize; 0
// (the default size) when absent. A larger one is refused rather than
// answered with fewer rows than were asked.
func (p *params) limit() int {
	n := p.id("limit")
	if n > store.MaxPageSize {
		p.fail("limit", "must be from 1 to %d", store.MaxPageSize)
		return 0
	}
	return int(n)
}

// bodyField is a search of kept bodies by path = value
// (payments.ParseBodyField), none when absent.
func (p *params) bodyField(name string) payments.BodyField {
	v := p.text(name)
	if v == "" {
		return payments.BodyField{}
	}
	f, err := payments.ParseBodyField(v)
	if err != nil {
		p.fail(name, "%s", models.ErrorMessage(err))
	}
	return f
}

// timeLayouts are accepted for times: what <input type="datetime-local">
// sends (read as UTC), with or without seconds, and RFC 3339.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339}

// time is a time parameter, zero when absent.
func (p *params) time(name string) time.Time {
	v := p.text(name)
	if v == "" {
		return time.Time{}
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, v, time.UTC); err == nil {
			return t
		}
	}
	p.fail(name, "must be a UTC time such as 2026-11-30T14:05")
	return time.Time{}
}

// check ends the reading of a list's parameters: the first value that
// could not be understood, or the parameters the list does not take. An
// API client gets those as a 400 unknown_parameter naming the ones it
// does take; a person gets the list with a notice saying the same
// (ctxNotice), since a hand-edited URL should still show the page.
func (p *params) check(c echo.Context) error {
	if p.err != nil {
		return p.err
	}
	var unknown []string
	for name := range p.q {
		if !p.read[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	takes := "no parameters"
	if len(p.read) > 0 {
		takes = strings.Join(slices.Sorted(maps.Keys(p.read)), ", ")
	}
	msg := fmt.Sprintf("this list does not take %s; it takes %s", strings.Join(unknown, ", "), takes)
	if wantsJSON(c) {
		return models.Errorf(models.EUnknownParameter, "%s", msg)
	}
	c.Set(ctxNotice, msg+" (ignored here)")
	return nil
}

func (p *params) fail(name, format string, args ...any) {
	if p.err == nil {
		p.err = models.Errorf(models.EInvalid, "%s "+format, append([]any{name}, args...)...)
	}
}

// nextURL is the URL of the page after this one: the same filters, with
// the cursor.
func nextURL(path string, q url.Values, cursor string) string {
	if cursor == "" || cursor == "0" {
		return ""
	}
	v := url.Values{}
	for k, vs := range q {
		if k != "before" && len(vs) > 0 && vs[0] != "" {
			v.Set(k, vs[0])
		}
	}
	v.Set("before", cursor)
	return path + "?" + v.Encode()
}

// selfURL is this page's URL without the cursor's absence mattering: the
// filters as given.
func selfURL(path string, q url.Values) string {
	v := url.Values{}
	for k, vs := range q {
		if len(vs) > 0 && vs[0] != "" {
			v.Set(k, vs[0])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// firstURL is the first page of the list with the same filters, "" when
// this is the first page.
func firstURL(path string, q url.Values) string {
	if q.Get("before") == "" {
		return ""
	}
	v := url.Values{}
	for k, vs := range q {
		if k != "before" && len(vs) > 0 && vs[0] != "" {
			v.Set(k, vs[0])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

func formatID(id int64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatInt(id, 10)
}
