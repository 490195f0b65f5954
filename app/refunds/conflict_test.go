package refunds_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// misstating is a gateway that refunds as asked and answers with another
// amount: its answer is not applied.
type misstating struct {
	*fakeGateway
	by int64
}

func (g misstating) Refund(ctx context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.Refunded, error) {
	a, err := g.fakeGateway.Refund(ctx, r)
	a.Amount += g.by
	return a, err
}

// A refund the gateway answers with another amount than asked changes no
// money: the request ends in conflict — answered, so never sent again,
// and not done, which would say the refund asked is counted — with both
// values in last_error, one gateway.conflict alert, and its amount held
// back. The gateway's own notification of that refund, a signed fact,
// counts what it says, in the hold's place: the rest can be refunded.
// The audit stays green throughout and lists the conflict, and goes red
// if the answer had been applied after all.
func TestAnswerOfAnotherAmountIsNotApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := misstating{fakeGateway: e.gw, by: -5000}
	e.refunds = refundsWith(e, gw)
	r := e.mustAsk("30000")
	got, err := e.refunds.Send(context.Background(), r.ID, "req-conflict")
	if err != nil || got.Phase != models.GatewayConflict || got.ProviderObjectID != "rf-1" ||
		got.AnsweredAmount == nil || *got.AnsweredAmount != 25000 || got.AnsweredCurrency != "" {
		t.Fatalf("send: %+v, %v; want conflict, answered 25000", got, err)
	}
	for _, v := range []string{"Rp 25.000", "Rp 30.000"} {
		if !strings.Contains(got.LastError, v) {
			t.Errorf("last_error %q does not show %s", got.LastError, v)
		}
	}
	if status, refunded, n := e.state(); status != models.OrderPaid || refunded != 0 || n != 0 {
		t.Fatalf("after the answer: %s, refunded %d, %d refunds; want nothing applied", status, refunded, n)
	}
	if c := testutil.ToFloat64(e.metrics.GatewayCalls.WithLabelValues(sandbox.Name, string(models.GatewayRefund), "conflict")); c != 1 {
		t.Errorf("sekali_gateway_calls_total{result=conflict} = %v, want 1", c)
	}
	if again, err := e.refunds.Send(context.Background(), r.ID, "req-again"); err != nil || again.Phase != models.GatewayConflict || e.gw.calls.Load() != 1 {
		t.Errorf("sent again: %+v, %v, %d calls; want it left alone, one call", again, err, e.gw.calls.Load())
	}
	var raised []models.Alert
	e.db.Find(&raised, "type = ?", alerts.GatewayConflict)
	if len(raised) != 1 || raised[0].EventID != "gateway.conflict:"+strconv.FormatInt(r.ID, 10) || !strings.Contains(string(raised[0].Payload), `"answered_amount": 25000`) {
		t.Errorf("alerts %+v; want one gateway.conflict of request %d", raised, r.ID)
	}
	if left, err := e.refunds.Refundable(context.Background(), e.orderID, ""); err != nil || left.Left != price-30000 || left.Open != 30000 {
		t.Errorf("refundable: %+v, %v; want the 30000 asked held back", left, err)
	}
	report, err := audit.New(e.db).Run(context.Background(), 0)
	if err != nil || !report.OK || len(report.Conflicts) != 1 || !strings.Contains(report.Conflicts[0].Detail, "answered 25000 IDR") {
		t.Fatalf("audit: %v, %+v; want green, listing the conflict", err, report)
	}

	// The gateway's notification of the refund it made counts it.
	e.notify("evt_refund_conflict", refundBody(e.orderID, e.charge(), got.IdempotencyKey, models.RefundSucceeded, 25000))
	if status, refunded, n := e.state(); status != models.OrderPartiallyRefunded || refunded != 25000 || n != 1 {
		t.Fatalf("after the notification: %s, refunded %d, %d refunds; want its 25000 counted", status, refunded, n)
	}
	// What it counted takes the hold's place: the rest can be refunded,
	// and the books hold.
	if left, err := e.refunds.Refundable(context.Background(), e.orderID, ""); err != nil || left.Left != price-25000 || left.Open != 0 {
		t.Errorf("refundable after the notification: %+v, %v; want %d left, nothing held back", left, err, price-25000)
	}
	e.refunds = refundsWith(e, e.gw) // a gateway that answers what it is asked
	rest := e.mustAsk("")
	if done, err := e.refunds.Send(context.Background(), rest.ID, "req-rest"); err != nil || done.Phase != models.GatewayDone || done.Amount != price-25000 {
		t.Fatalf("the rest: %+v, %v", done, err)
	}
	if status, refunded, _ := e.state(); status != models.OrderRefunded || refunded != price {
		t.Errorf("after the rest: %s, refunded %d; want refunded in full", status, refunded)
	}
	if report, err := audit.New(e.db).Run(context.Background(), 0); err != nil || !report.OK {
		t.Fatalf("audit after the notification and the rest: %v, %+v", err, report.Violations)
	}

	// Had the answer been applied, or the request been taken for done,
	// the audit would say so.
	for _, b := range []struct{ what, breaks, mends string }{
		{"done with another answer", "UPDATE gateway_requests SET phase = 'done' WHERE id = ?", "UPDATE gateway_requests SET phase = 'conflict' WHERE id = ?"},
		{"its answer applied", `INSERT INTO payment_callbacks (provider, idempotency_key, payload_hash, order_id, transaction_id, event_status, amount, currency, status, result, response_code, attempts, first_received_at, last_received_at)
			SELECT provider, 'refund:' || idempotency_key, 'poll:x', order_id, 'tx-' || order_id, 'refunded', 25000, 'IDR', 'processed', 'processed', 200, 1, now(), now() FROM gateway_requests WHERE id = ?`,
			"DELETE FROM payment_callbacks WHERE idempotency_key = (SELECT 'refund:' || idempotency_key FROM gateway_requests WHERE id = ?)"},
	} {
		if err := e.db.Exec(b.breaks, r.ID).Error; err != nil {
			t.Fatalf("%s: %v", b.what, err)
		}
		report, err := audit.New(e.db).Run(context.Background(), 0)
		if err != nil || !slices.ContainsFunc(report.Violations, func(v audit.Violation) bool { return v.Check == "gateway refunds" }) {
			t.Errorf("%s: %v, %+v; want check 9 red", b.what, err, report.Violations)
		}
		if err := e.db.Exec(b.mends, r.ID).Error; err != nil {
			t.Fatalf("%s: %v", b.what, err)
		}
	}
}

// refundsWith is e's refunds service, asking gw.
func refundsWith(e *env, gw gatewaycalls.Refunder) *refunds.Service {
	s := refunds.NewService(e.db, testenv.Logger(e.t), time.Now, e.metrics, e.pay, jobs.Tasks{}, gw)
	s.CallTimeout = e.refunds.CallTimeout
	return s
}
