package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// The admin API's lists are typed JSON of their own: numbers are numbers,
// amounts are minor units beside their currency, times are RFC 3339, an
// absent value is null, and nothing is formatted for people ("Rp 1.000",
// "60.0%", "3m ago"). The next page's link stays on the API, and
// following it with the token walks every row once.
func TestAdminAPIListsAreTypedJSON(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "TYPED", 150000, 10)
	paid := c.newOrder("TYPED", 1)
	c.newOrder("TYPED", 2)
	if got := c.deliver("evt_typed", testenv.SandboxBody(paid.ID, "tx-typed", models.EventPaid, paid.TotalAmount)); got != 200 {
		t.Fatalf("delivery: %d", got)
	}

	cbs := c.api("/api/admin/callbacks")
	if cbs.StatusCode != 200 || cbs.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/api/admin/callbacks: %d %s %s", cbs.StatusCode, cbs.Header.Get("Content-Type"), cbs.Body)
	}
	var list struct {
		Rows []map[string]any
		Next *string
	}
	if err := json.Unmarshal([]byte(cbs.Body), &list); err != nil || len(list.Rows) != 1 {
		t.Fatalf("callbacks JSON: %v %s", err, cbs.Body)
	}
	row := list.Rows[0]
	for field, want := range map[string]any{
		"idempotency_key": "evt_typed", "order_id": paid.ID, "event": "paid", "amount": float64(150000),
		"currency": "IDR", "result": "processed", "status": "processed", "attempts": float64(1), "conflict_count": float64(0),
		"response_code": float64(200),
	} {
		if row[field] != want {
			t.Errorf("callback %s = %#v, want %#v", field, row[field], want)
		}
	}
	for _, field := range []string{"first_received_at", "last_received_at", "processed_at"} {
		at, _ := row[field].(string)
		if _, err := time.Parse(time.RFC3339, at); err != nil || !strings.HasSuffix(at, "Z") {
			t.Errorf("callback %s = %#v, want an RFC 3339 time in UTC", field, row[field])
		}
	}
	if list.Next != nil {
		t.Errorf("one callback, yet next = %q", *list.Next)
	}
	noPresentation(t, "callbacks", cbs.Body)

	// Orders, a page at a time: the next link is on /api/admin and
	// keeps the filter.
	var seen []string
	next := "/api/admin/orders?limit=1"
	for pages := 0; next != ""; pages++ {
		if pages > 2 {
			t.Fatal("the pages do not end")
		}
		p := c.api(next)
		var orders struct {
			Rows []struct {
				ID          string     `json:"id"`
				Status      string     `json:"status"`
				TotalAmount int64      `json:"total_amount"`
				Currency    string     `json:"currency"`
				PaidAt      *time.Time `json:"paid_at"`
			}
			Next *string
		}
		if err := json.Unmarshal([]byte(p.Body), &orders); err != nil || p.StatusCode != 200 || len(orders.Rows) != 1 {
			t.Fatalf("%s: %d %v %s", next, p.StatusCode, err, p.Body)
		}
		noPresentation(t, next, p.Body)
		o := orders.Rows[0]
		if o.Currency != "IDR" || o.TotalAmount%150000 != 0 || (o.Status == "paid") != (o.PaidAt != nil) {
			t.Errorf("order row %+v", o)
		}
		seen = append(seen, o.ID)
		next = ""
		if orders.Next != nil {
			next = *orders.Next
			if !strings.HasPrefix(next, "/api/admin/orders?") || !strings.Contains(next, "limit=1") {
				t.Errorf("next = %q, want the API's orders with limit=1", next)
			}
		}
	}
	if len(seen) != 2 || seen[1] != paid.ID {
		t.Errorf("pages showed %v, want both orders, newest first", seen)
	}

	// Every list and page answers its JSON; none carries a
	// presentation string.
	for _, path := range []string{"/api/admin", "/api/admin/deliveries", "/api/admin/orders/" + paid.ID,
		"/api/admin/jobs", "/api/admin/outbox", "/api/admin/products", "/api/admin/products/TYPED", "/api/admin/actions",
		fmt.Sprintf("/api/admin/callbacks/%v", row["id"])} {
		p := c.api(path)
		var v map[string]any
		if p.StatusCode != 200 || json.Unmarshal([]byte(p.Body), &v) != nil {
			t.Errorf("%s: %d %.300s", path, p.StatusCode, p.Body)
			continue
		}
		noPresentation(t, path, p.Body)
	}
}

// noPresentation fails when a JSON body holds a string formatted for
// people: money ("Rp 150.000"), a percentage, a relative time, a dash
// for "none".
func noPresentation(t *testing.T, what, body string) {
	t.Helper()
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if strings.HasPrefix(v, "Rp ") || strings.HasSuffix(v, "%") || strings.HasSuffix(v, " ago") || v == "—" {
				t.Errorf("%s: a presentation string %q", what, v)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	walk(v)
}

// One console URL answers what the client asks for: with a session,
// Accept: application/json gets the JSON that /api/admin gives, and
// text/html (a browser) the page; htmx gets its fragment. /api/admin
// answers JSON with no Accept, with */*, and even to text/html (the API
// speaks JSON, as its errors do). Every one of these answers says Vary:
// Accept, and a console error follows the same choice.
func TestConsoleReadsNegotiateByAccept(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "NEGO", 1000, 10)
	o := c.newOrder("NEGO", 1)

	isJSON := func(p page) bool {
		var v struct{ Rows []struct{ ID string } }
		return p.StatusCode == 200 && p.Header.Get("Content-Type") == "application/json" &&
			json.Unmarshal([]byte(p.Body), &v) == nil && len(v.Rows) == 1 && v.Rows[0].ID == o.ID
	}
	isPage := func(p page) bool {
		return p.StatusCode == 200 && strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") &&
			strings.Contains(p.Body, "<html") && strings.Contains(p.Body, o.ID)
	}
	varies := func(p page) bool {
		for _, v := range p.Header.Values("Vary") {
			for _, name := range strings.Split(v, ",") {
				if strings.EqualFold(strings.TrimSpace(name), "Accept") {
					return true
				}
			}
		}
		return false
	}
	session := func(header http.Header) page { return c.do(c.client, "GET", "/admin/orders", nil, header) }
	// token asks the API; accept "" sends no Accept at all.
	token := func(accept string) page {
		req, err := http.NewRequest("GET", c.URL+"/api/admin/orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return page{Response: res, Body: string(b)}
	}

	for _, tt := range []struct {
		name   string
		answer page
		json   bool
	}{
		{"session, Accept: application/json", session(http.Header{"Accept": {"application/json"}}), true},
		{"session, JSON ranked above HTML", session(http.Header{"Accept": {"text/html;q=0.5, application/json"}}), true},
		{"session, a browser's Accept", session(http.Header{"Accept": {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}}), false},
		{"session, Accept: text/html", session(http.Header{"Accept": {"text/html"}}), false},
		{"session, Accept: */*", session(http.Header{"Accept": {"*/*"}}), false},
		{"token, no Accept", token(""), true},
		{"token, Accept: */*", token("*/*"), true},
		{"token, Accept: application/json", token("application/json"), true},
		{"token, Accept: text/html", token("text/html"), true},
	} {
		switch {
		case tt.json && !isJSON(tt.answer):
			t.Errorf("%s: %d %s, want the orders as JSON: %.200s", tt.name, tt.answer.StatusCode, tt.answer.Header.Get("Content-Type"), tt.answer.Body)
		case !tt.json && !isPage(tt.answer):
			t.Errorf("%s: %d %s, want the orders page: %.200s", tt.name, tt.answer.StatusCode, tt.answer.Header.Get("Content-Type"), tt.answer.Body)
		}
		if !varies(tt.answer) {
			t.Errorf("%s: Vary %q lacks Accept", tt.name, tt.answer.Header.Values("Vary"))
		}
	}
	// The session's JSON is the API's JSON.
	if a, b := session(http.Header{"Accept": {"application/json"}}), token(""); a.Body != b.Body {
		t.Errorf("the console's JSON differs from the API's:\n%s\n%s", a.Body, b.Body)
	}

	// htmx asks for the fragment, whatever its Accept.
	frag := session(http.Header{"HX-Request": {"true"}, "Accept": {"*/*"}})
	if frag.StatusCode != 200 || strings.Contains(frag.Body, "<html") || !strings.Contains(frag.Body, o.ID) || !varies(frag) {
		t.Errorf("htmx: %d, a fragment: %v, Vary %q", frag.StatusCode, !strings.Contains(frag.Body, "<html"), frag.Header.Values("Vary"))
	}

	// A detail page too.
	detail := c.do(c.client, "GET", "/admin/orders/"+o.ID, nil, http.Header{"Accept": {"application/json"}})
	var d struct{ Order struct{ ID, Status string } }
	if json.Unmarshal([]byte(detail.Body), &d) != nil || d.Order.ID != o.ID || d.Order.Status != "pending" {
		t.Errorf("order page as JSON: %d %.200s", detail.StatusCode, detail.Body)
	}

	// A console error answers as the read would have.
	bad := c.do(c.client, "GET", "/admin/orders?status=lost", nil, http.Header{"Accept": {"application/json"}})
	if bad.StatusCode != 422 || bad.Header.Get("Content-Type") != "application/problem+json" || !varies(bad) {
		t.Errorf("a bad filter asked as JSON: %d %s", bad.StatusCode, bad.Header.Get("Content-Type"))
	}
	bad = c.do(c.client, "GET", "/admin/orders?status=lost", nil, http.Header{"Accept": {"text/html"}})
	if bad.StatusCode != 422 || !strings.HasPrefix(bad.Header.Get("Content-Type"), "text/html") || !varies(bad) {
		t.Errorf("a bad filter asked as HTML: %d %s", bad.StatusCode, bad.Header.Get("Content-Type"))
	}
}

// TestConsoleJSONWithoutASessionIs401: a script that asks a console page
// for JSON without being logged in gets a 401 problem, not the log-in
// page's redirect; a browser still goes to the log-in page.
func TestConsoleJSONWithoutASessionIs401(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	p := c.do(c.client, "GET", "/admin/orders", nil, http.Header{"Accept": {"application/json"}})
	var prob struct{ Code string }
	if p.StatusCode != 401 || p.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal([]byte(p.Body), &prob) != nil || prob.Code != "unauthorized" {
		t.Errorf("JSON without a session: %d %s %.200s; want a 401 unauthorized problem", p.StatusCode, p.Header.Get("Content-Type"), p.Body)
	}
	p = c.do(c.client, "GET", "/admin/orders", nil, http.Header{"Accept": {"text/html"}})
	if p.StatusCode != 303 || !strings.HasPrefix(p.Header.Get("Location"), "/admin/login?next=") {
		t.Errorf("a page without a session: %d to %q; want 303 to the log-in", p.StatusCode, p.Header.Get("Location"))
	}
}
