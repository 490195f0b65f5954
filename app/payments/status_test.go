package payments_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// statusServer serves recorded status answers: by path (and query), a
// status code and a body, as the gateway's API would.
func statusServer(t *testing.T, answers map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, _, ok := r.BasicAuth(); !ok || user == "" && !strings.HasPrefix(r.URL.Path, "/sandbox/") {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		body, ok := answers[r.URL.RequestURI()]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status_code":"404","status_message":"not found"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Poll asks about the pending orders near their expiry, applies what the
// gateways know, and leaves the others alone; a gateway that knows
// nothing about an order is no error. (A gateway's own status answers
// through Poll are its package's tests.)
func TestPollAsksAboutOrdersNearExpiry(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	paid, _ := f.orderIn(models.OrderPending)    // the sandbox gateway has its payment
	unknown, _ := f.orderIn(models.OrderPending) // no gateway knows it
	far, _ := f.orderIn(models.OrderPending)     // expires later than the window
	f.db.Model(&models.Order{}).Where("id = ?", far).Update("expires_at", time.Now().Add(48*time.Hour))
	sender := sandbox.NewSender(testenv.SandboxKey)
	fact := func(id string) payments.Fact {
		return payments.Fact{EventID: "evt_poll_" + id, OrderID: id, TransactionID: "tx-poll-" + id, Status: models.EventPaid, Amount: price, Currency: "IDR"}
	}
	// The sandbox gateway's status API answers the last event it sent of
	// an order; 404 when it sent none.
	sent := func(id string) string {
		body, err := sender.Body(fact(id))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"event_id": fact(id).EventID, "body": json.RawMessage(body)})
		return string(b)
	}
	ssrv := statusServer(t, map[string]string{
		"/sandbox/status/" + paid: sent(paid),
		"/sandbox/status/" + far:  sent(far),
	})
	sbx := sandbox.NewStatusClient(ssrv.URL, testenv.SandboxKey)
	applied, err := f.pay.Poll(context.Background(), []payments.StatusClient{sbx}, 2*time.Hour)
	if err != nil || applied != 1 {
		t.Fatalf("Poll: %d applied, %v; want 1 (the paid order)", applied, err)
	}
	statuses := map[string]models.OrderStatus{}
	for _, id := range []string{paid, unknown, far} {
		var o models.Order
		f.db.Take(&o, "id = ?", id)
		statuses[id] = o.Status
	}
	if statuses[paid] != models.OrderPaid || statuses[unknown] != models.OrderPending || statuses[far] != models.OrderPending {
		t.Errorf("after the poll: %v; want only the near, paid one paid", statuses)
	}
	// The payment's notification, arriving late under its event id, is a
	// duplicate of the poll.
	h, body, err := payments.Notification(sender, fact(paid), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if out := f.send(delivery{provider: sandbox.Name, header: h, body: body}); out.Result != models.ResultDuplicate {
		t.Errorf("the notification after the poll: %s (%s), want duplicate", out.Result, out.Detail)
	}
}

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
	f := gatewayFixture(t)
	near, _ := f.orderIn(models.OrderPending)
	far, _ := f.orderIn(models.OrderPending)
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
	f.pay.ApplyPolled(ctx, stripe.Name, ev)
	if out := f.send(stripeEvent("evt_near", "payment_intent.succeeded", pi(near, "pi_near"))); out.Result != models.ResultDuplicate {
		t.Errorf("the notification after the poll: %s (%s), want duplicate", out.Result, out.Detail)
	}

	client.MaxPages = 1 // evt_far is on the second page: not read
	ev, found, err = client.Status(ctx, far)
	if err != nil || !found || ev.Key != "pi_far:succeeded" {
		t.Fatalf("status of %s with one page: %+v %v %v; want the PaymentIntent's own key", far, ev, found, err)
	}
	if out := f.pay.ApplyPolled(ctx, stripe.Name, ev); out.Result != models.ResultProcessed {
		t.Fatalf("the polled PaymentIntent: %+v", out)
	}
	if out := f.send(stripeEvent("evt_far", "payment_intent.succeeded", pi(far, "pi_far"))); out.Result != models.ResultStale {
		t.Errorf("the notification after the fallback: %s (%s), want stale", out.Result, out.Detail)
	}
	if _, found, err := client.Status(ctx, "ORD-NOBODY"); found || err != nil {
		t.Errorf("an order Stripe does not know: found %v, %v", found, err)
	}
	for _, id := range []string{near, far} {
		var pays []models.Payment
		f.db.Find(&pays, "order_id = ?", id)
		var o models.Order
		f.db.Take(&o, "id = ?", id)
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
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
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
	if out := f.pay.ApplyPolled(ctx, stripe.Name, ev); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("the polled session: %+v", out)
	}
	if out := f.send(stripeEvent("evt_cs_late_"+id, "checkout.session.completed", checkoutSession(id, "pi_cs_"+id, "paid"))); out.Result != models.ResultStale {
		t.Errorf("the session's notification after the poll: %s (%s), want stale", out.Result, out.Detail)
	}
	if _, found, err := client.Status(ctx, "ORD-NOBODY"); found || err != nil {
		t.Errorf("an order with no session: found %v, %v", found, err)
	}
}

// TestOutcomeWordAndCode: what a delivery's answer says — its one word
// (the `result` member, the delivery row's outcome) and its code and
// status — for each kind of result; a refusal says its own code, an
// unknown provider is a 404.
func TestOutcomeWordAndCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		out        payments.Outcome
		word, code string
		status     int
	}{
		{payments.Outcome{Result: models.ResultProcessed}, "processed", "", 200},
		{payments.Outcome{Result: models.ResultDuplicate}, "duplicate", "", 200},
		{payments.Outcome{Result: models.ResultUnconfirmed}, "unconfirmed", "", 200},
		{payments.Outcome{Result: models.ResultConflict}, "conflict", models.EConflict, 409},
		{payments.Outcome{Result: models.ResultRejected, Reason: models.ReasonAmountMismatch}, "rejected", models.ERejected, 422},
		{payments.Outcome{Result: models.ResultError}, "error", models.EUnavailable, 503},
		{payments.Outcome{Result: payments.Refused, Refusal: models.EInvalidSignature}, "invalid_signature", models.EInvalidSignature, 401},
		{payments.Outcome{Result: payments.Refused, Refusal: models.ETooLarge}, "too_large", models.ETooLarge, 413},
		{payments.Outcome{Result: payments.Refused, Refusal: payments.RefusalUnknownProvider}, "unknown_provider", models.ENotFound, 404},
	} {
		if w, code, st := c.out.Word(), c.out.Code(), c.out.Status(); w != c.word || code != c.code || st != c.status {
			t.Errorf("%+v: word %q, code %q, status %d; want %q, %q, %d", c.out, w, code, st, c.word, c.code, c.status)
		}
	}
}
