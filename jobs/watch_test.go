package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/jobs"
)

// TestWatchRaisesEachOccurrenceOnce: a burst of conflicts, a gateway
// that does not answer, a refund the gateway refused, a payment page it
// answered for another amount and a task the queue gave up on are each
// raised once by alerts:watch, however many
// watches look at once and however often; conflicts under the burst's
// threshold raise nothing.
func TestWatchRaisesEachOccurrenceOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC()
	exec := func(q string, args ...any) {
		t.Helper()
		if err := e.db.Exec(q, args...).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// A burst now, and a window an hour ago with one conflict short of one.
	for i := range alerts.ConflictBurstAt {
		exec("INSERT INTO callback_deliveries (provider, received_at, outcome, response_code, duration_ms) VALUES ('sandbox', ?, 'conflict', 409, 1)",
			now.Add(-time.Duration(i)*time.Millisecond))
	}
	for range alerts.ConflictBurstAt - 1 {
		exec("INSERT INTO callback_deliveries (provider, received_at, outcome, response_code, duration_ms) VALUES ('sandbox', ?, 'conflict', 409, 1)",
			now.Add(-time.Hour))
	}
	// A gateway's API timed out on a payment page: the call stays sent with its error.
	pending := e.pendingOrder()
	exec(`INSERT INTO gateway_requests (kind, order_id, provider, idempotency_key, amount, currency, phase, attempts, last_error, updated_at)
VALUES ('create_payment', ?, 'acmepay', ?, ?, 'IDR', 'sent', 1, 'Post "/v1/checkout/sessions": context deadline exceeded', ?)`,
		pending.ID, "pay-"+pending.ID, price, now)
	// A refund the gateway refused.
	paid := e.paidOrder()
	var paymentID int64
	if err := e.db.Raw("SELECT id FROM payments WHERE order_id = ?", paid).Scan(&paymentID).Error; err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO gateway_requests (kind, order_id, provider, idempotency_key, amount, currency, phase, attempts, last_error, payment_id, updated_at)
VALUES ('refund', ?, 'sandbox', ?, ?, 'IDR', 'failed', 1, 'charge already refunded', ?, ?)`,
		paid, paid+"-R1", price, paymentID, now)
	// A payment page a gateway answered for another amount: not offered.
	other := e.pendingOrder()
	exec(`INSERT INTO gateway_requests (kind, order_id, provider, idempotency_key, amount, currency, phase, attempts, last_error,
provider_object_id, done_at, answered_amount, answered_currency, updated_at)
VALUES ('create_payment', ?, 'otherpay', ?, ?, 'IDR', 'conflict', 1, 'not offered: the gateway answered Rp 1, not the Rp 50.000 asked', 'inv-1', ?, 1, 'IDR', ?)`,
		other.ID, other.ID, price, now, now)
	// A task the queue gave up on.
	e.startWorker(jobs.QueueDefault, asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		return fmt.Errorf("poison: %w", asynq.SkipRetry)
	}))
	if _, err := e.client.Enqueue(asynq.NewTask("test:poison", nil), asynq.Queue(jobs.QueueDefault), asynq.TaskID("poison-1")); err != nil {
		t.Fatal(err)
	}
	e.waitState(jobs.QueueDefault, "poison-1", asynq.TaskStateArchived)

	const watches = 4
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	raised := 0
	for range watches {
		wg.Go(func() {
			<-start
			n, err := jobs.NewWatch(e.db, e.insp, e.log, time.Now).Once(ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			raised += n
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()

	var types []string
	if err := e.db.Raw("SELECT type FROM alerts ORDER BY type").Scan(&types).Error; err != nil {
		t.Fatal(err)
	}
	want := []string{alerts.ConflictBurst, alerts.GatewayConflict, alerts.GatewayDown, alerts.JobsArchived, alerts.RefundFailed}
	if !slices.Equal(types, want) || raised != len(want) {
		t.Fatalf("%d watches at once raised %d: %v; want each of %v once", watches, raised, types, want)
	}
	if n := e.count("SELECT count(*) FROM outbox_messages WHERE task_type = ?", jobs.TaskAlertSend); n != int64(len(want)) {
		t.Errorf("%d alert:send tasks, want %d", n, len(want))
	}
	if n, err := jobs.NewWatch(e.db, e.insp, e.log, time.Now).Once(ctx); n != 0 || err != nil {
		t.Errorf("a later look raised %d (%v), want 0", n, err)
	}
	var gw struct{ EventID, Payload string }
	e.db.Raw("SELECT event_id, payload::text AS payload FROM alerts WHERE type = ?", alerts.GatewayDown).Scan(&gw)
	if gw.EventID != alerts.GatewayDown+":acmepay:"+alerts.WindowKey(now) {
		t.Errorf("gateway.unreachable's event id %q: want it per provider and window", gw.EventID)
	}
}
