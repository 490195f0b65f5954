package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/testenv"
)

// Every error reaches the client as the one error handler shapes it:
// problem details (application/problem+json, with the status, a code and
// a title) on /api and /callbacks and for any client that does not ask
// for HTML; an HTML page for a browser; the status the code maps to.
func TestErrorsAreProblemDetails(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	huge := bytes.Repeat([]byte("x"), 2<<20)
	for _, tt := range []struct {
		name, method, path, contentType string
		body                            []byte
		status                          int
		code                            string
	}{
		{"unknown route", "GET", "/api/nothing-here", "", nil, 404, "not_found"},
		{"unknown order", "GET", "/api/orders/ORD-01JZZZZZZZZZZZZZZZZZZZZZZZ", "", nil, 404, "not_found"},
		{"method not allowed", "DELETE", "/api/orders", "", nil, 405, "method_not_allowed"},
		{"method not allowed, admin API", "POST", "/api/admin/orders", "application/json", []byte(`{}`), 405, "method_not_allowed"},
		{"method not allowed, console", "DELETE", "/admin/orders", "", nil, 405, "method_not_allowed"},
		{"unknown console page", "GET", "/admin/nothing-here", "", nil, 404, "not_found"},
		{"method not allowed, payment page", "DELETE", "/sandbox/pay/ORD-01JZZZZZZZZZZZZZZZZZZZZZZZ", "", nil, 405, "method_not_allowed"},
		{"body over the API's 1 MB", "POST", "/api/orders", "application/json", huge, 413, "too_large"},
		{"not JSON", "POST", "/api/orders", "text/plain", []byte("hello"), 415, "unsupported_media_type"},
		{"malformed JSON", "POST", "/api/orders", "application/json", []byte(`{"items":`), 400, "invalid_payload"},
		{"unknown provider", "POST", "/callbacks/paypal", "application/json", []byte(`{}`), 404, "not_found"},
	} {
		req, err := http.NewRequest(tt.method, c.URL+tt.path, bytes.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if tt.contentType != "" {
			req.Header.Set("Content-Type", tt.contentType)
		}
		req.Header.Set("Idempotency-Key", "errors-test-"+strings.ReplaceAll(tt.name, " ", "-"))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var p struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
			Title  string `json:"title"`
			Type   string `json:"type"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("%s: not JSON: %s", tt.name, b)
			continue
		}
		if res.StatusCode != tt.status || p.Status != tt.status || p.Code != tt.code || p.Title == "" || p.Type != "/problems/"+tt.code ||
			!strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: %d %q %s, want %d %s as problem+json", tt.name, res.StatusCode, res.Header.Get("Content-Type"), b, tt.status, tt.code)
		}
	}

	// The same miss from a browser is a page, in the shop's layout.
	req, _ := http.NewRequest("GET", c.URL+"/no-such-page", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 404 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(b), "<html") {
		t.Errorf("a browser's 404: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

// A field of the wrong type is named in words, as docs/api.md writes
// them: "items.qty must be a whole number", never "a int64".
func TestWrongTypeIsSaidInWords(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	for _, tt := range []struct{ body, want string }{
		{`{"customer_email":"a@example.com","items":[{"sku":"X","qty":1.5}]}`, "items.qty must be a whole number"},
		{`{"customer_email":"a@example.com","items":[{"sku":"X","qty":1e3}]}`, "items.qty must be a whole number"},
		{`{"customer_email":"a@example.com","items":[{"sku":"X","qty":"2"}]}`, "items.qty must be a whole number"},
		{`{"customer_email":7,"items":[]}`, "customer_email must be a string"},
		{`{"customer_email":"a@example.com","items":{}}`, "items must be a list"},
		{`[1]`, "the body must be an object"},
	} {
		req, err := http.NewRequest("POST", c.URL+"/api/orders", strings.NewReader(tt.body))
		key := "wrong-type-test-" + strings.NewReplacer(`"`, "", " ", "").Replace(tt.body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var p struct{ Code, Detail string }
		if err := json.Unmarshal(b, &p); err != nil || res.StatusCode != 422 || p.Code != "invalid_request" ||
			!strings.HasPrefix(p.Detail, tt.want) || strings.Contains(p.Detail, "int64") {
			t.Errorf("%s: %d %s; want 422 invalid_request saying %q", tt.body, res.StatusCode, b, tt.want)
		}
	}
}

// An amount written with an exponent (1e3), a sign or a fraction its
// currency has not is a malformed value, not a missing field: a callback
// carrying one is answered 422 invalid_request, saying why; a missing
// amount is still missing_field.
func TestMalformedAmountIsInvalidNotMissing(t *testing.T) {
	t.Parallel()
	srv, svc, db := callbackServer(t, nil)
	id := newOrders(t, svc, 1)[0]
	for i, tt := range []struct{ amount, code, says string }{
		{`1e3`, "invalid_request", "exponent"},
		{`-1000`, "invalid_request", "paid_amount must be a whole number"},
		{`1000.5`, "invalid_request", "paid_amount must be a whole number"},
		{``, "missing_field", "paid_amount is missing"},
	} {
		body := `{"order_id":"` + id + `","transaction_id":"tx-amount","payment_status":"paid","currency":"IDR"`
		if tt.amount != "" {
			body += `,"paid_amount":` + tt.amount
		}
		body += "}"
		req := httptest.NewRequest("POST", "/callbacks/sandbox", strings.NewReader(body))
		req.Header = testenv.SandboxHeaders(fmt.Sprintf("evt_amount_%d", i), []byte(body), time.Now())
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var p struct{ Code, Detail string }
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 422 || p.Code != tt.code || !strings.Contains(p.Detail, tt.says) {
			t.Errorf("paid_amount %q: %d %s; want 422 %s saying %q", tt.amount, rec.Code, rec.Body, tt.code, tt.says)
		}
	}
	// Each is kept as a refused delivery, under its own outcome.
	testenv.Eventually(t, "the refused deliveries' rows", func() bool {
		return count(t, db, "SELECT count(*) FROM callback_deliveries WHERE response_code = 422") == 4
	})
	if n := count(t, db, "SELECT count(*) FROM callback_deliveries WHERE outcome = 'invalid_request'"); n != 3 {
		t.Errorf("%d deliveries kept as invalid_request; want the 3 malformed amounts", n)
	}
}
