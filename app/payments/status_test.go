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
