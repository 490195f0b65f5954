package refunds_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// lines keeps the JSON log lines written to it, for a test to read.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// with are the lines whose key is value.
func (l *lines) with(t *testing.T, key string, value any) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %s", sc.Text())
		}
		if fmt.Sprint(m[key]) == fmt.Sprint(value) {
			out = append(out, m)
		}
	}
	return out
}

// Every line of a refund's job — the guard's and the send's — carries the
// admin's request id and the refund record's id, so that the admin's
// request leads to the gateway's answer. A payload of the first version
// (its request_id the refund record's number, not a string), still in an
// outbox or a queue, runs and logs the record's id.
func TestRefundJobLogsTheAdminsRequestAndTheRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := &lines{}
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(logs, testenv.LogWriter(t)), nil))
	svc := refunds.NewService(e.db, log, time.Now, e.metrics, e.pay, jobs.Tasks{}, e.gw)
	guard := jobs.NewGuard(e.db, testenv.NewRedis(t), log, "worker-1", 30*time.Second, metrics.New())
	run := func(task models.OutboxMessage) {
		t.Helper()
		j := jobs.Job{Key: task.TaskID, Type: task.TaskType, Queue: task.Queue, Payload: task.Payload, Attempt: 1}
		if outcome, err := guard.Run(context.Background(), j, jobs.RefundPrepare(svc), jobs.RefundEffect()); outcome != jobs.RunSucceeded {
			t.Fatalf("%s: %s, %v; want succeeded", task.TaskID, outcome, err)
		}
	}
	task := func(r *models.GatewayRequest) models.OutboxMessage {
		t.Helper()
		var m models.OutboxMessage
		if err := e.db.Take(&m, "task_id = ?", fmt.Sprintf("%s:%d", jobs.TaskRefundSend, r.ID)).Error; err != nil {
			t.Fatal(err)
		}
		return m
	}

	asked, err := e.request(refunds.Request{OrderID: e.orderID, Amount: "40000", Reason: "a broken cup",
		Admin: "admin@example.com", RequestID: "req-admin-7"})
	if err != nil {
		t.Fatal(err)
	}
	run(task(asked))
	mine := logs.with(t, "refund_request_id", asked.ID)
	msgs := map[string]bool{}
	for _, l := range mine {
		msgs[fmt.Sprint(l["msg"])] = true
		if l["request_id"] != "req-admin-7" {
			t.Errorf("%q: request_id %v, want the admin's req-admin-7", l["msg"], l["request_id"])
		}
	}
	if !msgs["refund done"] || !msgs["job succeeded"] {
		t.Errorf("lines of refund %d: %v; want the send's and the guard's", asked.ID, msgs)
	}
	if n := len(logs.with(t, "request_id", "req-admin-7")); n != len(mine) {
		t.Errorf("%d lines carry the admin's request id, %d the refund's; want the same lines", n, len(mine))
	}
	// The gateway's answer is applied under the admin's request too: its
	// delivery row, and the email the refund's success writes.
	var answered, emails int64
	e.db.Model(&models.CallbackDelivery{}).Where("remote_addr = 'gateway answer' AND request_id = ?", "req-admin-7").Count(&answered)
	e.db.Raw(`SELECT count(*) FROM outbox_messages WHERE task_type = ? AND convert_from(payload, 'UTF8')::jsonb ->> 'template' = 'refund_succeeded'
		AND convert_from(payload, 'UTF8')::jsonb ->> 'request_id' = ?`, jobs.TaskEmailSend, "req-admin-7").Scan(&emails)
	if answered != 1 || emails != 1 {
		t.Errorf("%d answer deliveries and %d refund emails carry the admin's request id, want 1 and 1", answered, emails)
	}

	// A payload of the first version: request_id was the record's id.
	old, err := e.request(refunds.Request{OrderID: e.orderID, Amount: "10000", Reason: "a chipped saucer", Admin: "admin@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	m := task(old)
	m.Payload = fmt.Appendf(nil, `{"request_id":%d,"order_id":%q}`, old.ID, e.orderID)
	run(m)
	var after models.GatewayRequest
	e.db.Take(&after, old.ID)
	if after.Phase != models.GatewayDone || e.gw.made() != 2 {
		t.Errorf("the first version's payload: refund %s, %d refunds at the gateway; want done, 2", after.Phase, e.gw.made())
	}
	done := false
	for _, l := range logs.with(t, "refund_request_id", old.ID) {
		done = done || l["msg"] == "job succeeded"
		if l["request_id"] != "" {
			t.Errorf("%q of the first version's payload: request_id %v, want none", l["msg"], l["request_id"])
		}
	}
	if !done {
		t.Errorf("no job line names the first version's refund %d", old.ID)
	}
}

// Discarding a refund's job gives up on the refund: with the gateway
// answering 500, the operator discards the failed job ("refunded by
// hand"); the refund is discarded too, holds nothing back, and neither
// "Send again now" nor a copy of the job the queue still delivers calls
// the gateway again. While a call's lease runs, the discard is refused:
// that call may still refund.
func TestDiscardedRefundIsNeverSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rdb := testenv.NewRedis(t)
	guard := jobs.NewGuard(e.db, rdb, testenv.Logger(t), "worker-1", 30*time.Second, metrics.New())
	console := jobs.NewConsole(e.db, asynq.NewInspectorFromRedisClient(rdb), asynq.NewClientFromRedisClient(rdb), time.Hour, metrics.New())
	// The lease outlasts the discard's first try however slow the
	// machine; the test then moves it into the past, as time would.
	e.refunds.CallTimeout = testenv.Budget(t)
	asked := e.mustAsk("50000")
	var task models.OutboxMessage
	if err := e.db.Take(&task, "task_id = ?", fmt.Sprintf("%s:%d", jobs.TaskRefundSend, asked.ID)).Error; err != nil {
		t.Fatal(err)
	}
	// Handed to the queue, as the relay does; the queue's copy is run
	// here by hand.
	e.db.Model(&task).Update("status", models.OutboxDispatched)
	j := jobs.Job{Key: task.TaskID, Type: task.TaskType, Queue: task.Queue, Payload: task.Payload, Attempt: 1}
	e.gw.down = errors.New("500 Internal Server Error")
	if outcome, _ := guard.Run(ctx, j, jobs.RefundPrepare(e.refunds), jobs.RefundEffect()); outcome != jobs.RunFailed {
		t.Fatalf("the job against a gateway answering 500: %s, want failed", outcome)
	}
	discard := jobview.Discard{Key: task.TaskID, Reason: "refunded by hand in the dashboard", Admin: "ops@example.com"}
	if err := console.Discard(ctx, discard); models.ErrorCode(err) != models.EInvalidTransition {
		t.Fatalf("discard while the call's lease runs: %v, want %s", err, models.EInvalidTransition)
	}
	e.db.Model(&models.GatewayRequest{}).Where("id = ?", asked.ID).Update("locked_until", time.Now().Add(-time.Second))
	if err := console.Discard(ctx, discard); err != nil {
		t.Fatalf("discard once the lease has passed: %v", err)
	}
	r := e.get(asked.ID)
	if r.Phase != models.GatewayDiscarded || !strings.Contains(r.LastError, "ops@example.com") {
		t.Fatalf("the refund after its job's discard: %s (%q), want discarded, saying by whom", r.Phase, r.LastError)
	}
	if left, err := e.refunds.Refundable(ctx, e.orderID, ""); err != nil || left.Left != price || left.Open != 0 {
		t.Fatalf("refundable after the discard: %+v, %v; want all of it, nothing held", left, err)
	}
	e.gw.down = nil
	calls := e.gw.calls.Load()
	if again, err := e.refunds.Send(ctx, asked.ID, "req-send-again"); err != nil || again.Phase != models.GatewayDiscarded {
		t.Fatalf("send again: %+v, %v; want it left discarded", again, err)
	}
	j.Attempt = 2
	if outcome, _ := guard.Run(ctx, j, jobs.RefundPrepare(e.refunds), jobs.RefundEffect()); outcome != jobs.RunDiscarded {
		t.Fatalf("a copy of the job run after the discard: %s, want discarded", outcome)
	}
	if e.gw.calls.Load() != calls || e.gw.made() != 0 {
		t.Fatalf("%d calls after the discard, %d refunds made; want none", e.gw.calls.Load()-calls, e.gw.made())
	}
	if status, refunded, _ := e.state(); status != models.OrderPaid || refunded != 0 {
		t.Fatalf("order %s with %d refunded; want paid, nothing refunded", status, refunded)
	}
}
