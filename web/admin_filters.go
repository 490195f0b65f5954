package web

import (
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sekali/sekali/models"
)

// Filters come from query parameters, so that a filtered list is a URL
// that can be shared. Each list parses its own parameters once, with
// these helpers; a value that cannot be understood is a 422 that names
// the parameter, never a silently ignored filter.

// maxFilterLength bounds a text filter.
const maxFilterLength = 200

// params reads a list's query parameters.
type params struct {
	q   url.Values
	err error
}

func newParams(q url.Values) *params { return &params{q: q} }

// text is a trimmed text parameter of at most maxFilterLength characters.
func (p *params) text(name string) string {
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
