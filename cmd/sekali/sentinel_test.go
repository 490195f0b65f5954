package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestRedisSentinelFailover runs `sekali serve` with every role against a
// Redis behind Sentinel (REDIS_URL=redis-sentinel://…) and kills the
// primary with SIGKILL in the middle of a duplicate storm of paid
// callbacks: jobs are running, and orders paid during the outage have
// their tasks waiting in the outbox. The Sentinels promote the replica;
// the app's one failover client finds it on its own. Whatever the dead
// primary had not passed on — tasks, locks — is made good by the outbox,
// the reconciler (RECONCILE_AFTER, short here), Asynq's recovery of
// interrupted tasks and the guard's lease: in the end each paid order has
// exactly one invoice and one sent email, and the audit is green.
//
// What bounds its duration: usually the jobs are done a few seconds after
// the promotion (about 15 s in all). In about a third of the runs a job
// that failed while no primary answered (its lock could not be taken)
// stays "active" in the queue: Asynq v0.26 records the failure through a
// syncer whose context is already cancelled, so only its recoverer brings
// the task back, 30 s after its 30 s lease ran out, checked once a
// minute: then the test takes about two minutes. A task the replica never
// received comes back through the reconciler, which looks every
// RECONCILE_AFTER (1 s here).
func TestRedisSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the Redis primary and waits for the Sentinels' failover: make test runs it")
	}
	t.Parallel()
	const paidOrders, copies = 60, 5
	const price = 10000
	started := time.Now()
	redis := testenv.StartSentinel(t)
	a := startApp(t, map[string]string{
		"REDIS_URL":       redis.URL(),
		"RECONCILE_AFTER": "1s",
		"JOB_LOCK_TTL":    "3s", // a lock or lease lost with the primary holds a job back this long at most
	})
	sku := a.newProduct(t, price, paidOrders)
	ids := make([]string, paidOrders)
	for i := range ids {
		ids[i] = a.createOrder(t, map[string]int{sku: 1})
	}
	got := newResults()
	storm := func(ids []string) { // every paid callback `copies` times, all at once
		concurrently(len(ids)*copies, func(i int) {
			id := ids[i/copies]
			got.add(a.callback(t, "evt_paid_"+id, testenv.SandboxBody(id, "tx-"+id, models.EventPaid, price)))
		})
	}
	invoices := func() int64 { return a.count(t, "SELECT count(*) FROM invoices") }

	// The first half is paid; the primary dies once its jobs are running.
	storm(ids[:paidOrders/2])
	testenv.Eventually(t, "the first invoice", func() bool { return invoices() > 0 })
	redis.KillPrimary()
	killed := time.Now()
	t.Logf("primary killed %s after the start, with %d of %d invoices made", killed.Sub(started).Round(time.Millisecond), invoices(), paidOrders/2)

	// The second half is paid while no Redis answers: PostgreSQL alone
	// takes the callbacks, the outbox keeps their tasks.
	storm(ids[paidOrders/2:])
	redis.WaitPromoted()
	t.Logf("replica promoted %s after the kill", time.Since(killed).Round(time.Millisecond))
	testenv.Eventually(t, "/readyz to answer 200 through the new primary", func() bool {
		return a.do(t, "GET", "/readyz", nil, nil).Status == http.StatusOK
	})
	t.Logf("ready again %s after the kill", time.Since(killed).Round(time.Millisecond))

	testenv.Eventually(t, "an invoice and a sent email for every paid order", func() bool {
		return a.count(t, `SELECT count(*) FROM orders o WHERE o.status = 'paid' AND (
		          NOT EXISTS (SELECT 1 FROM invoices i WHERE i.order_id = o.id) OR
		          NOT EXISTS (SELECT 1 FROM outbound_emails e WHERE e.key = 'order_paid:' || o.id AND e.status = 'sent'))`) == 0
	})
	t.Logf("every job done %s after the kill", time.Since(killed).Round(time.Millisecond))

	if got.counts["processed"] != paidOrders || got.counts["duplicate"] != paidOrders*(copies-1) || got.status[200] != paidOrders*copies {
		t.Fatalf("callbacks: results %v, statuses %v; want %d processed and %d duplicate, all 200",
			got.counts, got.status, paidOrders, paidOrders*(copies-1))
	}
	if n := a.count(t, "SELECT count(*) FROM orders WHERE status = 'paid'"); n != paidOrders {
		t.Fatalf("paid orders = %d, want %d", n, paidOrders)
	}
	var inv struct{ Count, Orders, Lo, Hi int64 }
	a.DB.Raw("SELECT count(*) AS count, count(DISTINCT order_id) AS orders, min(sequence) AS lo, max(sequence) AS hi FROM invoices").Scan(&inv)
	if inv.Count != paidOrders || inv.Orders != paidOrders || inv.Lo != 1 || inv.Hi != paidOrders {
		t.Fatalf("invoices: %+v; want one for each of %d orders, numbered 1..%d", inv, paidOrders, paidOrders)
	}
	if n := a.count(t, "SELECT count(DISTINCT key) FROM outbound_emails WHERE status = 'sent' AND key LIKE 'order_paid:%'"); n != paidOrders {
		t.Fatalf("sent order_paid emails = %d, want %d", n, paidOrders)
	}
	if n := a.count(t, "SELECT count(*) FROM outbound_emails"); n != paidOrders {
		t.Fatalf("outbound emails = %d, want %d (one per paid order)", n, paidOrders)
	}
	t.Logf("outbox rows tried more than once (a failed hand-over, or a re-dispatch): %d; jobs run more than once: %d",
		a.count(t, "SELECT count(*) FROM outbox_messages WHERE attempts > 1"),
		a.count(t, "SELECT count(*) FROM job_executions WHERE attempts > 1"))
	a.verify(t)
}
