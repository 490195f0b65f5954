package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// relayEnv is a fresh database and a private redis-server with an Asynq
// client and inspector on it.
type relayEnv struct {
	tb     testing.TB
	db     *gorm.DB
	dbURL  string
	redis  *testenv.RedisServer
	client *asynq.Client
	insp   *asynq.Inspector
}

func relayNewEnv(tb testing.TB) *relayEnv {
	tb.Helper()
	url := testenv.NewDatabaseURL(tb)
	rs := testenv.StartRedis(tb)
	rdb := rs.Client()
	// Both share rdb, closed by testenv: Asynq refuses to Close them.
	return &relayEnv{tb: tb, db: testenv.OpenDB(tb, url), dbURL: url, redis: rs,
		client: asynq.NewClientFromRedisClient(rdb), insp: asynq.NewInspectorFromRedisClient(rdb)}
}

func (e *relayEnv) relay(queue interface {
	EnqueueContext(context.Context, *asynq.Task, ...asynq.Option) (*asynq.TaskInfo, error)
}, listenURL string) *jobs.Relay {
	if queue == nil {
		queue = e.client
	}
	return jobs.NewRelay(e.db, queue, testenv.Logger(e.tb), time.Hour, listenURL, metrics.New())
}

// relayAdd writes msgs the way the application does: outbox.Add in a
// transaction.
func relayAdd(tb testing.TB, db *gorm.DB, msgs ...models.OutboxMessage) {
	tb.Helper()
	if err := db.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) }); err != nil {
		tb.Fatal(err)
	}
}

func relayRow(tb testing.TB, db *gorm.DB, taskID string) models.OutboxMessage {
	tb.Helper()
	var m models.OutboxMessage
	if err := db.Take(&m, "task_id = ?", taskID).Error; err != nil {
		tb.Fatalf("outbox row %s: %v", taskID, err)
	}
	return m
}

// relayQueuedIDs counts the ids of the tasks Asynq holds in queues, in
// every state a task can wait in.
func relayQueuedIDs(tb testing.TB, insp *asynq.Inspector, queues ...string) map[string]int {
	tb.Helper()
	ids := map[string]int{}
	for _, q := range queues {
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
			insp.ListPendingTasks, insp.ListScheduledTasks, insp.ListActiveTasks,
			insp.ListRetryTasks, insp.ListArchivedTasks, insp.ListCompletedTasks,
		} {
			tasks, err := list(q, asynq.PageSize(10_000))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				continue
			}
			if err != nil {
				tb.Fatalf("list tasks of %s: %v", q, err)
			}
			for _, ti := range tasks {
				ids[ti.ID]++
			}
		}
	}
	return ids
}

// relayCountingQueue hands tasks to Asynq and counts what it was asked.
type relayCountingQueue struct {
	q         *asynq.Client
	mu        sync.Mutex
	enqueued  map[string]int
	conflicts int
}

func (c *relayCountingQueue) EnqueueContext(ctx context.Context, t *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	info, err := c.q.EnqueueContext(ctx, t, opts...)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.enqueued[info.ID]++
	case errors.Is(err, asynq.ErrTaskIDConflict):
		c.conflicts++
	}
	return info, err
}

// TestRelayConcurrentRelaysDispatchEachRowOnce: two relays on the same
// database and Redis, released together on the same rows, hand each row
// to Asynq once and mark it dispatched once.
func TestRelayConcurrentRelaysDispatchEachRowOnce(t *testing.T) {
	t.Parallel()
	env := relayNewEnv(t)
	queue := &relayCountingQueue{q: env.client, enqueued: map[string]int{}}
	relays := []*jobs.Relay{env.relay(queue, ""), env.relay(queue, "")}
	for _, r := range relays {
		r.Batch = 7 // several claims per round, so the relays interleave
	}
	const rounds, perRound = 5, 40
	var perRelay [2]int
	for round := range rounds {
		var msgs []models.OutboxMessage
		for i := range perRound {
			id := fmt.Sprintf("ORD-R%d-%02d", round, i)
			if i%2 == 0 {
				msgs = append(msgs, jobs.Row(jobs.InvoiceArgs{OrderID: id}, time.Now()))
			} else {
				msgs = append(msgs, jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: id}, time.Now()))
			}
		}
		relayAdd(t, env.db, msgs...)

		start := make(chan struct{})
		var wg sync.WaitGroup
		var dispatched [2]int
		var errs [2]error
		for i, r := range relays {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for { // until this relay finds nothing left to claim
					n, err := r.RelayOnce(context.Background())
					dispatched[i] += n
					if err != nil || n == 0 {
						errs[i] = err
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if dispatched[0]+dispatched[1] != perRound {
			t.Fatalf("round %d: relays report %d + %d dispatched, want %d in all", round, dispatched[0], dispatched[1], perRound)
		}
		perRelay[0] += dispatched[0]
		perRelay[1] += dispatched[1]
	}
	t.Logf("rows dispatched per relay: %v", perRelay)
	if perRelay[0] == 0 || perRelay[1] == 0 {
		t.Fatalf("one relay did all the work (%v): the test did not run them concurrently", perRelay)
	}

	var rows []models.OutboxMessage
	if err := env.db.Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != rounds*perRound {
		t.Fatalf("outbox rows = %d, want %d", len(rows), rounds*perRound)
	}
	queued := relayQueuedIDs(t, env.insp, jobs.QueueCritical, jobs.QueueDefault)
	for _, m := range rows {
		// attempts counts hand-overs: 2 would mean two relays marked it.
		if m.Status != models.OutboxDispatched || m.Attempts != 1 || m.DispatchedAt == nil || m.LastError != "" {
			t.Errorf("row %s: status %s, attempts %d, dispatched_at %v, last_error %q; want dispatched once",
				m.TaskID, m.Status, m.Attempts, m.DispatchedAt, m.LastError)
		}
		if queued[m.TaskID] != 1 || queue.enqueued[m.TaskID] != 1 {
			t.Errorf("task %s: %d in Asynq, enqueued %d times; want 1 and 1", m.TaskID, queued[m.TaskID], queue.enqueued[m.TaskID])
		}
	}
	if len(queued) != len(rows) || queue.conflicts != 0 {
		t.Errorf("Asynq holds %d tasks for %d rows; %d enqueues were refused as duplicates, want none",
			len(queued), len(rows), queue.conflicts)
	}
}

// TestRelayTaskIDConflictCountsAsDispatched: Asynq already has the task
// (an earlier relay enqueued it and crashed before its commit): the
// refusal means the queue has it, so the row is dispatched.
func TestRelayTaskIDConflictCountsAsDispatched(t *testing.T) {
	t.Parallel()
	env := relayNewEnv(t)
	m := jobs.Row(jobs.InvoiceArgs{OrderID: "ORD-conflict"}, time.Now())
	if _, err := env.client.Enqueue(asynq.NewTask(m.TaskType, m.Payload), asynq.TaskID(m.TaskID), asynq.Queue(m.Queue)); err != nil {
		t.Fatal(err)
	}
	relayAdd(t, env.db, m)

	n, err := env.relay(nil, "").RelayOnce(context.Background())
	if n != 1 || err != nil {
		t.Fatalf("RelayOnce = %d, %v; want 1, nil", n, err)
	}
	row := relayRow(t, env.db, m.TaskID)
	if row.Status != models.OutboxDispatched || row.Attempts != 1 || row.LastError != "" || row.DispatchedAt == nil {
		t.Fatalf("row: status %s, attempts %d, last_error %q; want dispatched at the first attempt", row.Status, row.Attempts, row.LastError)
	}
	if ids := relayQueuedIDs(t, env.insp, m.Queue); len(ids) != 1 || ids[m.TaskID] != 1 {
		t.Fatalf("Asynq tasks = %v, want only %s", ids, m.TaskID)
	}
}

// TestRelayRedisDownKeepsRowsPending: with Redis down the row stays
// pending with the error; a row not yet due is left alone; once Redis is
// back the next pass dispatches the due row.
func TestRelayRedisDownKeepsRowsPending(t *testing.T) {
	t.Parallel()
	env := relayNewEnv(t)
	later := jobs.Row(jobs.InvoiceArgs{OrderID: "ORD-later"}, time.Now().Add(time.Hour))
	due := jobs.Row(jobs.InvoiceArgs{OrderID: "ORD-due"}, time.Now())
	relayAdd(t, env.db, later) // the lower id: claimed first if due-ness were ignored
	relayAdd(t, env.db, due)
	r := env.relay(nil, "")

	env.redis.Stop()
	n, err := r.RelayOnce(context.Background())
	if err == nil || n != 0 {
		t.Fatalf("RelayOnce with Redis down = %d, %v; want 0 and an error", n, err)
	}
	t.Logf("RelayOnce with Redis down: %v", err)
	if row := relayRow(t, env.db, due.TaskID); row.Status != models.OutboxPending || row.Attempts != 1 || row.LastError == "" {
		t.Fatalf("due row: status %s, attempts %d, last_error %q; want pending, 1, the error", row.Status, row.Attempts, row.LastError)
	}
	if row := relayRow(t, env.db, later.TaskID); row.Status != models.OutboxPending || row.Attempts != 0 || row.LastError != "" {
		t.Fatalf("row not yet due: status %s, attempts %d, last_error %q; want untouched", row.Status, row.Attempts, row.LastError)
	}

	env.redis.Start()
	n, err = r.RelayOnce(context.Background())
	if n != 1 || err != nil {
		t.Fatalf("RelayOnce after Redis is back = %d, %v; want 1, nil", n, err)
	}
	if row := relayRow(t, env.db, due.TaskID); row.Status != models.OutboxDispatched || row.Attempts != 2 {
		t.Fatalf("due row: status %s, attempts %d; want dispatched at the second attempt", row.Status, row.Attempts)
	}
	if row := relayRow(t, env.db, later.TaskID); row.Status != models.OutboxPending || row.Attempts != 0 {
		t.Fatalf("row not yet due: status %s, attempts %d; want pending, 0", row.Status, row.Attempts)
	}
	if ids := relayQueuedIDs(t, env.insp, jobs.QueueCritical); len(ids) != 1 || ids[due.TaskID] != 1 {
		t.Fatalf("Asynq tasks = %v, want only %s", ids, due.TaskID)
	}
}

// TestRelayRunWakesOnNotify: with a one-minute poll, only a NOTIFY (sent
// after the commit, as outbox.Notifier does) can get rows dispatched
// within seconds.
func TestRelayRunWakesOnNotify(t *testing.T) {
	t.Parallel()
	env := relayNewEnv(t)
	r := env.relay(nil, env.dbURL)
	r.Poll = time.Minute
	relayRun(t, r)
	relayWaitListening(t, env.db)

	var took []time.Duration
	for i := range 5 { // one after the other: only the first can be caught by the start-up pass
		took = append(took, relayCommitToDispatched(t, env.db, fmt.Sprintf("ORD-notify-%d", i), 5*time.Second))
	}
	t.Logf("commit to dispatched with LISTEN/NOTIFY (poll 1m): %v", took)
}

// BenchmarkRelayLatency reports the time from an outbox commit to the
// row being dispatched, woken by NOTIFY versus polling every second.
func BenchmarkRelayLatency(b *testing.B) {
	for _, mode := range []struct {
		name   string
		listen bool
		poll   time.Duration
	}{{"listen", true, time.Minute}, {"poll=1s", false, time.Second}} {
		b.Run(mode.name, func(b *testing.B) {
			env := relayNewEnv(b)
			url := ""
			if mode.listen {
				url = env.dbURL
			}
			r := env.relay(nil, url)
			r.Poll = mode.poll
			relayRun(b, r)
			if mode.listen {
				relayWaitListening(b, env.db)
			}
			var total, worst time.Duration
			for i := 0; b.Loop(); i++ {
				if !mode.listen {
					// Commit at a random point of the poll period, as
					// real traffic does, not right after the last pass.
					time.Sleep(rand.N(mode.poll))
				}
				d := relayCommitToDispatched(b, env.db, fmt.Sprintf("ORD-bench-%d", i), 5*time.Second)
				total += d
				worst = max(worst, d)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-mean")
			b.ReportMetric(float64(worst.Microseconds())/1000, "ms-max")
		})
	}
}

// relayRun runs r until the test ends.
func relayRun(tb testing.TB, r *jobs.Relay) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("relay: %v", err)
		}
	})
}

// relayWaitListening waits until a session of db's database LISTENs for
// outbox_messages, so no notification is sent before anyone listens.
func relayWaitListening(tb testing.TB, db *gorm.DB) {
	tb.Helper()
	relayPoll(tb, 10*time.Second, "the relay to LISTEN", func() bool {
		var n int64
		err := db.Raw(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle' AND query = 'LISTEN outbox_messages'`).Scan(&n).Error
		if err != nil {
			tb.Fatal(err)
		}
		return n > 0
	})
}

// relayCommitToDispatched commits an outbox row for orderID and returns
// how long it took until the row was dispatched.
func relayCommitToDispatched(tb testing.TB, db *gorm.DB, orderID string, deadline time.Duration) time.Duration {
	tb.Helper()
	m := jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: orderID}, time.Now())
	relayAdd(tb, db, m)
	start := time.Now()
	if err := outbox.Notify(context.Background(), db); err != nil {
		tb.Fatal(err)
	}
	relayPoll(tb, deadline, "row "+m.TaskID+" to be dispatched", func() bool {
		var status string
		if err := db.Raw("SELECT status FROM outbox_messages WHERE task_id = ?", m.TaskID).Scan(&status).Error; err != nil {
			tb.Fatal(err)
		}
		return status == string(models.OutboxDispatched)
	})
	return time.Since(start)
}

// relayPoll waits until cond holds, failing the test after timeout.
func relayPoll(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond) // polling a condition, not sleeping for one
	}
}
