package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// stripeAPI is a fake of the Stripe endpoints the status client reads:
// the PaymentIntent search (by metadata.order_id), and the events and
// Checkout Sessions lists (newest first, paged by starting_after, two per
// page).
func stripeAPI(t *testing.T, intents map[string][]map[string]any, events []map[string]any, sessions ...map[string]any) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, _, _ := r.BasicAuth(); user != "sk_test_status" {
			http.Error(w, `{"error":{"type":"invalid_request_error"}}`, http.StatusUnauthorized)
			return
		}
		q := r.URL.Query()
		var data []map[string]any
		hasMore := false
		switch r.URL.Path {
		case "/v1/payment_intents/search":
			order := strings.TrimSuffix(strings.TrimPrefix(q.Get("query"), "metadata['order_id']:'"), "'")
			data = intents[order]
		case "/v1/events", "/v1/checkout/sessions":
			list := events
			if r.URL.Path == "/v1/checkout/sessions" {
				list = sessions
			}
			start := 0
			for i, e := range list {
				if e["id"] == q.Get("starting_after") {
					start = i + 1
				}
			}
			end := min(start+2, len(list))
			data, hasMore = list[start:end], end < len(list)
		default:
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "has_more": hasMore})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Stripe's poll finds the order's succeeded PaymentIntent and, among the
// events since, its payment_intent.succeeded: the notification's own
// event id, so the late notification is a duplicate. When the event is
// beyond the pages read, the PaymentIntent answers under a key of its
// own, and the notification afterwards is stale: one payment either way.
func TestStripePollFindsTheEventOrFallsBackToTheCharge(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	near, _ := p.Order()
	far, _ := p.Order()
	pi := func(order, id string) map[string]any {
		o := paymentIntent(order, id, 5000000, "idr")
		o["created"] = time.Now().Add(-time.Minute).Unix()
		return o
	}
	event := func(id string, object map[string]any) map[string]any {
		return map[string]any{"id": id, "object": "event", "type": "payment_intent.succeeded", "data": map[string]any{"object": object}}
	}
	events := []map[string]any{event("evt_other_1", pi("ORD-ELSEWHERE", "pi_x")), event("evt_other_2", pi("ORD-ELSEWHERE", "pi_y")),
		event("evt_near", pi(near, "pi_near")), event("evt_far", pi(far, "pi_far"))}
	srv := stripeAPI(t, map[string][]map[string]any{
		near: {pi(near, "pi_near")},
		far:  {{"id": "pi_far_failed", "status": "requires_payment_method"}, pi(far, "pi_far")},
	}, events)
	client, err := stripe.NewStatusClient("sk_test_status", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ev, found, err := client.Status(ctx, near)
	if err != nil || !found || ev.Key != "evt_near" || ev.TransactionID != "pi_near" || ev.Amount != 50000 {
		t.Fatalf("status of %s: %+v %v %v; want the event on the second page", near, ev, found, err)
	}
	p.Pay.ApplyPolled(ctx, stripe.Name, ev)
	if out := p.Send(stripeEvent("evt_near", "payment_intent.succeeded", pi(near, "pi_near"))); out.Result != models.ResultDuplicate {
		t.Errorf("the notification after the poll: %s (%s), want duplicate", out.Result, out.Detail)
	}

	client.MaxPages = 1 // evt_far is on the second page: not read
	ev, found, err = client.Status(ctx, far)
	if err != nil || !found || ev.Key != "pi_far:succeeded" {
		t.Fatalf("status of %s with one page: %+v %v %v; want the PaymentIntent's own key", far, ev, found, err)
	}
	if out := p.Pay.ApplyPolled(ctx, stripe.Name, ev); out.Result != models.ResultProcessed {
		t.Fatalf("the polled PaymentIntent: %+v", out)
	}
	if out := p.Send(stripeEvent("evt_far", "payment_intent.succeeded", pi(far, "pi_far"))); out.Result != models.ResultStale {
		t.Errorf("the notification after the fallback: %s (%s), want stale", out.Result, out.Detail)
	}
	if _, found, err := client.Status(ctx, "ORD-NOBODY"); found || err != nil {
		t.Errorf("an order Stripe does not know: found %v, %v", found, err)
	}
	for _, id := range []string{near, far} {
		var pays []models.Payment
		p.DB.Find(&pays, "order_id = ?", id)
		var o models.Order
		p.DB.Take(&o, "id = ?", id)
		if o.Status != models.OrderPaid || len(pays) != 1 {
			t.Errorf("order %s: %s with %d payments, want paid once", id, o.Status, len(pays))
		}
	}
}

// A payment through Stripe Checkout whose PaymentIntent carries no
// metadata.order_id is not found by the PaymentIntent search: the poll
// reads the Checkout Sessions created since the order and finds its paid
// one (client_reference_id); the session's notification afterwards names
// the same charge and is stale.
func TestStripePollFindsPaidCheckoutSessions(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, _ := p.Order()
	sessions := []map[string]any{
		checkoutSession("ORD-ELSEWHERE", "pi_else", "paid"),
		checkoutSession(id, "pi_open_"+id, "unpaid"),
		checkoutSession(id, "pi_cs_"+id, "paid"),
	}
	srv := stripeAPI(t, map[string][]map[string]any{}, nil, sessions...)
	client, err := stripe.NewStatusClient("sk_test_status", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ev, found, err := client.Status(ctx, id)
	if err != nil || !found || ev.Key != "cs_pi_cs_"+id+":paid" || ev.TransactionID != "pi_cs_"+id || ev.Status != models.EventPaid || ev.Amount != price {
		t.Fatalf("status of %s: %+v %v %v; want its paid session, on the second page", id, ev, found, err)
	}
	if out := p.Pay.ApplyPolled(ctx, stripe.Name, ev); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("the polled session: %+v", out)
	}
	if out := p.Send(stripeEvent("evt_cs_late_"+id, "checkout.session.completed", checkoutSession(id, "pi_cs_"+id, "paid"))); out.Result != models.ResultStale {
		t.Errorf("the session's notification after the poll: %s (%s), want stale", out.Result, out.Detail)
	}
	if _, found, err := client.Status(ctx, "ORD-NOBODY"); found || err != nil {
		t.Errorf("an order with no session: found %v, %v", found, err)
	}
}

// An API that lacks the search (the sandbox's Stripe emulation did):
// Stripe answers 404 only for a route it does not have — no results is
// an empty list — so the client cannot ask, which is no error of the
// poll: the order stays pending, and the next run asks again.
func TestStripePollOfAnAPIWithoutTheSearch(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, _ := p.Order()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"type":"invalid_request_error","message":"Unrecognized request URL (GET: %s)."}}`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	client, err := stripe.NewStatusClient("sk_test_status", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := client.Status(t.Context(), id); found || err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("status of %s: found %v, %v; want the 404 as an error, not as no payment", id, found, err)
	}
	if applied, err := p.Pay.Poll(t.Context(), []payments.StatusClient{client}, 2*time.Hour); applied != 0 || err != nil {
		t.Errorf("poll: %d applied, %v; want nothing and no error", applied, err)
	}
	var o models.Order
	if p.DB.Take(&o, "id = ?", id); o.Status != models.OrderPending {
		t.Errorf("order %s: %s, want pending", id, o.Status)
	}
}
