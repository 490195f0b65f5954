package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/models"
)

const apiKey = "sk_test_status_0123456789"

// STRIPE_SECRET_KEY is a secret ("sk_") or restricted ("rk_") API key;
// a publishable key or an endpoint secret is refused.
func TestStripeCheckSecretKey(t *testing.T) {
	t.Parallel()
	for key, ok := range map[string]bool{
		"sk_test_0123456789": true, "sk_live_0123456789": true, "rk_test_0123456789": true,
		"pk_test_0123456789": false, secret: false, "": false, "SK_test_0123456789": false,
	} {
		if err := stripe.CheckSecretKey(key); (err == nil) != ok {
			t.Errorf("CheckSecretKey(%q): %v", key, err)
		}
		if _, err := stripe.NewStatusClient(key, ""); (err == nil) != ok {
			t.Errorf("NewStatusClient(%q): %v", key, err)
		}
	}
	c, _ := stripe.NewStatusClient(apiKey, "")
	if c.BaseURL != "https://api.stripe.com" || c.MaxPages < 1 || c.Client.Timeout != httpjson.DefaultTimeout || c.Provider() != "stripe" {
		t.Fatalf("defaults: %s, %d pages, timeout %s, %s", c.BaseURL, c.MaxPages, c.Client.Timeout, c.Provider())
	}
}

// fakeAPI answers the list endpoints the status client reads, counting
// the requests by path; pages maps a path to the page it serves.
type fakeAPI struct {
	mu       sync.Mutex
	requests []*http.Request
	pages    map[string]func(q map[string][]string) (data []map[string]any, hasMore bool)
	status   int // answer every request with this status instead, when set
}

func (f *fakeAPI) serve(t *testing.T) *stripe.StatusClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r)
		f.mu.Unlock()
		if f.status != 0 {
			w.WriteHeader(f.status)
			fmt.Fprint(w, `{"error":{"type":"api_error","message":"try again"}}`)
			return
		}
		page, ok := f.pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		data, more := page(r.URL.Query())
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "has_more": more})
	}))
	t.Cleanup(srv.Close)
	c, err := stripe.NewStatusClient(apiKey, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fakeAPI) asked(path string) []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*http.Request
	for _, r := range f.requests {
		if r.URL.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// An order Stripe knows nothing of: the PaymentIntent search by its
// metadata, then the Checkout Sessions since its id's time, less a
// minute for clocks, with the API key as the basic-auth user; nothing
// found is no error.
func TestStripeStatusOfAnUnknownOrder(t *testing.T) {
	t.Parallel()
	created := time.Date(2024, 11, 30, 10, 0, 0, 0, time.UTC)
	id := models.NewOrderID(created)
	none := func(map[string][]string) ([]map[string]any, bool) { return nil, false }
	f := &fakeAPI{pages: map[string]func(map[string][]string) ([]map[string]any, bool){
		"/v1/payment_intents/search": none, "/v1/checkout/sessions": none}}
	ev, found, err := f.serve(t).Status(context.Background(), id)
	if err != nil || found {
		t.Fatalf("Status = %+v, %v, %v; want nothing found", ev, found, err)
	}
	search, sessions := f.asked("/v1/payment_intents/search"), f.asked("/v1/checkout/sessions")
	if len(search) != 1 || len(sessions) != 1 {
		t.Fatalf("%d searches and %d session pages, want 1 and 1", len(search), len(sessions))
	}
	if q := search[0].URL.Query().Get("query"); q != "metadata['order_id']:'"+id+"'" {
		t.Errorf("search query %q", q)
	}
	if got, want := sessions[0].URL.Query().Get("created[gte]"), fmt.Sprint(created.Add(-time.Minute).Unix()); got != want {
		t.Errorf("sessions created[gte]=%s, want %s", got, want)
	}
	for _, r := range append(search, sessions...) {
		if user, pass, ok := r.BasicAuth(); !ok || user != apiKey || pass != "" {
			t.Errorf("%s: basic auth %q %q %v, want the API key with no password", r.URL.Path, user, pass, ok)
		}
	}
}

// An id of another form has no time: every session is a candidate. A
// quote in it cannot end the search query's string.
func TestStripeStatusQuotesTheOrderID(t *testing.T) {
	t.Parallel()
	none := func(map[string][]string) ([]map[string]any, bool) { return nil, false }
	f := &fakeAPI{pages: map[string]func(map[string][]string) ([]map[string]any, bool){
		"/v1/payment_intents/search": none, "/v1/checkout/sessions": none}}
	if _, _, err := f.serve(t).Status(context.Background(), "ORD-o'brien"); err != nil {
		t.Fatal(err)
	}
	if q := f.asked("/v1/payment_intents/search")[0].URL.Query().Get("query"); q != `metadata['order_id']:'ORD-o\'brien'` {
		t.Errorf("search query %q", q)
	}
	if q := f.asked("/v1/checkout/sessions")[0].URL.Query(); q.Has("created[gte]") {
		t.Errorf("sessions asked with created[gte]=%s for an id without a time", q.Get("created[gte]"))
	}
}

// The events after a succeeded PaymentIntent are read page by page
// (starting_after the last one read), at most MaxPages of them; beyond,
// the PaymentIntent itself answers, under a key of its own.
func TestStripeStatusReadsAtMostMaxPagesOfEvents(t *testing.T) {
	t.Parallel()
	id := models.NewOrderID(time.Now())
	pi := map[string]any{"id": "pi_status_1", "object": "payment_intent", "status": "succeeded", "created": 1732960790,
		"amount": 2000, "amount_received": 2000, "currency": "usd", "metadata": map[string]any{"order_id": id}}
	page := 0
	var mu sync.Mutex
	f := &fakeAPI{pages: map[string]func(map[string][]string) ([]map[string]any, bool){
		"/v1/payment_intents/search": func(map[string][]string) ([]map[string]any, bool) {
			return []map[string]any{{"id": "pi_status_0", "status": "canceled"}, pi}, false
		},
		"/v1/events": func(map[string][]string) ([]map[string]any, bool) { // other payments' events, forever
			mu.Lock()
			defer mu.Unlock()
			page++
			return []map[string]any{{"id": fmt.Sprintf("evt_other_%d", page), "type": "payment_intent.succeeded",
				"data": map[string]any{"object": map[string]any{"id": "pi_someone_else"}}}}, true
		},
	}}
	c := f.serve(t)
	c.MaxPages = 3
	ev, found, err := c.Status(context.Background(), id)
	if err != nil || !found {
		t.Fatalf("Status = %+v, %v, %v", ev, found, err)
	}
	if ev.Key != "pi_status_1:succeeded" || ev.Status != models.EventPaid || ev.TransactionID != "pi_status_1" || ev.Amount != 2000 || ev.OrderID != id {
		t.Errorf("answer %+v, want the PaymentIntent's own, keyed pi_status_1:succeeded", ev)
	}
	events := f.asked("/v1/events")
	if len(events) != 3 {
		t.Fatalf("%d pages of events read, want MaxPages (3)", len(events))
	}
	for i, r := range events {
		q := r.URL.Query()
		if q.Get("type") != "payment_intent.succeeded" || q.Get("created[gte]") != "1732960790" {
			t.Errorf("page %d asked %s", i, r.URL.RawQuery)
		}
		if want := fmt.Sprintf("evt_other_%d", i); i > 0 && q.Get("starting_after") != want {
			t.Errorf("page %d starting_after=%q, want %s", i, q.Get("starting_after"), want)
		}
	}
}

// An API that does not answer 200 with a list is an error (the poll
// tries again later), and the error does not carry the API key.
func TestStripeStatusAPIErrors(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusInternalServerError} {
		f := &fakeAPI{status: status}
		_, found, err := f.serve(t).Status(context.Background(), "ORD-1")
		if err == nil || found || !strings.Contains(err.Error(), fmt.Sprint(status)) || strings.Contains(err.Error(), apiKey) {
			t.Errorf("HTTP %d: found %v, %v", status, found, err)
		}
	}
	garbled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"data":[`) }))
	t.Cleanup(garbled.Close)
	c, _ := stripe.NewStatusClient(apiKey, garbled.URL)
	if _, found, err := c.Status(context.Background(), "ORD-1"); err == nil || found {
		t.Errorf("a truncated list: found %v, %v", found, err)
	}
}
