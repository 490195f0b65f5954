package payments_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
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

// A gateway that cannot be asked is no error of the poll: the run ends
// without one, having applied what the gateways that answer said; its
// failures are counted per gateway (sekali_status_requests_total), and
// after three in a row it is not asked about the round's other orders,
// whose requests would only take the time of the gateways that answer.
func TestPollOfAGatewayThatCannotBeAsked(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	m := metrics.New()
	pay := payments.NewService(db, log, time.Now, m, jobs.Tasks{}, gatewayProviders(t)...)
	t.Cleanup(pay.Close)
	f := &fixture{t: t, db: db, orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), pay: pay}
	var ids []string
	for range 5 {
		id, _ := f.orderIn(models.OrderPending)
		ids = append(ids, id)
	}
	sender := sandbox.NewSender(testenv.SandboxKey)
	fact := payments.Fact{EventID: "evt_poll_" + ids[4], OrderID: ids[4], TransactionID: "tx-poll", Status: models.EventPaid, Amount: price, Currency: "IDR"}
	body, err := sender.Body(fact)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := json.Marshal(map[string]any{"event_id": fact.EventID, "body": json.RawMessage(body)})
	sbx := sandbox.NewStatusClient(statusServer(t, map[string]string{"/sandbox/status/" + ids[4]: string(answer)}).URL, testenv.SandboxKey)
	down := gatewaytest.NewUnaskable(t)

	applied, err := pay.Poll(t.Context(), []payments.StatusClient{down, sbx}, 2*time.Hour)
	if err != nil || applied != 1 {
		t.Fatalf("Poll: %d applied, %v; want the sandbox's payment and no error", applied, err)
	}
	var o models.Order
	if db.Take(&o, "id = ?", ids[4]); o.Status != models.OrderPaid {
		t.Errorf("the order the sandbox gateway knows paid: %s", o.Status)
	}
	if n := down.Asked(); n != 3 {
		t.Errorf("the gateway that cannot be asked was asked %d times, want 3 (then left alone for the round)", n)
	}
	for _, c := range []struct {
		provider, result string
		want             float64
	}{{"unaskable", "failed", 3}, {"unaskable", "answered", 0}, {sandbox.Name, "answered", 5}, {sandbox.Name, "failed", 0}} {
		if n := testutil.ToFloat64(m.StatusRequests.WithLabelValues(c.provider, c.result)); n != c.want {
			t.Errorf("sekali_status_requests_total{provider=%q,result=%q} = %v, want %v", c.provider, c.result, n, c.want)
		}
	}

	// A poll whose time runs out stops asking, and that is no error
	// either: the next run asks again.
	ctx, timeUp := context.WithCancel(t.Context())
	last := &lastRequest{Unaskable: gatewaytest.NewUnaskable(t), timeUp: timeUp}
	if applied, err := pay.Poll(ctx, []payments.StatusClient{last, sbx}, 2*time.Hour); err != nil || applied != 0 {
		t.Errorf("Poll whose time ran out: %d, %v; want nothing applied and no error", applied, err)
	}
	if last.calls != 1 {
		t.Errorf("asked %d times, want 1: the request the time ran out in, and none after", last.calls)
	}
	if n := testutil.ToFloat64(m.StatusRequests.WithLabelValues(sandbox.Name, "answered")); n != 5 {
		t.Errorf("the sandbox asked %v times in all, want 5: none after the time ran out", n)
	}
}

// lastRequest is a gateway that cannot be asked, in whose first request
// the poll's time runs out.
type lastRequest struct {
	*gatewaytest.Unaskable
	timeUp context.CancelFunc
	calls  int // Poll asks one request at a time
}

func (c *lastRequest) Status(ctx context.Context, ref string) (payments.Event, bool, error) {
	c.calls++
	c.timeUp()
	return c.Unaskable.Status(ctx, ref)
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
