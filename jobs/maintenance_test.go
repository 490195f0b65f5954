package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The maintenance tasks read the wall clock (Maintenance.now is not
// settable from outside), so every row is placed well clear of "now":
// minutes or hours either side, never seconds.

// maintJobs reads every job_executions row, by id.
func maintJobs(t *testing.T, db *gorm.DB) []models.JobExecution {
	t.Helper()
	var rows []models.JobExecution
	if err := db.Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestMaintenanceSweepStuck: processing rows past their lease become
// failed with a reason and no lease, keeping attempts and fence (the next
// claim raises it); rows within their lease, succeeded and failed rows are
// untouched; a second sweep changes nothing.
func TestMaintenanceSweepStuck(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	m := jobs.NewMaintenance(db, orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}), testenv.Logger(t), time.Hour, metrics.New())
	now := time.Now().UTC().Truncate(time.Microsecond)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }

	rows := []models.JobExecution{
		{IdempotencyKey: "stuck-recent", Status: models.JobProcessing, Attempts: 1, Fence: 1, LockedUntil: at(-time.Minute)},
		{IdempotencyKey: "stuck-old", Status: models.JobProcessing, Attempts: 3, Fence: 4, LockedUntil: at(-2 * time.Hour)},
		{IdempotencyKey: "within-lease", Status: models.JobProcessing, Attempts: 2, Fence: 2, LockedUntil: at(time.Minute)},
		{IdempotencyKey: "succeeded", Status: models.JobSucceeded, Attempts: 1, Fence: 1, FinishedAt: at(-time.Hour), ResultHash: "abc"},
		// Never written by the guard; proves the sweep filters on status, not the lease alone.
		{IdempotencyKey: "succeeded-old-lease", Status: models.JobSucceeded, Attempts: 1, Fence: 1, LockedUntil: at(-time.Hour), FinishedAt: at(-time.Hour)},
		{IdempotencyKey: "failed", Status: models.JobFailed, Attempts: 2, Fence: 2, FinishedAt: at(-time.Hour), LastError: "smtp: 421"},
	}
	for i := range rows {
		r := &rows[i]
		r.QueueName, r.ExternalJobID, r.BusinessKey, r.WorkerID = "critical", r.IdempotencyKey, "ORD-X", "w1"
		r.StartedAt = now.Add(-3 * time.Hour)
	}
	if err := db.Create(&rows).Error; err != nil {
		t.Fatal(err)
	}
	before := maintJobs(t, db)

	if err := m.SweepStuck(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	after := maintJobs(t, db)
	for i, j := range after {
		want := before[i]
		if strings.HasPrefix(j.IdempotencyKey, "stuck-") {
			want.Status, want.LockedUntil, want.LastError, want.FinishedAt = models.JobFailed, nil, j.LastError, j.FinishedAt
			if !strings.Contains(j.LastError, "lease expired") {
				t.Errorf("%s: last_error %q, want the lease reason", j.IdempotencyKey, j.LastError)
			}
			if j.FinishedAt == nil {
				t.Errorf("%s: finished_at not set, as the guard sets it on a failure", j.IdempotencyKey)
			}
		}
		if !reflect.DeepEqual(j, want) {
			t.Errorf("after the sweep %s is\n%+v\nwant\n%+v", j.IdempotencyKey, j, want)
		}
	}

	if err := m.SweepStuck(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if again := maintJobs(t, db); !reflect.DeepEqual(again, after) {
		t.Errorf("a second sweep changed rows:\n%+v\nwas\n%+v", again, after)
	}
}

// maintOrders makes orders whose clock runs `ago` behind, so their
// expires_at (created + ttl) lands where a test needs it.
type maintOrders struct {
	t   *testing.T
	db  *gorm.DB
	pay *payments.Service
	n   int
}

// order creates an order of fresh products, one per qty, each stocked
// with stock units, created ago in the past with a one-hour ttl.
func (f *maintOrders) order(ago time.Duration, stock int64, qtys ...int64) (*models.Order, []string) {
	f.t.Helper()
	var items []orders.ItemRequest
	var skus []string
	for _, q := range qtys {
		f.n++
		sku := fmt.Sprintf("MAINT-%d", f.n)
		testenv.MustCreateProduct(f.t, f.db, sku, price, stock)
		items = append(items, orders.ItemRequest{SKU: sku, Qty: q})
		skus = append(skus, sku)
	}
	svc := orders.NewService(f.db, testenv.Logger(f.t), func() time.Time { return time.Now().Add(-ago) }, time.Hour, jobs.Tasks{})
	o, err := svc.Create(context.Background(), orders.CreateRequest{CustomerEmail: "buyer@example.com", Items: items})
	if err != nil {
		f.t.Fatal(err)
	}
	return o, skus
}

// payNow pays o with a signed sandbox callback, as a provider would.
func (f *maintOrders) payNow(o *models.Order) {
	f.t.Helper()
	body := testenv.SandboxBody(o.ID, "tx-"+o.ID, models.EventPaid, o.TotalAmount)
	out := f.pay.Receive(context.Background(), payments.Delivery{
		Provider: sandbox.Name, Header: testenv.SandboxHeaders("evt_"+o.ID, body, time.Now()),
		Body: bytes.NewReader(body), ContentType: "application/json",
	})
	if out.Status() != 200 || out.Result != models.ResultProcessed {
		f.t.Fatalf("paying %s: %+v", o.ID, out)
	}
}

func maintCount(t *testing.T, db *gorm.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestMaintenanceSweepExpired: a pending order more than Grace past
// expires_at is expired and each of its items released once (stock
// restored); a pending order still within Grace, one not yet due and a
// paid overdue one are left as they are; a second sweep releases nothing
// more. The stock invariants of the audit hold throughout.
func TestMaintenanceSweepExpired(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	t.Cleanup(pay.Close)
	f := &maintOrders{t: t, db: db, pay: pay}

	overdue, overdueSKUs := f.order(2*time.Hour, 5, 2, 1) // expired an hour ago, two items
	inGrace, inGraceSKUs := f.order(61*time.Minute, 1, 1) // expired a minute ago
	notDue, notDueSKUs := f.order(0, 1, 1)                // expires in an hour
	paidLate, paidSKUs := f.order(2*time.Hour, 1, 1)      // overdue, but paid
	f.payNow(paidLate)

	m := jobs.NewMaintenance(db, orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), log, time.Hour, metrics.New())
	m.Grace = 10 * time.Minute

	check := func(round string) {
		t.Helper()
		for _, c := range []struct {
			o      *models.Order
			skus   []string
			status models.OrderStatus
			stock  []int64
		}{
			{overdue, overdueSKUs, models.OrderExpired, []int64{5, 5}},
			{inGrace, inGraceSKUs, models.OrderPending, []int64{0}},
			{notDue, notDueSKUs, models.OrderPending, []int64{0}},
			{paidLate, paidSKUs, models.OrderPaid, []int64{0}},
		} {
			var status models.OrderStatus
			if err := db.Raw("SELECT status FROM orders WHERE id = ?", c.o.ID).Scan(&status).Error; err != nil {
				t.Fatal(err)
			}
			if status != c.status {
				t.Errorf("%s: order %s is %s, want %s", round, c.o.ID, status, c.status)
			}
			releases := int64(0)
			if c.status == models.OrderExpired {
				releases = 1
			}
			for i, sku := range c.skus {
				if n := maintCount(t, db, "SELECT count(*) FROM stock_movements WHERE order_id = ? AND sku = ? AND kind = 'release'", c.o.ID, sku); n != releases {
					t.Errorf("%s: order %s item %s has %d release movements, want %d", round, c.o.ID, sku, n, releases)
				}
				if s := maintCount(t, db, "SELECT stock FROM products WHERE sku = ?", sku); s != c.stock[i] {
					t.Errorf("%s: %s has stock %d, want %d", round, sku, s, c.stock[i])
				}
			}
		}
		rep, err := audit.WithoutJobs(db).Run(context.Background(), 0)
		if err != nil || !rep.OK {
			t.Errorf("%s: audit: %v %+v", round, err, rep.Violations)
		}
	}

	if err := m.SweepExpired(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	check("first sweep")
	if err := m.SweepExpired(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	check("second sweep")
}

// TestMaintenancePrune: rows older than PruneAfter go — non-applying
// callback deliveries, succeeded job rows, dispatched outbox rows,
// answered idempotency keys — while applying deliveries (processed,
// stale), failed and processing jobs, pending outbox rows, keys still
// locked without a response, and every newer row stay. Pruning again
// deletes nothing more.
func TestMaintenancePrune(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	m := jobs.NewMaintenance(db, orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}), testenv.Logger(t), 30*24*time.Hour, metrics.New())
	m.PruneAfter = 24 * time.Hour // the field wins over the constructor's argument
	now := time.Now().UTC().Truncate(time.Microsecond)
	old, recent := now.Add(-48*time.Hour), now.Add(-time.Hour)
	ptr := func(x time.Time) *time.Time { return &x }
	code := 201
	body := `{"id":"ORD-1"}`

	// Deliveries are told apart by request_id, the others by their key.
	var deliveries []models.CallbackDelivery
	for _, d := range []struct {
		id, outcome string
		at          time.Time
	}{
		{"old-processed", models.OutcomeProcessed, old},
		{"old-stale", models.OutcomeStale, old},
		{"old-duplicate", models.OutcomeDuplicate, old},
		{"old-conflict", models.OutcomeConflict, old},
		{"old-rejected", models.OutcomeRejected, old},
		{"old-invalid-signature", models.OutcomeInvalidSignature, old},
		{"recent-duplicate", models.OutcomeDuplicate, recent},
		{"recent-invalid-signature", models.OutcomeInvalidSignature, recent},
	} {
		deliveries = append(deliveries, models.CallbackDelivery{Provider: "sandbox", ReceivedAt: d.at, Outcome: d.outcome,
			ResponseCode: 200, DurationMS: 1, RequestID: d.id})
	}
	jobRow := func(key string, status models.JobStatus, started time.Time, finished, lockedUntil *time.Time) models.JobExecution {
		return models.JobExecution{IdempotencyKey: key, QueueName: "critical", ExternalJobID: key, BusinessKey: "ORD-X",
			Status: status, Attempts: 1, Fence: 1, WorkerID: "w1", StartedAt: started, FinishedAt: finished, LockedUntil: lockedUntil}
	}
	jobRows := []models.JobExecution{
		jobRow("old-succeeded", models.JobSucceeded, old, ptr(old), nil),
		jobRow("old-failed", models.JobFailed, old, ptr(old), nil),
		jobRow("old-processing", models.JobProcessing, old, nil, ptr(old)),
		jobRow("recent-succeeded", models.JobSucceeded, recent, ptr(recent), nil),
		jobRow("started-old-finished-recent", models.JobSucceeded, old, ptr(recent), nil),
	}
	outboxRow := func(id string, status models.OutboxStatus, created time.Time, dispatched *time.Time) models.OutboxMessage {
		return models.OutboxMessage{TaskType: jobs.TaskInvoiceGenerate, Payload: []byte(`{}`), TaskID: id, Queue: "critical",
			ProcessAt: created, Status: status, CreatedAt: created, DispatchedAt: dispatched}
	}
	outboxRows := []models.OutboxMessage{
		outboxRow("old-dispatched", models.OutboxDispatched, old, ptr(old)),
		outboxRow("old-pending", models.OutboxPending, old, nil),
		outboxRow("recent-dispatched", models.OutboxDispatched, recent, ptr(recent)),
		outboxRow("created-old-dispatched-recent", models.OutboxDispatched, old, ptr(recent)),
	}
	keys := []models.APIIdempotencyKey{
		{Scope: "orders.create", Key: "old-answered", RequestHash: "h", ResponseCode: &code, ResponseBody: &body, CreatedAt: old},
		{Scope: "orders.create", Key: "old-locked", RequestHash: "h", LockedAt: ptr(old), CreatedAt: old},
		{Scope: "orders.create", Key: "recent-answered", RequestHash: "h", ResponseCode: &code, ResponseBody: &body, CreatedAt: recent},
	}
	alertRow := func(id string, status models.AlertStatus, created time.Time) models.Alert {
		a := models.Alert{EventID: id, Type: "refund.failed", Payload: []byte(`{}`), Status: status, CreatedAt: created}
		if status == models.AlertSent {
			a.SentAt = &created
		}
		return a
	}
	alertRows := []models.Alert{
		alertRow("old-sent", models.AlertSent, old),
		alertRow("old-failed", models.AlertFailed, old),
		alertRow("old-pending", models.AlertPending, old), // still to be sent
		alertRow("recent-sent", models.AlertSent, recent),
	}
	for _, rows := range []any{&deliveries, &jobRows, &outboxRows, &keys, &alertRows} {
		if err := db.Create(rows).Error; err != nil {
			t.Fatal(err)
		}
	}

	names := func(query string) []string {
		t.Helper()
		var out []string
		if err := db.Raw(query).Scan(&out).Error; err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	want := map[string][]string{
		"SELECT request_id FROM callback_deliveries": {"old-processed", "old-stale", "recent-duplicate", "recent-invalid-signature"},
		"SELECT idempotency_key FROM job_executions": {"old-failed", "old-processing", "recent-succeeded", "started-old-finished-recent"},
		"SELECT task_id FROM outbox_messages":        {"created-old-dispatched-recent", "old-pending", "recent-dispatched"},
		"SELECT key FROM api_idempotency_keys":       {"old-locked", "recent-answered"},
		"SELECT event_id FROM alerts":                {"old-pending", "recent-sent"},
	}
	for round := 1; round <= 2; round++ {
		if err := m.Prune(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		for q, w := range want {
			if got := names(q); !slices.Equal(got, w) {
				t.Errorf("prune #%d: %s = %q, want %q", round, q, got, w)
			}
		}
	}
}

// TestMaintenancePruneStopsAtAFailure: a DELETE that fails ends the run
// before the next one starts. A trigger makes deleting callback
// deliveries (the first step) fail; the run returns that error and the
// old succeeded job, which the next step would delete, is still there
// for the retry to prune.
func TestMaintenancePruneStopsAtAFailure(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	m := jobs.NewMaintenance(db, orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}), testenv.Logger(t), 24*time.Hour, metrics.New())
	old := time.Now().UTC().Add(-48 * time.Hour)
	if err := db.Create(&models.CallbackDelivery{Provider: "sandbox", ReceivedAt: old, Outcome: models.OutcomeDuplicate,
		ResponseCode: 200, DurationMS: 1, RequestID: "old-duplicate"}).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Create(&models.JobExecution{IdempotencyKey: "old-succeeded", QueueName: "critical", ExternalJobID: "old-succeeded",
		BusinessKey: "ORD-X", Status: models.JobSucceeded, Attempts: 1, Fence: 1, WorkerID: "w1", StartedAt: old, FinishedAt: &old}).Error; err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'deletes refused'; END $$`,
		`CREATE TRIGGER refuse_delete BEFORE DELETE ON callback_deliveries FOR EACH ROW EXECUTE FUNCTION refuse_delete()`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}

	err := m.Prune(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "prune callback deliveries") || !strings.Contains(err.Error(), "deletes refused") {
		t.Fatalf("prune = %v, want the refused delete of callback deliveries", err)
	}
	var n int64
	if err := db.Model(&models.JobExecution{}).Where("idempotency_key = ?", "old-succeeded").Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Error("the old succeeded job was pruned after the step before it failed")
	}
}

// schedQueue is an enqueuer that counts what one scheduler got from Asynq.
type schedQueue struct {
	c *asynq.Client

	mu        sync.Mutex
	enqueued  []string
	conflicts int
}

func (q *schedQueue) EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	info, err := q.c.EnqueueContext(ctx, task, opts...)
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case err == nil:
		q.enqueued = append(q.enqueued, info.ID)
	case errors.Is(err, asynq.ErrTaskIDConflict):
		q.conflicts++
	}
	return info, err
}

// TestSchedulerConcurrentSchedulersEnqueueEachPeriodOnce: two schedulers
// of a one-second task, each with its own client on the same Redis, run
// side by side for 2.5 s. Each period's task reaches the maintenance
// queue once, under the id "<type>:<bucket>": the second scheduler to
// try a period is refused by its id (and counts that as done).
func TestSchedulerConcurrentSchedulersEnqueueEachPeriodOnce(t *testing.T) {
	t.Parallel()
	rs := testenv.StartRedis(t)
	rdb := rs.Client()
	const typ = "test:tick"
	schedule := []jobs.Spec{{Task: jobs.Kind{Type: typ, Queue: jobs.QueueMaintenance},
		MaxRetry: 3, Timeout: time.Second, Every: time.Second}}

	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	queues := []*schedQueue{{c: asynq.NewClientFromRedisClient(rs.Client())}, {c: asynq.NewClientFromRedisClient(rs.Client())}}
	var wg sync.WaitGroup
	for _, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := jobs.NewScheduler(q, testenv.Logger(t), schedule).Run(ctx); err != nil {
				t.Errorf("scheduler: %v", err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitClosed(t, "both schedulers stopped", done)

	insp := asynq.NewInspectorFromRedisClient(rdb)
	var ids []string
	for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
		insp.ListPendingTasks, insp.ListScheduledTasks, insp.ListActiveTasks,
		insp.ListRetryTasks, insp.ListArchivedTasks, insp.ListCompletedTasks,
	} {
		tasks, err := list(jobs.QueueMaintenance, asynq.PageSize(1000))
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range tasks {
			if ti.Type != typ {
				t.Errorf("task %s has type %s, want %s", ti.ID, ti.Type, typ)
			}
			ids = append(ids, ti.ID)
		}
	}
	slices.Sort(ids)
	if len(ids) < 2 || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatalf("maintenance queue holds %q; want at least two distinct periods, each once", ids)
	}
	for _, id := range ids {
		bucket, ok := strings.CutPrefix(id, typ+":")
		if _, err := strconv.ParseInt(bucket, 10, 64); !ok || err != nil {
			t.Errorf("task id %q is not %s:<bucket>", id, typ)
		}
	}

	// Every queued task was enqueued by exactly one of the two; the
	// other's attempt at that period was refused, not duplicated.
	var enqueued []string
	conflicts := 0
	for _, q := range queues {
		q.mu.Lock()
		enqueued = append(enqueued, q.enqueued...)
		conflicts += q.conflicts
		q.mu.Unlock()
	}
	slices.Sort(enqueued)
	if !slices.Equal(enqueued, ids) {
		t.Errorf("the schedulers enqueued %q, the queue holds %q", enqueued, ids)
	}
	if conflicts == 0 {
		t.Errorf("no enqueue was refused as a duplicate: the two schedulers never competed for a period")
	}
}

// TestMaintenanceAsksAboutUnknowns: the gateway:janitor task runs the
// configured janitor within its own deadline, less a margin, and hands
// its error (the database's: a gateway that cannot be asked is no error
// of the run) to Asynq; without a janitor it does nothing.
func TestMaintenanceAsksAboutUnknowns(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	m := jobs.NewMaintenance(db, orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}), testenv.Logger(t), time.Hour, metrics.New())
	task := asynq.NewTask(jobs.TaskJanitor, nil)
	if err := m.AskAboutUnknowns(context.Background(), task); err != nil {
		t.Fatalf("without a janitor: %v", err)
	}
	failure := errors.New("the database is unavailable")
	taskDeadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), taskDeadline)
	defer cancel()
	var runDeadline time.Time
	m.AskUnknown = func(ctx context.Context) (int, error) { runDeadline, _ = ctx.Deadline(); return 0, failure }
	if err := m.AskAboutUnknowns(ctx, task); !errors.Is(err, failure) || runDeadline.IsZero() || !runDeadline.Before(taskDeadline) {
		t.Errorf("the run: %v, its deadline %v, the task's %v; want its error, and its deadline first", err, runDeadline, taskDeadline)
	}
}

// TestMaintenancePollPayments: the payments:poll task runs the configured
// poll and hands its error (the database's: payments.Service.Poll
// returns none for a gateway) to Asynq, which retries it; without a poll
// (no gateway can be asked) it does nothing and succeeds. The poll's
// time ends before the task's, so that a slow gateway leaves it time to
// return rather than be failed by Asynq.
func TestMaintenancePollPayments(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	m := jobs.NewMaintenance(db, orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}), testenv.Logger(t), time.Hour, metrics.New())
	task := asynq.NewTask(jobs.TaskPollPayments, nil)
	if err := m.PollPayments(context.Background(), task); err != nil {
		t.Fatalf("without a poll: %v", err)
	}
	calls := 0
	failure := errors.New("acmepay: HTTP 503")
	m.Poll = func(context.Context) (int, error) { calls++; return 1, failure }
	if err := m.PollPayments(context.Background(), task); !errors.Is(err, failure) || calls != 1 {
		t.Errorf("with a failing poll: %v after %d calls, want its error after 1", err, calls)
	}
	if !slices.ContainsFunc(jobs.Periodic(), func(s jobs.Spec) bool { return s.Task.Type == jobs.TaskPollPayments }) {
		t.Error("payments:poll is not on the maintenance schedule")
	}
	taskDeadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), taskDeadline)
	defer cancel()
	var pollDeadline time.Time
	m.Poll = func(ctx context.Context) (int, error) { pollDeadline, _ = ctx.Deadline(); return 0, nil }
	if err := m.PollPayments(ctx, task); err != nil || pollDeadline.IsZero() || !pollDeadline.Before(taskDeadline) {
		t.Errorf("the poll's deadline %v, the task's %v (%v): want the poll's first", pollDeadline, taskDeadline, err)
	}
}

// The payments:poll task, scheduled as the scheduler does and run by an
// Asynq worker, asking a gateway whose API answers 404: the gateway is
// asked, the task succeeds on its first run — no retry, nothing archived
// — and alerts:watch raises no jobs.archived for it.
func TestPollOfAGatewayAnswering404IsNotArchived(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pendingOrder()
	gateway := gatewaytest.NewUnaskable(t)
	m := jobs.NewMaintenance(e.db, e.orders, e.log, time.Hour, metrics.New())
	m.Poll = func(ctx context.Context) (int, error) {
		return e.pay.Poll(ctx, []payments.StatusClient{gateway}, 2*time.Hour)
	}
	w := e.startWorker(jobs.QueueMaintenance, asynq.HandlerFunc(m.PollPayments)) // as the mux routes payments:poll

	i := slices.IndexFunc(jobs.Periodic(), func(s jobs.Spec) bool { return s.Task.Type == jobs.TaskPollPayments })
	ctx, stop := context.WithCancel(context.Background())
	scheduled := make(chan struct{})
	go func() {
		defer close(scheduled)
		jobs.NewScheduler(e.client, e.log, jobs.Periodic()[i:i+1]).Run(ctx)
	}()
	t.Cleanup(func() { stop(); <-scheduled })

	var done []*asynq.TaskInfo
	eventually(t, "the poll task completed or was archived", func() bool {
		completed, _ := e.insp.ListCompletedTasks(jobs.QueueMaintenance)
		archived, _ := e.insp.ListArchivedTasks(jobs.QueueMaintenance)
		done = append(completed, archived...)
		return len(done) > 0
	})
	for _, task := range done {
		if task.State != asynq.TaskStateCompleted || task.Retried != 0 || !slices.Equal(w.results(task.ID), []error{nil}) {
			t.Errorf("task %s: %s after %d retries, runs %v; want completed on its first run", task.ID, task.State, task.Retried, w.results(task.ID))
		}
	}
	if gateway.Asked() == 0 {
		t.Error("the gateway was not asked")
	}
	if retrying, _ := e.insp.ListRetryTasks(jobs.QueueMaintenance); len(retrying) > 0 {
		t.Errorf("%d poll tasks waiting to be retried", len(retrying))
	}
	if _, err := jobs.NewWatch(e.db, e.insp, e.log, time.Now).Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e.count("SELECT count(*) FROM alerts WHERE type = ?", alerts.JobsArchived); n != 0 {
		t.Errorf("%d jobs.archived alerts, want none", n)
	}
}

// Prune clears the bodies, their searchable copies and headers of
// deliveries older than KeepBodiesFor and keeps the rows (their outcomes are the audit trail);
// younger ones keep theirs. With KeepBodiesFor 0 (bodies no longer kept)
// every body left is cleared.
func TestMaintenancePruneForgetsOldBodies(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	m := jobs.NewMaintenance(db, orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}), testenv.Logger(t), 30*24*time.Hour, metrics.New())
	m.KeepBodiesFor = 24 * time.Hour
	now := time.Now().UTC()
	for i, age := range []time.Duration{48 * time.Hour, 25 * time.Hour, time.Hour} {
		d := models.CallbackDelivery{Provider: "sandbox", ReceivedAt: now.Add(-age), Outcome: models.OutcomeInvalidSignature,
			ResponseCode: 401, RequestID: fmt.Sprint("kept-", i), Headers: []byte(`{"Webhook-Id":["evt"]}`), Body: []byte(`{"a":1}`),
			BodyJSON: []byte(`{"a":1}`)}
		if err := db.Create(&d).Error; err != nil {
			t.Fatal(err)
		}
	}
	kept := func() (rows, bodies, headers int64) {
		t.Helper()
		var searchable int64
		db.Raw("SELECT count(*), count(body), count(headers), count(body_json) FROM callback_deliveries").Row().Scan(&rows, &bodies, &headers, &searchable)
		if searchable != bodies {
			t.Errorf("%d searchable bodies for %d bodies: they go together", searchable, bodies)
		}
		return
	}
	if err := m.Prune(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if rows, bodies, headers := kept(); rows != 3 || bodies != 1 || headers != 1 {
		t.Errorf("after a prune with a day's retention: %d rows, %d bodies, %d headers; want 3, 1, 1", rows, bodies, headers)
	}
	m.KeepBodiesFor = 0
	if err := m.Prune(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if rows, bodies, headers := kept(); rows != 3 || bodies != 0 || headers != 0 {
		t.Errorf("after a prune with bodies no longer kept: %d rows, %d bodies, %d headers; want 3, 0, 0", rows, bodies, headers)
	}
}
