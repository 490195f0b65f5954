package xendit_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/xendit"
)

func pageRequest() gatewaycalls.PageRequest { return gatewaytest.PageRequest("ORD-P-1") }

// seen is one request a test server received.
type seen struct {
	method, path, query, contentType string
	user, password                   string
	basic                            bool
	body                             []byte
}

// answer is what a test server answers to one method.
type answer struct {
	status int
	body   string
}

// none is Xendit's list of no invoices.
var none = answer{http.StatusOK, `[]`}

// xenditServer answers GET with list and POST with create, and sends what
// it received on the returned channel.
func xenditServer(t *testing.T, list, create answer) (*xendit.PageOpener, <-chan seen) {
	t.Helper()
	got := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, password, basic := r.BasicAuth()
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), user, password, basic, b}
		a := create
		if r.Method == http.MethodGet {
			a = list
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	o, err := xendit.NewPageOpener(apiKey, srv.URL+"/sandbox/xendit/")
	if err != nil {
		t.Fatal(err)
	}
	return o, got
}

const invoiceBody = `{"id":"579c8d61f23fa4ca35e52da4","external_id":"ORD-P-1","status":"PENDING","amount":150000,"currency":"IDR",` +
	`"invoice_url":"https://checkout-staging.xendit.co/web/579c8d61f23fa4ca35e52da4","expiry_date":"2099-01-01T00:00:00.000Z"}`

// The invoice asked for, when Xendit lists none for the key: first the
// look (GET /v2/invoices?external_id=), then the create with the key as
// external_id, whole rupiah as JSON numbers, the items, the customer's
// email, the return URL both ways, and invoice_duration to the order's
// deadline (870 s away); the secret key as the basic-auth user with no
// password, each time.
func TestXenditOpenPageRequest(t *testing.T) {
	t.Parallel()
	o, got := xenditServer(t, none, answer{http.StatusOK, invoiceBody})
	page, err := o.OpenPage(t.Context(), pageRequest())
	if err != nil {
		t.Fatal(err)
	}
	if page != (gatewaycalls.Page{ObjectID: "579c8d61f23fa4ca35e52da4",
		RedirectURL: "https://checkout-staging.xendit.co/web/579c8d61f23fa4ca35e52da4", Amount: 150000, Currency: "IDR"}) {
		t.Errorf("page %+v", page)
	}
	look := <-got
	if look.method != http.MethodGet || look.path != "/sandbox/xendit/v2/invoices" || look.query != "external_id=ORD-P-1" ||
		!look.basic || look.user != apiKey || look.password != "" {
		t.Errorf("look: %s %s?%s, basic %v %q:%q", look.method, look.path, look.query, look.basic, look.user, look.password)
	}
	r := <-got
	if r.method != http.MethodPost || r.path != "/sandbox/xendit/v2/invoices" || r.contentType != "application/json" ||
		!r.basic || r.user != apiKey || r.password != "" {
		t.Errorf("create: %s %s %s, basic %v %q:%q", r.method, r.path, r.contentType, r.basic, r.user, r.password)
	}
	const want = `{"external_id":"ORD-P-1","amount":150000,"currency":"IDR","payer_email":"budi@example.id","description":"Order ORD-P-1",` +
		`"success_redirect_url":"https://shop.example/orders/ORD-P-1?t=tok","failure_redirect_url":"https://shop.example/orders/ORD-P-1?t=tok",` +
		`"items":[{"name":"Kopi","quantity":2,"price":50000,"reference_id":"KOPI"},{"name":"Teh","quantity":1,"price":50000,"reference_id":"TEH"}],` +
		`"invoice_duration":870}`
	if string(r.body) != want {
		t.Errorf("body\n%s\nwant\n%s", r.body, want)
	}
}

// Amounts are JSON numbers in the currency's major unit: US cents are
// dollars with two decimals; no items, no email: neither is sent.
func TestXenditOpenPageAmounts(t *testing.T) {
	t.Parallel()
	o, got := xenditServer(t, none, answer{http.StatusOK, invoiceBody})
	r := gatewaycalls.PageRequest{OrderID: "ORD-P-2", Key: "ORD-P-2", Amount: 1250, Currency: "usd", ReturnURL: "https://shop.example/o"}
	if _, err := o.OpenPage(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	<-got
	var body map[string]json.RawMessage
	if err := json.Unmarshal((<-got).body, &body); err != nil {
		t.Fatal(err)
	}
	if string(body["amount"]) != "12.50" || string(body["currency"]) != `"USD"` {
		t.Errorf("amount %s %s", body["amount"], body["currency"])
	}
	if _, ok := body["items"]; ok {
		t.Errorf("items sent: %s", body["items"])
	}
	if _, ok := body["payer_email"]; ok {
		t.Errorf("payer_email sent: %s", body["payer_email"])
	}
}

// An invoice Xendit already lists for the key is the page: a pending one
// not expired, or a paid one; nothing is created. Expired ones (said so,
// or past their expiry_date) are passed over, and a new invoice is made.
func TestXenditOpenPageFindsInvoice(t *testing.T) {
	t.Parallel()
	inv := func(id, status, expiry string) string {
		return `{"id":"` + id + `","external_id":"ORD-P-1","status":"` + status + `","amount":150000,"currency":"IDR",` +
			`"invoice_url":"https://checkout-staging.xendit.co/web/` + id + `","expiry_date":"` + expiry + `"}`
	}
	past, future := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), "2099-01-01T00:00:00.000Z"
	for name, c := range map[string]struct {
		list    string
		found   string // the invoice answered; empty: created
		creates bool
	}{
		"pending":                           {list: "[" + inv("inv-1", "PENDING", future) + "]", found: "inv-1"},
		"paid":                              {list: "[" + inv("inv-1", "PAID", future) + "]", found: "inv-1"},
		"settled":                           {list: "[" + inv("inv-1", "SETTLED", future) + "]", found: "inv-1"},
		"expired, then pending":             {list: "[" + inv("inv-1", "EXPIRED", past) + "," + inv("inv-2", "PENDING", future) + "]", found: "inv-2"},
		"expired":                           {list: "[" + inv("inv-1", "EXPIRED", past) + "]", creates: true},
		"pending past its expiry":           {list: "[" + inv("inv-1", "PENDING", past) + "]", creates: true},
		"an invoice without an invoice_url": {list: `[{"id":"inv-1","status":"PENDING"}]`, creates: true},
		"Xendit's 404: none":                {list: `{"error_code":"INVOICE_NOT_FOUND_ERROR","message":"Invoice not found"}`, creates: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			status := http.StatusOK
			if name == "Xendit's 404: none" {
				status = http.StatusNotFound
			}
			o, got := xenditServer(t, answer{status, c.list}, answer{http.StatusOK, invoiceBody})
			page, err := o.OpenPage(t.Context(), pageRequest())
			if err != nil {
				t.Fatal(err)
			}
			<-got // the look
			created := len(got) == 1
			if created != c.creates || (!c.creates && (page.ObjectID != c.found ||
				page.RedirectURL != "https://checkout-staging.xendit.co/web/"+c.found)) {
				t.Errorf("page %+v, created %v; want %q, created %v", page, created, c.found, c.creates)
			}
		})
	}
}

// A request that cannot be sent is refused before it is: nothing is sent.
func TestXenditOpenPageRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	o, got := xenditServer(t, none, answer{http.StatusOK, invoiceBody})
	noKey := pageRequest()
	noKey.Key = ""
	short := pageRequest()
	short.Amount++
	free := pageRequest()
	free.Amount = 0
	gatewaytest.PageRefusedBeforeSending(t, o, got, noKey, short, free)
}

// Xendit's answers to the create: a definite "no" — a bad request, a
// wrong key, a key without the permission — is Refused with Xendit's
// error_code and message; a conflict, a rate limit, a 5xx or an answer
// without an invoice says nothing of whether Xendit acted.
func TestXenditOpenPageAnswers(t *testing.T) {
	t.Parallel()
	gatewaytest.PageAnswers(t, func(status int, body string) gatewaycalls.PageOpener {
		o, _ := xenditServer(t, none, answer{status, body})
		return o
	}, pageRequest(), []gatewaytest.PageAnswer{
		{Status: 400, Body: `{"error_code":"API_VALIDATION_ERROR","message":"external_id is required"}`,
			Refused: true, Message: "API_VALIDATION_ERROR: external_id is required"},
		// Sekali's settings (the key, the URL), not the request: not a "no".
		{Status: 401, Body: `{"error_code":"INVALID_API_KEY","message":"API key is invalid"}`},
		{Status: 403, Body: `{"error_code":"REQUEST_FORBIDDEN_ERROR","message":"The API key is forbidden to perform this request"}`},
		{Status: 404, Body: `not json`},
		{Status: 409, Body: `{"error_code":"DUPLICATE_ERROR","message":"duplicate"}`},
		{Status: 429, Body: `{"error_code":"RATE_LIMIT_EXCEEDED","message":"Too many requests"}`},
		{Status: 500, Body: `{"error_code":"SERVER_ERROR","message":"Something went wrong"}`},
		{Status: 502, Body: `<html>Bad Gateway</html>`},
		{Status: 200, Body: `not json`},
		{Status: 200, Body: `{"id":"inv-1","status":"PENDING"}`},
	})
}

// The look's answers: a wrong key, a 5xx or a body that is not a list is a
// plain error (a wrong key is Sekali's setting, not a "no" to the
// request), and nothing is created — the look must say "none" before a
// create.
func TestXenditOpenPageLookAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		list    answer
		refused bool
	}{
		{answer{http.StatusUnauthorized, `{"error_code":"INVALID_API_KEY","message":"API key is invalid"}`}, false},
		{answer{http.StatusForbidden, `{"error_code":"REQUEST_FORBIDDEN_ERROR","message":"forbidden"}`}, false},
		{answer{http.StatusInternalServerError, `{"error_code":"SERVER_ERROR","message":"oops"}`}, false},
		{answer{http.StatusTooManyRequests, `{"error_code":"RATE_LIMIT_EXCEEDED"}`}, false},
		{answer{http.StatusOK, `{"data":[]}`}, false},
	} {
		o, got := xenditServer(t, c.list, answer{http.StatusOK, invoiceBody})
		_, err := o.OpenPage(t.Context(), pageRequest())
		if err == nil || gatewaycalls.IsRefused(err) != c.refused {
			t.Errorf("look %d %s: %v, want refused %v", c.list.status, c.list.body, err, c.refused)
		}
		<-got
		if len(got) != 0 {
			t.Errorf("look %d %s: created anyway", c.list.status, c.list.body)
		}
	}
}

// No answer — the connection closed, or the context's deadline — is not
// a refusal.
func TestXenditOpenPageNoAnswer(t *testing.T) {
	t.Parallel()
	gatewaytest.PageNoAnswer(t, func(baseURL string) (gatewaycalls.PageOpener, error) {
		return xendit.NewPageOpener(apiKey, baseURL)
	}, pageRequest())
}

func TestXenditNewPageOpener(t *testing.T) {
	t.Parallel()
	o, err := xendit.NewPageOpener(apiKey, "")
	if err != nil || o.BaseURL != xendit.DefaultAPIURL || o.Provider() != "xendit" {
		t.Errorf("default: %+v, %v", o, err)
	}
	if _, err := xendit.NewPageOpener("sk_test_1", ""); err == nil {
		t.Error("a Stripe key accepted")
	}
}

// Xendit's invoice pages are on its checkout hosts; an API of its own (the
// sandbox gateway's emulation) serves its pages at its origin too.
func TestPageOrigins(t *testing.T) {
	t.Parallel()
	checkout := []string{"https://checkout.xendit.co", "https://checkout-staging.xendit.co"}
	for api, want := range map[string][]string{
		"":                                     checkout,
		"http://127.0.0.1:8080/sandbox/xendit": append(slices.Clone(checkout), "http://127.0.0.1:8080"),
	} {
		o, err := xendit.NewPageOpener("xnd_development_origins", api)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.PageOrigins(); !slices.Equal(got, want) {
			t.Errorf("api %q: %q, want %q", api, got, want)
		}
	}
}
