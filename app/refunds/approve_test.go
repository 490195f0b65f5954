package refunds_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/alerts"

	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The order's charge is 100000 IDR; refunds above 50000 IDR wait.
const threshold = 50000

// newApprovalEnv is newEnv with REFUND_APPROVAL_ABOVE=IDR:50000.
func newApprovalEnv(t *testing.T) *env {
	e := newEnv(t)
	e.refunds.ApprovalAbove = map[string]int64{"IDR": threshold}
	return e
}

// tasksOf counts refund record id's refund:send tasks in the outbox.
func (e *env) tasksOf(id int64) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.Model(&models.OutboxMessage{}).Where("task_type = ? AND task_id = ?", jobs.TaskRefundSend,
		fmt.Sprintf("%s:%d", jobs.TaskRefundSend, id)).Count(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

// get reads refund record id.
func (e *env) get(id int64) models.GatewayRequest {
	e.t.Helper()
	var r models.GatewayRequest
	if err := e.db.Take(&r, id).Error; err != nil {
		e.t.Fatal(err)
	}
	return r
}

// At the threshold a refund is planned with its job; above it, it waits
// with none, and sending it sends nothing.
func TestRefundAboveTheThresholdWaits(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	at := e.mustAsk("50000")
	if at.Phase != models.GatewayPlanned || e.tasksOf(at.ID) != 1 {
		t.Fatalf("at the threshold: %s with %d tasks, want planned with 1", at.Phase, e.tasksOf(at.ID))
	}

	e2 := newApprovalEnv(t)
	above := e2.mustAsk("50001")
	if above.Phase != models.GatewayAwaitingApproval || e2.tasksOf(above.ID) != 0 || above.ApprovedBy != "" {
		t.Fatalf("above the threshold: %s with %d tasks, want awaiting_approval with none", above.Phase, e2.tasksOf(above.ID))
	}
	if _, err := e2.refunds.Send(context.Background(), above.ID, "req-test"); models.ErrorCode(err) != models.EInvalidTransition || e2.gw.calls.Load() != 0 {
		t.Fatalf("send before approval: %v, %d calls; want refused, nothing sent", err, e2.gw.calls.Load())
	}
	if r := e2.get(above.ID); r.Phase != models.GatewayAwaitingApproval || r.Attempts != 0 {
		t.Fatalf("after a send: %s, %d attempts; want untouched", r.Phase, r.Attempts)
	}
}

// What a waiting refund asks is held back: a second refund cannot take
// it too; declined, it can be asked again.
func TestWaitingRefundHoldsItsMoneyUntilDeclined(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	held := e.mustAsk("60000")
	if _, err := e.ask("40001", "more than is left"); models.ErrorCode(err) != models.EInvalid {
		t.Fatalf("above what the waiting refund leaves: %v, want %s", err, models.EInvalid)
	}
	if left, err := e.refunds.Refundable(context.Background(), e.orderID, ""); err != nil || left.Left != 40000 || left.Open != 60000 {
		t.Fatalf("refundable: %+v, %v; want 40000 left, 60000 held", left, err)
	}
	r, err := e.refunds.Decline(context.Background(), refunds.Decision{ID: held.ID, Admin: "owner2@example.com"})
	if err != nil || r.Phase != models.GatewayDeclined || r.DeclinedBy != "owner2@example.com" || r.DeclinedAt == nil || e.tasksOf(held.ID) != 0 {
		t.Fatalf("decline: %+v, %v; want declined by owner2, no task", r, err)
	}
	if left, err := e.refunds.Refundable(context.Background(), e.orderID, ""); err != nil || left.Left != price || left.Open != 0 {
		t.Fatalf("after the decline: %+v, %v; want all of it left", left, err)
	}
	if again := e.mustAsk("50000"); again.Phase != models.GatewayPlanned {
		t.Fatalf("asked again: %s", again.Phase)
	}
	if _, err := e.refunds.Approve(context.Background(), refunds.Decision{ID: held.ID, Admin: "owner3@example.com"}); models.ErrorCode(err) != models.EInvalidTransition {
		t.Fatalf("approve after the decline: %v, want %s", err, models.EInvalidTransition)
	}
}

// Who asked cannot approve; nor can the API token; another owner can,
// and then the refund is sent like any other.
func TestApproveNeedsASecondPerson(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	held := e.mustAsk("") // all of it: 100000
	for _, who := range []string{"admin@example.com", refunds.APIActor, ""} {
		if _, err := e.refunds.Approve(context.Background(), refunds.Decision{ID: held.ID, Admin: who}); models.ErrorCode(err) != models.EForbidden {
			t.Errorf("approved by %q: %v, want %s", who, err, models.EForbidden)
		}
	}
	if r := e.get(held.ID); r.Phase != models.GatewayAwaitingApproval || e.tasksOf(held.ID) != 0 {
		t.Fatalf("after refused approvals: %s, %d tasks", r.Phase, e.tasksOf(held.ID))
	}
	r, err := e.refunds.Approve(context.Background(), refunds.Decision{ID: held.ID, Admin: "owner2@example.com", RequestID: "req-approve"})
	if err != nil || r.Phase != models.GatewayPlanned || r.ApprovedBy != "owner2@example.com" || r.ApprovedAt == nil || e.tasksOf(held.ID) != 1 {
		t.Fatalf("approve: %+v, %v, %d tasks; want planned, approved by owner2, one task", r, err, e.tasksOf(held.ID))
	}
	var logged int64
	e.db.Model(&models.AdminAction{}).Where("admin_email = ? AND action = ? AND target = ?", "owner2@example.com", "approve refund", fmt.Sprintf("refund %d", held.ID)).Count(&logged)
	if logged != 1 {
		t.Fatalf("%d action log rows for the approval, want 1", logged)
	}
	done, err := e.refunds.Send(context.Background(), held.ID, "req-approve")
	if err != nil || done.Phase != models.GatewayDone || e.gw.made() != 1 {
		t.Fatalf("send after approval: %+v, %v", done, err)
	}
	if status, refunded, _ := e.state(); status != models.OrderRefunded || refunded != price {
		t.Fatalf("after: %s, refunded %d", status, refunded)
	}
}

// Five owners approve the same refund at once: one approves it, the
// others are told it no longer waits; one job is written.
func TestConcurrentApprovalsApproveOnce(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	held := e.mustAsk("70000")
	start := make(chan struct{})
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			<-start
			_, errs[i] = e.refunds.Approve(context.Background(), refunds.Decision{ID: held.ID, Admin: fmt.Sprintf("owner%d@example.com", i)})
		})
	}
	close(start)
	wg.Wait()
	var ok int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case models.ErrorCode(err) != models.EInvalidTransition:
			t.Fatalf("unexpected: %v", err)
		}
	}
	var logged int64
	e.db.Model(&models.AdminAction{}).Where("action = ? AND target = ?", "approve refund", fmt.Sprintf("refund %d", held.ID)).Count(&logged)
	if r := e.get(held.ID); ok != 1 || e.tasksOf(held.ID) != 1 || r.Phase != models.GatewayPlanned || logged != 1 {
		t.Fatalf("%d approvals, %d tasks, phase %s, %d logged; want exactly one of each", ok, e.tasksOf(held.ID), r.Phase, logged)
	}
}

// The threshold weighs what the order asked, not one refund: two refunds
// of 30000 are one of 60000, so the second waits; one that came to
// nothing (declined) no longer counts, and neither does one asked
// before the window.
func TestApprovalCountsWhatTheOrderAsked(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	first := e.mustAsk("30000")
	second := e.mustAsk("30000")
	if first.Phase != models.GatewayPlanned || second.Phase != models.GatewayAwaitingApproval {
		t.Fatalf("30000 then 30000 under a threshold of %d: %s, %s; want planned, awaiting_approval", threshold, first.Phase, second.Phase)
	}
	if _, err := e.refunds.Decline(context.Background(), refunds.Decision{ID: second.ID, Admin: "owner2@example.com"}); err != nil {
		t.Fatal(err)
	}
	if third := e.mustAsk("20000"); third.Phase != models.GatewayPlanned {
		t.Fatalf("20000 after a declined one (50000 asked in all): %s, want planned", third.Phase)
	}
	// Ten small refunds: the ones that take the sum above it wait.
	e2 := newApprovalEnv(t)
	var waiting int
	for range 10 {
		if e2.mustAsk("10000").Phase == models.GatewayAwaitingApproval {
			waiting++
		}
	}
	if waiting != 5 {
		t.Fatalf("10 × 10000 under a threshold of %d: %d wait, want 5 (the sixth on)", threshold, waiting)
	}
	// Outside the window the earlier refunds no longer count.
	e3 := newApprovalEnv(t)
	e3.mustAsk("30000")
	if err := e3.db.Model(&models.GatewayRequest{}).Where("order_id = ?", e3.orderID).
		Update("created_at", time.Now().Add(-refunds.DefaultApprovalWindow-time.Minute)).Error; err != nil {
		t.Fatal(err)
	}
	if r := e3.mustAsk("30000"); r.Phase != models.GatewayPlanned {
		t.Fatalf("30000 a window after another 30000: %s, want planned", r.Phase)
	}
}

// Approval looks at what is left when it is given: a refund made in the
// gateway's dashboard while this one waited took the money, so approving
// it is refused and nothing is sent; it stays awaiting for an owner to
// decline.
func TestApprovalChecksWhatIsLeft(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	waiting := e.mustAsk("60000")
	// The dashboard refund names no Sekali key: its own id.
	e.notify("evt_dash_"+e.orderID, refundBody(e.orderID, e.charge(), "dash-1", models.RefundSucceeded, 70000))
	_, err := e.refunds.Approve(context.Background(), refunds.Decision{ID: waiting.ID, Admin: "owner2@example.com"})
	if models.ErrorCode(err) != models.EInvalidTransition {
		t.Fatalf("approve with 30000 left: %v, want %s", err, models.EInvalidTransition)
	}
	if r := e.get(waiting.ID); r.Phase != models.GatewayAwaitingApproval || e.tasksOf(waiting.ID) != 0 || e.gw.calls.Load() != 0 {
		t.Fatalf("after the refused approval: %s, %d tasks, %d calls; want awaiting, nothing queued or sent", r.Phase, e.tasksOf(waiting.ID), e.gw.calls.Load())
	}
}

// A refund planned, not sent yet, that no longer fits — the dashboard
// refunded meanwhile — fails unsent when its job comes to send it.
func TestPlannedRefundThatNoLongerFitsIsNotSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	planned := e.mustAsk("60000")
	e.notify("evt_dash_"+e.orderID, refundBody(e.orderID, e.charge(), "dash-1", models.RefundSucceeded, 70000))
	r, err := e.refunds.Send(context.Background(), planned.ID, "req-test")
	if err != nil || r.Phase != models.GatewayFailed || !strings.Contains(r.LastError, "not sent") || e.gw.calls.Load() != 0 {
		t.Fatalf("send: %+v, %v, %d calls; want failed unsent", r, err, e.gw.calls.Load())
	}
	if status, refunded, _ := e.state(); status != models.OrderPartiallyRefunded || refunded != 70000 {
		t.Fatalf("%s with %d refunded; want the dashboard's 70000 only", status, refunded)
	}
	var raised int64
	e.db.Model(&models.Alert{}).Where("type = ?", alerts.RefundFailed).Count(&raised)
	if raised != 1 {
		t.Fatalf("%d refund.failed alerts, want 1", raised)
	}
}
