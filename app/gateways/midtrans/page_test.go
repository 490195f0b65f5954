package midtrans_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
)

const snapKey = "SB-Mid-server-PAGE0123456789"

func pageRequest() gatewaycalls.PageRequest { return gatewaytest.PageRequest("ORD-P-1-1") }

// seen is one request a test server received.
type seen struct {
	method, path, contentType string
	user, password            string
	basic                     bool
	body                      []byte
}

// snapServer answers every request with status and body, and sends what
// it received on the returned channel.
func snapServer(t *testing.T, status int, body string) (*midtrans.PageOpener, <-chan seen) {
	t.Helper()
	got := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, password, basic := r.BasicAuth()
		got <- seen{r.Method, r.URL.Path, r.Header.Get("Content-Type"), user, password, basic, b}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	o, err := midtrans.NewPageOpener(snapKey, srv.URL+"/sandbox/midtrans/")
	if err != nil {
		t.Fatal(err)
	}
	return o, got
}

const tokenBody = `{"token":"d379aa71-99eb-4dd1-b9bb-eefe813746e9","redirect_url":"https://app.sandbox.midtrans.com/snap/v3/redirection/d379aa71-99eb-4dd1-b9bb-eefe813746e9"}`

// The Snap transaction asked for: the key as order_id, whole rupiah, the
// items, the customer's email, the return URL as the finish callback,
// and an expiry at the order's deadline (14 min 30 s away: 15 whole
// minutes from now, in WIB); the server key as the basic-auth user with
// no password.
func TestOpenPageRequest(t *testing.T) {
	t.Parallel()
	o, got := snapServer(t, http.StatusCreated, tokenBody)
	page, err := o.OpenPage(t.Context(), pageRequest())
	if err != nil {
		t.Fatal(err)
	}
	if page != (gatewaycalls.Page{ObjectID: "d379aa71-99eb-4dd1-b9bb-eefe813746e9",
		RedirectURL: "https://app.sandbox.midtrans.com/snap/v3/redirection/d379aa71-99eb-4dd1-b9bb-eefe813746e9"}) {
		t.Errorf("page %+v", page)
	}
	r := <-got
	if r.method != http.MethodPost || r.path != "/sandbox/midtrans/snap/v1/transactions" || r.contentType != "application/json" ||
		!r.basic || r.user != snapKey || r.password != "" {
		t.Errorf("%s %s %s, basic %v %q:%q", r.method, r.path, r.contentType, r.basic, r.user, r.password)
	}
	const want = `{"transaction_details":{"order_id":"ORD-P-1-1","gross_amount":150000},` +
		`"item_details":[{"id":"KOPI","price":50000,"quantity":2,"name":"Kopi"},{"id":"TEH","price":50000,"quantity":1,"name":"Teh"}],` +
		`"customer_details":{"email":"budi@example.id"},"callbacks":{"finish":"https://shop.example/orders/ORD-P-1?t=tok"},` +
		`"expiry":{"start_time":"2026-12-01 17:00:30 +0700","unit":"minute","duration":15}}`
	if string(r.body) != want {
		t.Errorf("body\n%s\nwant\n%s", r.body, want)
	}
}

// Without items, email or deadline, none is sent.
func TestOpenPageMinimal(t *testing.T) {
	t.Parallel()
	o, got := snapServer(t, http.StatusCreated, tokenBody)
	r := gatewaycalls.PageRequest{OrderID: "ORD-P-2", Key: "ORD-P-2", Amount: 1000, Currency: "idr", ReturnURL: "https://shop.example/o"}
	if _, err := o.OpenPage(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal((<-got).body, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["item_details"]; ok {
		t.Errorf("item_details sent: %v", body)
	}
	if _, ok := body["customer_details"]; ok {
		t.Errorf("customer_details sent: %v", body)
	}
	if _, ok := body["expiry"]; ok {
		t.Errorf("expiry sent: %v", body)
	}
}

// A request that cannot be sent is refused before it is: nothing is sent.
func TestOpenPageRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	o, got := snapServer(t, http.StatusCreated, tokenBody)
	usd := pageRequest()
	usd.Currency = "USD"
	short := pageRequest()
	short.Amount++
	noKey := pageRequest()
	noKey.Key = ""
	gatewaytest.PageRefusedBeforeSending(t, o, got, usd, short, noKey)
}

// Snap's answers: a definite "no" — the order_id paid and utilized, a
// bad request, a wrong key — is Refused with Midtrans's
// message; a conflict, a rate limit, a 5xx or an answer without a token
// says nothing of whether Midtrans acted.
func TestOpenPageAnswers(t *testing.T) {
	t.Parallel()
	gatewaytest.PageAnswers(t, func(status int, body string) gatewaycalls.PageOpener {
		o, _ := snapServer(t, status, body)
		return o
	}, pageRequest(), []gatewaytest.PageAnswer{
		{Status: 400, Body: `{"error_messages":["transaction_details.order_id has been paid and utilized, please use another order ID"]}`,
			Refused: true, Message: "transaction_details.order_id has been paid and utilized, please use another order ID"},
		{Status: 401, Body: `{"error_messages":["Access denied due to unauthorized transaction, please check client or server key","Visit https://snap-docs.midtrans.com/#request-headers for more details"]}`}, // a wrong key: Sekali's setting, not the request
		{Status: 406, Body: `{"error_messages":["order_id has been paid and utilized, please use another order ID"]}`,
			Refused: true, Message: "order_id has been paid and utilized, please use another order ID"},
		{Status: 404, Body: `not json`}, // a wrong URL: Sekali's setting
		{Status: 409, Body: `{"error_messages":["conflict"]}`},
		{Status: 429, Body: `{"error_messages":["Too many requests"]}`},
		{Status: 500, Body: `{"error_messages":["Sorry, we encountered internal server error. We will fix this soon."]}`},
		{Status: 502, Body: `<html>Bad Gateway</html>`},
		{Status: 202, Body: `{"status_code":"202"}`},
		{Status: 201, Body: `not json`},
		{Status: 201, Body: `{"redirect_url":"https://app.sandbox.midtrans.com/snap/v3/redirection/x"}`},
	})
}

// No answer — the connection closed, or the context's deadline — is not
// a refusal.
func TestOpenPageNoAnswer(t *testing.T) {
	t.Parallel()
	gatewaytest.PageNoAnswer(t, func(baseURL string) (gatewaycalls.PageOpener, error) {
		return midtrans.NewPageOpener(snapKey, baseURL)
	}, pageRequest())
}

// Snap's host follows the key's environment.
func TestNewPageOpener(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"SB-Mid-server-abc": "https://app.sandbox.midtrans.com",
		"Mid-server-abc":    "https://app.midtrans.com",
	} {
		o, err := midtrans.NewPageOpener(key, "")
		if err != nil || o.BaseURL != want || o.Provider() != "midtrans" {
			t.Errorf("%s: %+v, %v; want %s", key, o, err, want)
		}
	}
	if _, err := midtrans.NewPageOpener("sk_test_1", ""); err == nil {
		t.Error("a Stripe key accepted")
	}
}

// Snap's pages are on Snap's host: the sandbox's for an SB- key, or the
// Snap URL given.
func TestPageOrigins(t *testing.T) {
	t.Parallel()
	for snap, want := range map[string]string{
		"":                                       "https://app.sandbox.midtrans.com",
		"http://127.0.0.1:8080/sandbox/midtrans": "http://127.0.0.1:8080",
	} {
		o, err := midtrans.NewPageOpener("SB-Mid-server-ORIGINS0123456789", snap)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.PageOrigins(); !slices.Equal(got, []string{want}) {
			t.Errorf("snap %q: %q, want %q", snap, got, want)
		}
	}
}

// A taken order_id — a repeat of a request whose answer was lost — is a
// spent key, not a refusal: the caller asks again under a new key.
func TestTakenOrderIDIsASpentKey(t *testing.T) {
	t.Parallel()
	o, _ := snapServer(t, 400, `{"error_messages":["transaction_details.order_id has already been taken"]}`)
	_, err := o.OpenPage(t.Context(), pageRequest())
	if !gatewaycalls.IsKeySpent(err) || gatewaycalls.IsRefused(err) {
		t.Errorf("a taken order_id: %v, want a spent key", err)
	}
}
