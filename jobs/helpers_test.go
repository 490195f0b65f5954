package jobs_test

// The guard reads the task id with asynq.GetTaskID, which Asynq keeps in
// the context under an unexported key of its internal/context package;
// only Asynq's processor builds that context (processor.go calls
// asynqcontext.New), so a test cannot make one. Each worker here is
// therefore a real asynq.Server on the test's own redis-server, fed through
// asynq.Client with the task the relay would send (jobs.NewTask); retries,
// SkipRetry and retention are Asynq's own, and asynq.Inspector shows them.
//
// Asynq refuses a second task with an id already in a queue, but ids are
// per queue: the same task enqueued into two queues, each served by its own
// worker, is delivered twice at once, as a redelivery after a lost lease
// would be.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

const (
	price     = 50000 // every order is one unit of its own product
	retention = time.Hour
)

// env is one test's world: its own database, redis-server and services.
type env struct {
	t      *testing.T
	db     *gorm.DB
	rdb    *redis.Client
	redis  *testenv.RedisServer
	log    *slog.Logger
	orders *orders.Service
	pay    *payments.Service
	client *asynq.Client
	insp   *asynq.Inspector
	mailer *fakeMailer
	n      int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := testenv.NewDB(t)
	rs := testenv.StartRedis(t)
	rdb := rs.Client()
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	t.Cleanup(pay.Close)
	return &env{
		t: t, db: db, rdb: rdb, redis: rs, log: log,
		orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}),
		pay:    pay,
		// Built on the test's client: Asynq leaves shared connections open.
		client: asynq.NewClientFromRedisClient(rdb),
		insp:   asynq.NewInspectorFromRedisClient(rdb),
		mailer: &fakeMailer{},
	}
}

// pendingOrder creates a one-item order of a fresh product with stock 1.
func (e *env) pendingOrder() *models.Order {
	e.t.Helper()
	e.n++
	sku := fmt.Sprintf("JOB-%d", e.n)
	testenv.MustCreateProduct(e.t, e.db, sku, price, 1)
	o, err := e.orders.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: sku, Qty: 1}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// paidOrder creates an order and pays it with a signed sandbox callback.
func (e *env) paidOrder() string {
	e.t.Helper()
	o := e.pendingOrder()
	body := testenv.SandboxBody(o.ID, "tx-"+o.ID, models.EventPaid, price)
	out := e.pay.Receive(context.Background(), payments.Delivery{
		Provider:    sandbox.Name,
		Header:      testenv.SandboxHeaders("evt_"+o.ID, body, time.Now()),
		Body:        bytes.NewReader(body),
		ContentType: "application/json",
	})
	if out.Status() != 200 || out.Result != models.ResultProcessed {
		e.t.Fatalf("paying %s: %+v", o.ID, out)
	}
	return o.ID
}

// enqueue sends m's task, as the relay would, into queue.
func (e *env) enqueue(m models.OutboxMessage, queue string) {
	e.t.Helper()
	if _, err := e.client.Enqueue(jobs.NewTask(m, retention), asynq.Queue(queue)); err != nil {
		e.t.Fatalf("enqueue %s into %s: %v", m.TaskID, queue, err)
	}
}

// job reads the job_executions row of key.
func (e *env) job(key string) models.JobExecution {
	e.t.Helper()
	var j models.JobExecution
	if err := e.db.Take(&j, "idempotency_key = ?", key).Error; err != nil {
		e.t.Fatalf("job %s: %v", key, err)
	}
	return j
}

// fence reads key's fence without failing (0 before the first claim), for polls.
func (e *env) fence(key string) int64 {
	var f int64
	e.db.Raw("SELECT coalesce(max(fence), 0) FROM job_executions WHERE idempotency_key = ?", key).Scan(&f)
	return f
}

func (e *env) count(query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.Raw(query, args...).Scan(&n).Error; err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// lockHeld reports whether the guard's Redis lock of key exists.
func (e *env) lockHeld(key string) bool {
	n, err := e.rdb.Exists(context.Background(), "lock:"+key).Result()
	return err != nil || n > 0
}

// waitState waits until the task id in queue is in state. Each state it
// passes through is logged (the log shows when the test fails).
func (e *env) waitState(queue, id string, state asynq.TaskState) {
	e.t.Helper()
	last := ""
	eventually(e.t, fmt.Sprintf("task %s in %s is %s", id, queue, state), func() bool {
		seen := ""
		info, err := e.insp.GetTaskInfo(queue, id)
		if err != nil {
			seen = err.Error()
		} else {
			seen = info.State.String()
		}
		if seen != last {
			e.t.Logf("task %s in %s: %s", id, queue, seen)
			last = seen
		}
		return err == nil && info.State == state
	})
}

// eventually is testenv.Eventually.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, cond)
}

// waitClosed waits for ch to be closed.
func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testenv.Budget(t)):
		t.Fatalf("timed out waiting until %s", what)
	}
}

// worker is one asynq.Server serving one queue (named after the worker)
// with a handler, and recording what each delivery returned.
type worker struct {
	queue string
	h     asynq.Handler
	hold  func() // runs before each delivery, when set

	mu   sync.Mutex
	runs map[string][]error // by task id, in order
}

type workerOption func(*asynq.Config, *worker)

// withRetryDelay sets how long Asynq waits before a retry (default 10ms).
func withRetryDelay(d time.Duration) workerOption {
	return func(c *asynq.Config, _ *worker) {
		c.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return d }
	}
}

// withHold makes every delivery call hold before the handler runs.
func withHold(hold func()) workerOption {
	return func(_ *asynq.Config, w *worker) { w.hold = hold }
}

// retryWhileLocked brings a delivery that the lock turned away back for
// as long as the lock is held, without spending its retries: at the
// tests' 10 ms between retries, its 25 run out in a quarter of a second,
// less than the holder's run may take on a busy machine (production waits
// a second between them, jobs.RetryDelay).
func retryWhileLocked() workerOption {
	return func(cfg *asynq.Config, _ *worker) {
		cfg.IsFailure = func(err error) bool { return !errors.Is(err, jobs.ErrLockBusy) }
	}
}

// startWorker runs h on queue until the test ends.
func (e *env) startWorker(queue string, h asynq.Handler, opts ...workerOption) *worker {
	e.t.Helper()
	w := &worker{queue: queue, h: h, runs: map[string][]error{}}
	cfg := asynq.Config{
		Concurrency: 4,
		Queues:      map[string]int{queue: 1},
		// Poll often: tests wait for deliveries and retries.
		TaskCheckInterval:        10 * time.Millisecond,
		DelayedTaskCheckInterval: 20 * time.Millisecond,
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return 10 * time.Millisecond },
		ShutdownTimeout:          5 * time.Second,
		Logger:                   asynqLogger{e.log.With("worker", queue)},
		LogLevel:                 asynq.WarnLevel,
	}
	for _, o := range opts {
		o(&cfg, w)
	}
	srv := asynq.NewServerFromRedisClient(e.rdb, cfg)
	if err := srv.Start(w); err != nil {
		e.t.Fatalf("start worker %s: %v", queue, err)
	}
	e.t.Cleanup(srv.Shutdown)
	return w
}

// normalWorker is a worker as RunWorker builds it: a guard with a 30s lock
// in front of jobs.NewMux, sending email through the env's fake mailer.
func (e *env) normalWorker(name string, opts ...workerOption) *worker {
	e.t.Helper()
	m := metrics.New()
	g := jobs.NewGuard(e.db, e.rdb, e.log, name, 30*time.Second, m)
	mux := jobs.NewMux(jobs.Deps{
		DB:          e.db,
		Now:         time.Now,
		Metrics:     m,
		Guard:       g,
		Maintenance: jobs.NewMaintenance(e.db, e.orders, e.log, time.Hour, metrics.New()),
		Reconciler:  jobs.NewReconciler(e.db, e.client, e.log, retention, time.Hour, metrics.New()),
		Orders:      e.orders,
		Mailer:      e.mailer,
		MailFrom:    "shop@example.com",
		Alerts:      alerts.NewSender(e.db, "", nil, time.Now), // no ALERT_WEBHOOK_URL
	})
	return e.startWorker(name, mux, opts...)
}

// ProcessTask implements asynq.Handler.
func (w *worker) ProcessTask(ctx context.Context, t *asynq.Task) error {
	if w.hold != nil {
		w.hold()
	}
	err := w.h.ProcessTask(ctx, t)
	id, _ := asynq.GetTaskID(ctx)
	w.mu.Lock()
	w.runs[id] = append(w.runs[id], err)
	w.mu.Unlock()
	return err
}

// results returns what the deliveries of id returned so far.
func (w *worker) results(id string) []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.runs[id]...)
}

// waitRuns waits until id was delivered to w at least n times and
// returns the results.
func (e *env) waitRuns(w *worker, id string, n int) []error {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("%s ran %s %d times", w.queue, id, n), func() bool { return len(w.results(id)) >= n })
	return w.results(id)
}

// blockAfter runs fn, closes reached, then waits for release before
// returning fn's result: meanwhile the guard's transaction stays open
// with whatever fn locked.
func blockAfter(fn jobs.Effect, reached, release chan struct{}) jobs.Effect {
	var once sync.Once
	return func(ctx context.Context, tx *gorm.DB, j jobs.Job) (string, error) {
		res, err := fn(ctx, tx, j)
		once.Do(func() { close(reached) })
		select {
		case <-release:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
		return res, err
	}
}

var errSMTPDown = errors.New("smtp: 421 service not available")

// fakeMailer records every Send; the first failFirst calls fail.
type fakeMailer struct {
	failFirst int

	mu    sync.Mutex
	tries []string // Message-IDs of every call
	sent  []string // Message-IDs of the accepted messages
}

func (s *fakeMailer) Send(_ context.Context, m mail.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries = append(s.tries, m.MessageID)
	if len(s.tries) <= s.failFirst {
		return errSMTPDown
	}
	s.sent = append(s.sent, m.MessageID)
	return nil
}

func (s *fakeMailer) calls() (tries, sent []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tries...), append([]string(nil), s.sent...)
}

// asynqLogger sends Asynq's own log lines to the test logger.
type asynqLogger struct{ log *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.log.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.log.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.log.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.log.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.log.Error(fmt.Sprint(args...)) }
