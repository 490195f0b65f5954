package payments_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
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

// A recorded Midtrans status answer (the fields of GET /v2/{order_id}/status
// are the notification's) for orderID's settled charge ref.
func midtransStatusAnswer(orderID, ref string) string {
	d := midtransNotification(orderID, ref, "settlement", "", "50000.00", "IDR")
	var n map[string]any
	json.Unmarshal(d.body, &n)
	n["status_message"] = "Success, transaction is found"
	n["merchant_id"] = "G123456789"
	b, _ := json.Marshal(n)
	return string(b)
}

// A poll and a push of the same fact converge on one effect, whichever
// comes first: the same key, compared by what they say (the poll has no
// notification body, so no byte fingerprint to compare).
func TestPollAndPushConverge(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	pollFirst, _ := f.orderIn(models.OrderPending)
	pushFirst, _ := f.orderIn(models.OrderPending)
	srv := statusServer(t, map[string]string{
		"/v2/" + pollFirst + "/status": midtransStatusAnswer(pollFirst, "tx-poll-"+pollFirst),
		"/v2/" + pushFirst + "/status": midtransStatusAnswer(pushFirst, "tx-push-"+pushFirst),
	})
	client, err := midtrans.NewStatusClient(midtransKey, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Poll first, then the notification arrives after all.
	ev, found, err := client.Status(ctx, pollFirst)
	if err != nil || !found || ev.Key != "tx-poll-"+pollFirst+":settlement" {
		t.Fatalf("status of %s: %+v %v %v", pollFirst, ev, found, err)
	}
	if out := f.pay.ApplyPolled(ctx, midtrans.Name, ev); out.Result != models.ResultProcessed {
		t.Fatalf("the polled fact: %+v", out)
	}
	if out := f.send(midtransNotification(pollFirst, "tx-poll-"+pollFirst, "settlement", "", "50000.00", "IDR")); out.Result != models.ResultDuplicate {
		t.Errorf("the notification after the poll: %s (%s), want duplicate", out.Result, out.Detail)
	}
	// Notification first, then a poll.
	if out := f.send(midtransNotification(pushFirst, "tx-push-"+pushFirst, "settlement", "", "50000.00", "IDR")); out.Result != models.ResultProcessed {
		t.Fatalf("the notification: %+v", out)
	}
	ev, _, _ = client.Status(ctx, pushFirst)
	if out := f.pay.ApplyPolled(ctx, midtrans.Name, ev); out.Result != models.ResultDuplicate {
		t.Errorf("the poll after the notification: %s (%s), want duplicate", out.Result, out.Detail)
	}
	// A poll that says something else under the same key is a conflict.
	ev.Amount++
	if out := f.pay.ApplyPolled(ctx, midtrans.Name, ev); out.Result != models.ResultConflict {
		t.Errorf("a poll with another amount under the key: %s, want conflict", out.Result)
	}
	for _, id := range []string{pollFirst, pushFirst} {
		var pays []models.Payment
		f.db.Find(&pays, "order_id = ?", id)
		var o models.Order
		f.db.Take(&o, "id = ?", id)
		if o.Status != models.OrderPaid || len(pays) != 1 {
			t.Errorf("order %s: %s with %d payments, want paid once", id, o.Status, len(pays))
		}
	}
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
	msrv := statusServer(t, nil) // Midtrans knows none of them
	sbx := sandbox.NewStatusClient(ssrv.URL, testenv.SandboxKey)
	midtrans, _ := midtrans.NewStatusClient(midtransKey, msrv.URL)
	applied, err := f.pay.Poll(context.Background(), []payments.StatusClient{midtrans, sbx}, 2*time.Hour)
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

// An order whose Snap page was made under {order}~2 (its order id spent
// by a call whose answer was lost) is asked about by that key, which
// Midtrans files the customer's payment under: the poll finds it.
func TestPollAsksByThePagesKey(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	key := id + "~2"
	done := time.Now()
	page := models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: id, Provider: midtrans.Name, IdempotencyKey: key,
		Amount: price, Currency: "IDR", Phase: models.GatewayDone, Attempts: 2, DoneAt: &done,
		ProviderObjectID: "snap-token", RedirectURL: "https://app.sandbox.midtrans.com/snap/v4/redirection/snap-token"}
	if err := f.db.Create(&page).Error; err != nil {
		t.Fatal(err)
	}
	msrv := statusServer(t, map[string]string{"/v2/" + key + "/status": midtransStatusAnswer(key, "tx-"+key)})
	client, _ := midtrans.NewStatusClient(midtransKey, msrv.URL)
	if applied, err := f.pay.Poll(context.Background(), []payments.StatusClient{client}, 2*time.Hour); err != nil || applied != 1 {
		t.Fatalf("Poll: %d applied, %v; want the payment made on the page", applied, err)
	}
	var o models.Order
	if f.db.Take(&o, "id = ?", id); o.Status != models.OrderPaid {
		t.Errorf("the order is %s after the poll, want paid", o.Status)
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
