package stripe_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/stripe"
)

// A repeat reads the PaymentIntent's refunds page after page
// (starting_after the last of the page before) until one carries its key,
// reads that refund again when its charge came unexpanded, and creates
// nothing.
func TestRefundRepeatFindsItsRefundOnALaterPage(t *testing.T) {
	t.Parallel()
	const key = "refund:ORD-R-1:1"
	pages := map[string]string{
		"":         `{"object":"list","has_more":true,"data":[{"id":"re_other","object":"refund","status":"succeeded","amount":100000,"metadata":{"refund_key":"refund:ORD-R-1:0"}}]}`,
		"re_other": `{"object":"list","has_more":false,"data":[{"id":"re_mine","object":"refund","status":"pending","amount":5000000,"charge":"ch_1","metadata":{"refund_key":"` + key + `"}}]}`,
	}
	got := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{method: r.Method, path: r.URL.Path, form: r.URL.Query()}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/refunds":
			w.Write([]byte(pages[r.URL.Query().Get("starting_after")]))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/refunds/re_mine":
			w.Write([]byte(`{"id":"re_mine","object":"refund","status":"pending","amount":5000000,` +
				`"charge":{"id":"ch_1","object":"charge","amount_refunded":5100000}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"not here"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	f, err := stripe.NewRefunder(pageKey, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Refund(t.Context(), gatewaycalls.RefundRequest{OrderID: "ORD-R-1", Key: key, Charge: "pi_1",
		Amount: 50000, Currency: "IDR", Reason: "damaged", Attempt: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := (gatewaycalls.Refunded{ObjectID: "re_mine", RefundKey: "re_mine", Amount: 50000, Currency: "IDR", Total: 51000, Pending: true}); a != want {
		t.Errorf("answer %+v, want %+v", a, want)
	}
	list := url.Values{"payment_intent": {"pi_1"}, "limit": {"100"}, "expand[0]": {"data.charge"}}
	after := url.Values{"payment_intent": {"pi_1"}, "limit": {"100"}, "expand[0]": {"data.charge"}, "starting_after": {"re_other"}}
	for i, want := range []seen{
		{method: http.MethodGet, path: "/v1/refunds", form: list},
		{method: http.MethodGet, path: "/v1/refunds", form: after},
		{method: http.MethodGet, path: "/v1/refunds/re_mine", form: url.Values{"expand[0]": {"charge"}}},
	} {
		r := <-got
		if r.method != want.method || r.path != want.path || !reflect.DeepEqual(r.form, want.form) {
			t.Errorf("request %d: %s %s %v, want %s %s %v", i+1, r.method, r.path, r.form, want.method, want.path, want.form)
		}
	}
	select {
	case r := <-got:
		t.Errorf("one request more: %s %s %v", r.method, r.path, r.form)
	default:
	}
}
