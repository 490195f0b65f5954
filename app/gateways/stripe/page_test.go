package stripe_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
)

const pageKey = "sk_test_page_0123456789"

func pageRequest() gatewaycalls.PageRequest { return gatewaytest.PageRequest("page:ORD-P-1:1") }

// seen is one request a test server received.
type seen struct {
	method, path, auth, key string
	form                    url.Values
}

// stripeServer answers every request with status and body, and sends
// what it received on the returned channel. prefix is the path of the
// base URL the opener is given.
func stripeServer(t *testing.T, prefix string, status int, body string) (*stripe.PageOpener, <-chan seen) {
	t.Helper()
	got := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		got <- seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.PostForm}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	o, err := stripe.NewPageOpener(pageKey, srv.URL+prefix)
	if err != nil {
		t.Fatal(err)
	}
	return o, got
}

const sessionBody = `{"id":"cs_test_1","object":"checkout.session","url":"https://checkout.stripe.com/c/pay/cs_test_1"}`

// The session asked for: payment mode, a line of price_data per item in
// Stripe's hundredths of a rupiah, the return URL both ways, the order
// in client_reference_id and in the session's and the PaymentIntent's
// metadata, and the request's key as the Idempotency-Key.
func TestOpenPageRequest(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"", "/sandbox/stripe", "/sandbox/stripe/", "/v1"} {
		t.Run(prefix, func(t *testing.T) {
			t.Parallel()
			o, got := stripeServer(t, prefix, http.StatusOK, sessionBody)
			page, err := o.OpenPage(t.Context(), pageRequest())
			if err != nil {
				t.Fatal(err)
			}
			if page != (gatewaycalls.Page{ObjectID: "cs_test_1", RedirectURL: "https://checkout.stripe.com/c/pay/cs_test_1"}) {
				t.Errorf("page %+v", page)
			}
			r := <-got
			wantPath := "/v1/checkout/sessions"
			if prefix == "/sandbox/stripe" || prefix == "/sandbox/stripe/" {
				wantPath = "/sandbox/stripe" + wantPath
			}
			if r.method != http.MethodPost || r.path != wantPath || r.auth != "Bearer "+pageKey || r.key != "page:ORD-P-1:1" {
				t.Errorf("%s %s, Authorization %q, Idempotency-Key %q", r.method, r.path, r.auth, r.key)
			}
			want := url.Values{
				"mode":                {"payment"},
				"success_url":         {"https://shop.example/orders/ORD-P-1?t=tok"},
				"cancel_url":          {"https://shop.example/orders/ORD-P-1?t=tok"},
				"client_reference_id": {"ORD-P-1"},
				"customer_email":      {"budi@example.id"},
				"metadata[order_id]":  {"ORD-P-1"},
				"payment_intent_data[metadata][order_id]":       {"ORD-P-1"},
				"line_items[0][quantity]":                       {"2"},
				"line_items[0][price_data][currency]":           {"idr"},
				"line_items[0][price_data][unit_amount]":        {"5000000"},
				"line_items[0][price_data][product_data][name]": {"Kopi"},
				"line_items[1][quantity]":                       {"1"},
				"line_items[1][price_data][currency]":           {"idr"},
				"line_items[1][price_data][unit_amount]":        {"5000000"},
				"line_items[1][price_data][product_data][name]": {"Teh"},
			}
			if !reflect.DeepEqual(r.form, want) {
				t.Errorf("form\n%v\nwant\n%v", r.form, want)
			}
		})
	}
}

// Amounts are Stripe's: JPY has no hundredths at Stripe, USD has.
func TestOpenPageAmounts(t *testing.T) {
	t.Parallel()
	for currency, want := range map[string]string{"JPY": "1500", "usd": "1500", "IDR": "150000"} {
		o, got := stripeServer(t, "", http.StatusOK, sessionBody)
		r := gatewaycalls.PageRequest{OrderID: "ORD-P-2", Key: "k", Amount: 1500, Currency: currency, ReturnURL: "https://shop.example/o",
			Items: []gatewaycalls.PageItem{{SKU: "X", Name: "X", Qty: 1, UnitPrice: 1500}}}
		if _, err := o.OpenPage(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		f := (<-got).form
		if f.Get("line_items[0][price_data][unit_amount]") != want {
			t.Errorf("%s: unit_amount %s, want %s", currency, f.Get("line_items[0][price_data][unit_amount]"), want)
		}
	}
}

// A request that cannot be sent is refused before it is: nothing is sent.
// An amount of nothing — without items, or with items of nothing — used
// to be sent: Stripe takes a line of unit_amount 0, and would have opened
// a page of nothing to pay.
func TestOpenPageRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	o, got := stripeServer(t, "", http.StatusOK, sessionBody)
	noKey := pageRequest()
	noKey.Key = ""
	short := pageRequest()
	short.Amount++
	free := pageRequest()
	free.Amount, free.Items = 0, nil
	freeItems := pageRequest()
	freeItems.Amount, freeItems.Items = 0, []gatewaycalls.PageItem{{SKU: "GIFT", Name: "Gift", Qty: 1, UnitPrice: 0}}
	gatewaytest.PageRefusedBeforeSending(t, o, got, noKey, short, free, freeItems)
}

// Stripe's answers: a definite "no" is Refused; a conflict with a request
// in progress, a rate limit, a 5xx or a body that is not Stripe's says
// nothing of whether Stripe acted.
func TestOpenPageAnswers(t *testing.T) {
	t.Parallel()
	gatewaytest.PageAnswers(t, func(status int, body string) gatewaycalls.PageOpener {
		o, _ := stripeServer(t, "", status, body)
		return o
	}, pageRequest(), []gatewaytest.PageAnswer{
		{Status: 400, Body: `{"error":{"type":"invalid_request_error","code":"parameter_missing","message":"Missing required param: mode."}}`,
			Refused: true, Message: "invalid_request_error: Missing required param: mode."},
		{Status: 400, Body: `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`}, // a spent key
		{Status: 401, Body: `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: sk_test_****6789"}}`},                                                    // Sekali's settings, not the request
		{Status: 402, Body: `{"error":{"type":"card_error","message":"Your card was declined."}}`, Refused: true},
		{Status: 403, Body: `{"error":{"type":"invalid_request_error","message":"The provided key does not have the required permissions."}}`},
		{Status: 404, Body: `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such price"}}`},
		{Status: 409, Body: `{"error":{"type":"idempotency_error","message":"There is currently another in-progress request using this Idempotent Key"}}`},
		{Status: 429, Body: `{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Too many requests."}}`},
		{Status: 500, Body: `{"error":{"type":"api_error","message":"Something went wrong on Stripe's end."}}`},
		{Status: 502, Body: `<html>Bad Gateway</html>`},
		{Status: 404, Body: `<html>Not Found</html>`}, // not Stripe's answer: a proxy's
		{Status: 200, Body: `not json`},
		{Status: 200, Body: `{"id":"cs_test_1","object":"checkout.session"}`},
	})
}

// No answer — the connection closed, or the context's deadline — is not
// a refusal.
func TestOpenPageNoAnswer(t *testing.T) {
	t.Parallel()
	gatewaytest.PageNoAnswer(t, func(baseURL string) (gatewaycalls.PageOpener, error) {
		return stripe.NewPageOpener(pageKey, baseURL)
	}, pageRequest())
}

func TestNewPageOpener(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ key, base string }{{"pk_test_1", ""}, {pageKey, "ftp://host"}, {pageKey, "no-scheme"}} {
		if _, err := stripe.NewPageOpener(c.key, c.base); err == nil {
			t.Errorf("NewPageOpener(%q, %q) accepted", c.key, c.base)
		}
	}
	o, err := stripe.NewPageOpener(pageKey, "")
	if err != nil || o.Provider() != "stripe" {
		t.Errorf("default: %v, %v", o, err)
	}
}

// The shop lets Pay lead to Stripe's Checkout, and to an API of its own's
// origin (the sandbox gateway's emulation serves its pages there).
func TestPageOrigins(t *testing.T) {
	t.Parallel()
	for base, want := range map[string][]string{
		"":                                     {"https://checkout.stripe.com"},
		"http://127.0.0.1:8080/sandbox/stripe": {"https://checkout.stripe.com", "http://127.0.0.1:8080"},
	} {
		o, err := stripe.NewPageOpener("sk_test_origins", base)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.PageOrigins(); !slices.Equal(got, want) {
			t.Errorf("base %q: %q, want %q", base, got, want)
		}
	}
}

// Stripe keeps a key's first answer, a 500 included, and replays it for
// 24 hours: a replayed 5xx — and an idempotency_error, the key used with
// other parameters — say the key is spent, so the caller moves to a new
// one; a 5xx not replayed says nothing.
func TestSpentKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status   int
		replayed bool
		body     string
		spent    bool
	}{
		{500, true, `{"error":{"type":"api_error","message":"Something went wrong"}}`, true},
		{500, false, `{"error":{"type":"api_error","message":"Something went wrong"}}`, false},
		{400, false, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.replayed {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			io.WriteString(w, c.body)
		}))
		o, err := stripe.NewPageOpener("sk_test_spent", srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, err = o.OpenPage(t.Context(), pageRequest())
		if gatewaycalls.IsKeySpent(err) != c.spent || gatewaycalls.IsRefused(err) {
			t.Errorf("%d replayed=%v: %v, want spent %v and no refusal", c.status, c.replayed, err, c.spent)
		}
		srv.Close()
	}
}
