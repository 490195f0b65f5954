package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The console's archive lists look only at the application's queues
// (jobs.QueueWeights), so the workers here serve "critical" and "default" and
// are named after them.

// errBroken is an effect failure that skips Asynq's retries: the task is
// archived at once and its job row is failed.
var errBroken = fmt.Errorf("effect broken: %w", asynq.SkipRetry)

// failFirst makes fn fail the first run of each task id with errBroken,
// and run normally after that.
func failFirst(fn jobs.Effect) jobs.Effect {
	var mu sync.Mutex
	failed := map[string]bool{}
	return func(ctx context.Context, tx *gorm.DB, j jobs.Job) (string, error) {
		mu.Lock()
		first := !failed[j.Key]
		failed[j.Key] = true
		mu.Unlock()
		if first {
			return "", errBroken
		}
		return fn(ctx, tx, j)
	}
}

// failFirstPrepare is failFirst for a Prepare step.
func failFirstPrepare(fn jobs.Prepare) jobs.Prepare {
	var mu sync.Mutex
	failed := map[string]bool{}
	return func(ctx context.Context, j jobs.Job) error {
		mu.Lock()
		first := !failed[j.Key]
		failed[j.Key] = true
		mu.Unlock()
		if first {
			return errBroken
		}
		return fn(ctx, j)
	}
}

// flakyWorker serves queue with the real guard and effects, except that
// each task's first run fails with errBroken.
func (e *env) flakyWorker(queue string) *worker {
	e.t.Helper()
	g := jobs.NewGuard(e.db, e.rdb, e.log, queue, 30*time.Second, metrics.New())
	mux := asynq.NewServeMux()
	mux.Handle(jobs.TaskInvoiceGenerate, g.Wrap(failFirst(jobs.InvoiceEffect(time.Now, metrics.New()))))
	email := jobs.NewEmail(e.db, e.mailer, "shop@example.com", time.Now, metrics.New())
	mux.Handle(jobs.TaskEmailSend, g.WrapPrepared(failFirstPrepare(email.Prepare), email.Effect))
	return e.startWorker(queue, mux)
}

func (e *env) console() *jobs.Console {
	return jobs.NewConsole(e.db, e.insp, e.client, retention, metrics.New())
}

// archive runs m once on w, whose first run of each task fails, and waits
// until the queue has archived it with a failed job row.
func (e *env) archive(w *worker, m models.OutboxMessage) {
	e.t.Helper()
	e.enqueue(m, w.queue)
	if err := e.waitRuns(w, m.TaskID, 1)[0]; !errors.Is(err, errBroken) {
		e.t.Fatalf("%s: first run returned %v, want %v", m.TaskID, err, errBroken)
	}
	e.waitState(w.queue, m.TaskID, asynq.TaskStateArchived)
	checkJob(e.t, e, m.TaskID, models.JobFailed, 1, 1, w.queue)
}

func checkOutcome(t *testing.T, what string, got jobview.RerunOutcome, err error, want jobview.RerunOutcome) {
	t.Helper()
	if err != nil || got != want {
		t.Fatalf("%s = %q, %v; want %q", what, got, err, want)
	}
}

// A re-run of a job that succeeded changes nothing: not the job row, not
// the invoice, not the queue, not the outbox.
func TestConsoleRerunSucceededJobChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	w := e.normalWorker(jobs.QueueCritical)
	orderID := e.paidOrder()
	key := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now()).TaskID
	if n, err := jobs.NewRelay(e.db, e.client, e.log, retention, "", metrics.New()).RelayOnce(context.Background()); n != 2 || err != nil {
		t.Fatalf("RelayOnce = %d, %v; want the invoice and the email", n, err)
	}
	e.waitState(w.queue, key, asynq.TaskStateCompleted)
	before := checkJob(t, e, key, models.JobSucceeded, 1, 1, w.queue)
	inv := checkOneInvoice(t, e, orderID)
	row := relayRow(t, e.db, key)
	queued := relayQueuedIDs(t, e.insp, jobs.QueueCritical, jobs.QueueDefault, jobs.QueueMaintenance)
	task, err := e.insp.GetTaskInfo(w.queue, key)
	if err != nil {
		t.Fatal(err)
	}

	outcome, err := c.Rerun(context.Background(), key)
	checkOutcome(t, "Rerun", outcome, err, jobview.RerunAlreadyDone)

	after := checkJob(t, e, key, models.JobSucceeded, 1, 1, w.queue)
	if !after.FinishedAt.Equal(*before.FinishedAt) || after.StartedAt != before.StartedAt || after.ResultHash != before.ResultHash {
		t.Errorf("job row changed: %+v, was %+v", after, before)
	}
	if got := checkOneInvoice(t, e, orderID); got.Number != inv.Number || !got.IssuedAt.Equal(inv.IssuedAt) {
		t.Errorf("invoice %s issued %v, was %s issued %v", got.Number, got.IssuedAt, inv.Number, inv.IssuedAt)
	}
	if got := relayRow(t, e.db, key); got.Status != row.Status || got.Attempts != row.Attempts ||
		!got.ProcessAt.Equal(row.ProcessAt) || !got.DispatchedAt.Equal(*row.DispatchedAt) {
		t.Errorf("outbox row changed: %+v, was %+v", got, row)
	}
	if got := relayQueuedIDs(t, e.insp, jobs.QueueCritical, jobs.QueueDefault, jobs.QueueMaintenance); !maps.Equal(got, queued) {
		t.Errorf("queued task ids %v, were %v", got, queued)
	}
	if got, err := e.insp.GetTaskInfo(w.queue, key); err != nil || got.State != asynq.TaskStateCompleted || !got.CompletedAt.Equal(task.CompletedAt) {
		t.Errorf("task %v (%v), was completed at %v", got, err, task.CompletedAt)
	}
	if n := len(w.results(key)); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
}

// A completed task means the guard saw the job succeed: with its row
// pruned, a re-run leaves it alone. A row that says otherwise (it should
// not happen) gets the task deleted and handed over again, and the guard
// finds the effect done.
func TestConsoleRerunCompletedTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	ctx := context.Background()
	relay := jobs.NewRelay(e.db, e.client, e.log, retention, "", metrics.New())
	w := e.normalWorker(jobs.QueueCritical)
	orderID := e.paidOrder()
	key := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now()).TaskID
	if n, err := relay.RelayOnce(ctx); n != 2 || err != nil {
		t.Fatalf("RelayOnce = %d, %v; want the invoice and the email", n, err)
	}
	e.waitState(w.queue, key, asynq.TaskStateCompleted)
	inv := checkOneInvoice(t, e, orderID)

	if err := e.db.Exec("UPDATE job_executions SET status = ? WHERE idempotency_key = ?", models.JobFailed, key).Error; err != nil {
		t.Fatal(err)
	}
	outcome, err := c.Rerun(ctx, key)
	checkOutcome(t, "Rerun with a failed row", outcome, err, jobview.RerunRedispatched)
	if state, err := c.TaskState(ctx, key); state != "" || err != nil {
		t.Errorf("TaskState after the re-run = %q, %v; want none: the completed task is deleted", state, err)
	}
	if n, err := relay.RelayOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RelayOnce after the re-run = %d, %v; want the invoice", n, err)
	}
	if err := e.waitRuns(w, key, 2)[1]; err != nil {
		t.Fatalf("second run: %v", err)
	}
	e.waitState(w.queue, key, asynq.TaskStateCompleted)
	checkJob(t, e, key, models.JobSucceeded, 2, 2, w.queue)
	if got := checkOneInvoice(t, e, orderID); got.Number != inv.Number {
		t.Errorf("invoice %s, was %s", got.Number, inv.Number)
	}

	if err := e.db.Where("idempotency_key = ?", key).Delete(&models.JobExecution{}).Error; err != nil {
		t.Fatal(err)
	}
	outcome, err = c.Rerun(ctx, key)
	checkOutcome(t, "Rerun with the row pruned", outcome, err, jobview.RerunAlreadyDone)
	if state, err := c.TaskState(ctx, key); state != "completed" || err != nil {
		t.Errorf("TaskState = %q, %v; want completed, untouched", state, err)
	}
	if row := relayRow(t, e.db, key); row.Status != models.OutboxDispatched {
		t.Errorf("outbox row %s, want dispatched, untouched", row.Status)
	}
}

// A job whose task the queue archived runs again through the guard: once,
// with the fence raised by one.
func TestConsoleRerunArchivedJobRunsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	ctx := context.Background()
	w := e.flakyWorker(jobs.QueueCritical)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	e.archive(w, m)

	if state, err := c.TaskState(ctx, m.TaskID); state != "archived" || err != nil {
		t.Errorf("TaskState = %q, %v; want archived", state, err)
	}
	if n, err := c.ArchivedCount(ctx); n != 1 || err != nil {
		t.Errorf("ArchivedCount = %d, %v; want 1", n, err)
	}
	tasks, err := c.Archived(ctx, jobview.Filter{Key: orderID})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("Archived = %+v, %v; want the invoice task", tasks, err)
	}
	if got := tasks[0]; got.ID != m.TaskID || got.Queue != w.queue || got.Type != m.TaskType || got.State != "archived" ||
		got.Payload != string(m.Payload) || !strings.Contains(got.LastError, errBroken.Error()) || got.LastFailedAt.IsZero() {
		t.Errorf("archived task %+v", got)
	}

	outcome, err := c.Rerun(ctx, m.TaskID)
	checkOutcome(t, "Rerun", outcome, err, jobview.RerunQueued)
	if err := e.waitRuns(w, m.TaskID, 2)[1]; err != nil {
		t.Fatalf("re-run: %v", err)
	}
	e.waitState(w.queue, m.TaskID, asynq.TaskStateCompleted)
	checkJob(t, e, m.TaskID, models.JobSucceeded, 2, 2, w.queue)
	checkOneInvoice(t, e, orderID)
	if n, err := c.ArchivedCount(ctx); n != 0 || err != nil {
		t.Errorf("ArchivedCount after the re-run = %d, %v; want 0", n, err)
	}
	outcome, err = c.Rerun(ctx, m.TaskID)
	checkOutcome(t, "second Rerun", outcome, err, jobview.RerunAlreadyDone)
}

// When Redis lost the task, a re-run goes back through the outbox: the
// row becomes pending again (or is rebuilt if it was pruned), the relay
// hands it over under the same id, and the effect happens once.
func TestConsoleRerunAfterRedisLostTheTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	ctx := context.Background()
	relay := jobs.NewRelay(e.db, e.client, e.log, retention, "", metrics.New())
	e.mailer.failFirst = 1
	// The retry would come in an hour: Redis loses it before.
	wd := e.normalWorker(jobs.QueueDefault, withRetryDelay(time.Hour))
	orderID := e.paidOrder()
	email := jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: orderID}, time.Now()).TaskID
	invoice := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now()).TaskID
	if n, err := relay.RelayOnce(ctx); n != 2 || err != nil {
		t.Fatalf("RelayOnce = %d, %v; want the invoice and the email", n, err)
	}
	if err := e.waitRuns(wd, email, 1)[0]; !errors.Is(err, errSMTPDown) {
		t.Fatalf("first run: %v, want %v", err, errSMTPDown)
	}
	e.waitState(wd.queue, email, asynq.TaskStateRetry)
	checkJob(t, e, email, models.JobFailed, 1, 1, wd.queue)

	if err := e.rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The invoice's outbox row is gone too, as after a prune.
	if err := e.db.Where("task_id = ?", invoice).Delete(&models.OutboxMessage{}).Error; err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{email, invoice} {
		if state, err := c.TaskState(ctx, key); state != "" || err != nil {
			t.Errorf("TaskState(%s) after the flush = %q, %v; want none", key, state, err)
		}
		outcome, err := c.Rerun(ctx, key)
		checkOutcome(t, "Rerun "+key, outcome, err, jobview.RerunRedispatched)
		if row := relayRow(t, e.db, key); row.Status != models.OutboxPending || row.ProcessAt.After(time.Now()) || row.Queue != wantQueue(key) {
			t.Errorf("outbox row %s: status %s, process_at %v, queue %s; want pending, due, %s",
				key, row.Status, row.ProcessAt, row.Queue, wantQueue(key))
		}
	}
	for _, key := range []string{"invoice:generate:ORD-01JNOSUCHORDER0000000000", "email:send:welcome:" + orderID, "sweep:stuck:1", "nonsense"} {
		if _, err := c.Rerun(ctx, key); models.ErrorCode(err) != models.ENotFound {
			t.Errorf("Rerun(%s) = %v, want a not_found error", key, err)
		}
	}
	if n := e.count("SELECT count(*) FROM outbox_messages"); n != 3 {
		t.Errorf("%d outbox rows, want 3: the order's expiry, its email and its rebuilt invoice", n)
	}

	if n, err := relay.RelayOnce(ctx); n != 2 || err != nil {
		t.Fatalf("RelayOnce after the re-runs = %d, %v; want both rows", n, err)
	}
	wc := e.normalWorker(jobs.QueueCritical)
	if err := e.waitRuns(wd, email, 2)[1]; err != nil {
		t.Fatalf("re-run of the email: %v", err)
	}
	if err := e.waitRuns(wc, invoice, 1)[0]; err != nil {
		t.Fatalf("re-run of the invoice: %v", err)
	}
	checkJob(t, e, email, models.JobSucceeded, 2, 2, wd.queue)
	checkJob(t, e, invoice, models.JobSucceeded, 1, 1, wc.queue)
	checkOneEmail(t, e, orderID)
	checkOneInvoice(t, e, orderID)
}

func wantQueue(key string) string {
	if strings.HasPrefix(key, jobs.TaskInvoiceGenerate) {
		return jobs.QueueCritical
	}
	return jobs.QueueDefault
}

// "Re-run every failed job" of one type re-runs exactly the failed and
// archived jobs of that type; another type's failed job is left alone.
func TestConsoleRerunAllOfAType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	ctx := context.Background()
	wc := e.flakyWorker(jobs.QueueCritical)
	wd := e.flakyWorker(jobs.QueueDefault)
	var orders, invoices []string
	for range 3 {
		id := e.paidOrder()
		m := jobs.Row(jobs.InvoiceArgs{OrderID: id}, time.Now())
		e.archive(wc, m)
		orders, invoices = append(orders, id), append(invoices, m.TaskID)
	}
	email := jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: orders[0]}, time.Now())
	e.archive(wd, email)
	invoiceOnly := jobview.Filter{Type: jobs.TaskInvoiceGenerate}

	if n, err := c.ArchivedCount(ctx); n != 4 || err != nil {
		t.Errorf("ArchivedCount = %d, %v; want 4", n, err)
	}
	tasks, err := c.Archived(ctx, invoiceOnly)
	if err != nil || len(tasks) != 3 {
		t.Fatalf("Archived(invoices) = %d tasks, %v; want 3", len(tasks), err)
	}
	for i, task := range tasks {
		if task.Type != jobs.TaskInvoiceGenerate || (i > 0 && task.LastFailedAt.After(tasks[i-1].LastFailedAt)) {
			t.Errorf("archived task %d: %s failed at %v; want invoices, newest failure first", i, task.ID, task.LastFailedAt)
		}
	}
	for _, tt := range []struct {
		f    jobview.Filter
		want []string
	}{
		{invoiceOnly, invoices},
		{jobview.Filter{Type: jobs.TaskInvoiceGenerate, Key: orders[1]}, invoices[1:2]},
		{jobview.Filter{Key: orders[0]}, []string{invoices[0], email.TaskID}},
		{jobview.Filter{Status: string(models.JobSucceeded), Before: 1}, append([]string{email.TaskID}, invoices...)}, // both ignored
	} {
		keys, err := c.Rerunnable(ctx, tt.f)
		slices.Sort(keys)
		if err != nil || !slices.Equal(keys, slices.Sorted(slices.Values(tt.want))) {
			t.Errorf("Rerunnable(%+v) = %v, %v; want %v", tt.f, keys, err, tt.want)
		}
	}

	counts, err := c.RerunAll(ctx, invoiceOnly)
	if err != nil || !maps.Equal(counts, map[jobview.RerunOutcome]int{jobview.RerunQueued: 3}) {
		t.Fatalf("RerunAll = %v, %v; want 3 queued", counts, err)
	}
	for _, key := range invoices {
		if err := e.waitRuns(wc, key, 2)[1]; err != nil {
			t.Errorf("re-run of %s: %v", key, err)
		}
		e.waitState(wc.queue, key, asynq.TaskStateCompleted)
		checkJob(t, e, key, models.JobSucceeded, 2, 2, wc.queue)
	}
	if n := e.count("SELECT count(*) FROM invoices"); n != 3 {
		t.Errorf("%d invoices, want 3", n)
	}
	checkJob(t, e, email.TaskID, models.JobFailed, 1, 1, wd.queue)
	e.waitState(wd.queue, email.TaskID, asynq.TaskStateArchived)
	if n := len(wd.results(email.TaskID)); n != 1 {
		t.Errorf("the email ran %d times, want once", n)
	}
	if tries, _ := e.mailer.calls(); len(tries) != 0 {
		t.Errorf("%d emails sent, want none", len(tries))
	}
	if counts, err := c.RerunAll(ctx, invoiceOnly); err != nil || len(counts) != 0 {
		t.Errorf("RerunAll once they succeeded = %v, %v; want nothing to do", counts, err)
	}
}

// "Dispatch now" hands an outbox row to the queue under its task id and
// keeps its time; a second one finds the task queued; a queue error
// changes nothing.
func TestConsoleDispatchNow(t *testing.T) {
	t.Parallel()
	env := relayNewEnv(t)
	c := jobs.NewConsole(env.db, env.insp, env.client, retention, metrics.New())
	ctx := context.Background()
	due := jobs.Row(jobs.InvoiceArgs{OrderID: "ORD-dispatch-now"}, time.Now())
	later := jobs.Row(jobs.ExpireArgs{OrderID: "ORD-dispatch-later"}, time.Now().Add(time.Hour))
	relayAdd(t, env.db, due, later)

	id := relayRow(t, env.db, due.TaskID).ID
	if got, err := c.DispatchNow(ctx, id); got != jobview.DispatchDone || err != nil {
		t.Fatalf("DispatchNow = %q, %v; want %q", got, err, jobview.DispatchDone)
	}
	if info, err := env.insp.GetTaskInfo(due.Queue, due.TaskID); err != nil || info.State != asynq.TaskStatePending {
		t.Errorf("queued task: %+v, %v; want pending", info, err)
	}
	if row := relayRow(t, env.db, due.TaskID); row.Status != models.OutboxDispatched || row.Attempts != 1 || row.DispatchedAt == nil {
		t.Errorf("row: status %s, attempts %d, dispatched_at %v; want dispatched once", row.Status, row.Attempts, row.DispatchedAt)
	}
	if got, err := c.DispatchNow(ctx, id); got != jobview.DispatchAlreadyQueued || err != nil {
		t.Fatalf("second DispatchNow = %q, %v; want %q", got, err, jobview.DispatchAlreadyQueued)
	}
	if row := relayRow(t, env.db, due.TaskID); row.Status != models.OutboxDispatched || row.Attempts != 2 {
		t.Errorf("row: status %s, attempts %d; want dispatched, 2", row.Status, row.Attempts)
	}

	// A row that is not due yet stays in PostgreSQL until its time: the
	// relay hands it over then.
	laterRow := relayRow(t, env.db, later.TaskID)
	if _, err := c.DispatchNow(ctx, laterRow.ID); models.ErrorCode(err) != models.EInvalidTransition {
		t.Fatalf("DispatchNow(expiry not due) = %v, want invalid_transition", err)
	}
	if row := relayRow(t, env.db, later.TaskID); row.Status != models.OutboxPending || row.Attempts != 0 {
		t.Errorf("not-due row: status %s, attempts %d; want untouched", row.Status, row.Attempts)
	}
	// A task the queue holds for its time is in flight: a re-run does not
	// run it before (expiring an order early).
	if _, err := env.client.Enqueue(jobs.NewTask(later, retention)); err != nil {
		t.Fatal(err)
	}
	outcome, err := c.Rerun(ctx, later.TaskID)
	checkOutcome(t, "Rerun(scheduled expiry)", outcome, err, jobview.RerunInFlight)
	if state, err := c.TaskState(ctx, later.TaskID); state != "scheduled" || err != nil {
		t.Errorf("TaskState after the re-run = %q, %v; want scheduled", state, err)
	}

	if _, err := c.DispatchNow(ctx, id+1000); models.ErrorCode(err) != models.ENotFound {
		t.Errorf("DispatchNow of no row = %v, want not_found", err)
	}

	down := jobs.Row(jobs.InvoiceArgs{OrderID: "ORD-dispatch-down"}, time.Now())
	relayAdd(t, env.db, down)
	env.redis.Stop()
	_, err = c.DispatchNow(ctx, relayRow(t, env.db, down.TaskID).ID)
	if err == nil || models.ErrorCode(err) == models.ENotFound {
		t.Fatalf("DispatchNow with Redis down = %v, want the queue's error", err)
	}
	t.Logf("DispatchNow with Redis down: %v", err)
	if row := relayRow(t, env.db, down.TaskID); row.Status != models.OutboxPending || row.Attempts != 0 || row.LastError != "" {
		t.Errorf("row after a queue error: status %s, attempts %d, last_error %q; want untouched", row.Status, row.Attempts, row.LastError)
	}
}

// List filters by status (stuck included), type and key (a prefix of the
// idempotency key, LIKE's wildcards taken literally, or the business key)
// and pages newest first.
func TestConsoleList(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	c := jobs.NewConsole(db, nil, nil, retention, metrics.New())
	ctx := context.Background()
	now := time.Now().UTC()
	live, past := now.Add(time.Hour), now.Add(-time.Minute)
	rows := []struct {
		key, business string
		status        models.JobStatus
		lockedUntil   *time.Time
	}{
		{"invoice:generate:ORD-A", "ORD-A", models.JobSucceeded, nil},
		{"email:send:order_paid:ORD-A", "ORD-A", models.JobFailed, nil},
		{"invoice:generate:ORD-B", "ORD-B", models.JobProcessing, &live},
		{"order:expire:ORD-C", "ORD-C", models.JobProcessing, &past},
		{"invoice:generate:ORD-C", "ORD-C", models.JobFailed, nil},
		{"invoice:generate:ORD_1", "ORD_1", models.JobSucceeded, nil},
		{"invoice:generate:ORDX1", "ORDX1", models.JobSucceeded, nil},
	}
	ids := map[int64]string{}
	for _, r := range rows {
		j := models.JobExecution{IdempotencyKey: r.key, QueueName: "critical", ExternalJobID: r.key, BusinessKey: r.business,
			Status: r.status, Attempts: 1, Fence: 1, WorkerID: "w1", LockedUntil: r.lockedUntil, StartedAt: now}
		if err := db.Create(&j).Error; err != nil {
			t.Fatal(err)
		}
		ids[j.ID] = r.key
	}
	keys := func(js []models.JobExecution) []string {
		var ks []string
		for _, j := range js {
			ks = append(ks, j.IdempotencyKey)
		}
		return ks
	}
	newestFirst := func(idx ...int) []string {
		var ks []string
		for _, i := range slices.Backward(idx) {
			ks = append(ks, rows[i].key)
		}
		return ks
	}

	for _, tt := range []struct {
		f    jobview.Filter
		want []string
	}{
		{jobview.Filter{}, newestFirst(0, 1, 2, 3, 4, 5, 6)},
		{jobview.Filter{Status: string(models.JobProcessing)}, newestFirst(2, 3)},
		{jobview.Filter{Status: jobview.Stuck}, newestFirst(3)},
		{jobview.Filter{Status: string(models.JobFailed)}, newestFirst(1, 4)},
		{jobview.Filter{Status: string(models.JobSucceeded)}, newestFirst(0, 5, 6)},
		{jobview.Filter{Type: jobs.TaskInvoiceGenerate}, newestFirst(0, 2, 4, 5, 6)},
		{jobview.Filter{Type: jobs.TaskInvoiceGenerate, Status: string(models.JobFailed)}, newestFirst(4)},
		{jobview.Filter{Type: "invoice:gen"}, nil}, // a type is whole
		{jobview.Filter{Key: "email:"}, newestFirst(1)},
		{jobview.Filter{Key: "ORD-A"}, newestFirst(0, 1)},
		{jobview.Filter{Key: "ORD-C", Status: jobview.Stuck}, newestFirst(3)},
		{jobview.Filter{Key: "invoice:generate:ORD_"}, newestFirst(5)},
		{jobview.Filter{Key: "invoice:generate:ORD%"}, nil},
	} {
		got, next, err := c.List(ctx, tt.f)
		if err != nil || next != 0 || !slices.Equal(keys(got), tt.want) {
			t.Errorf("List(%+v) = %v, next %d, %v; want %v, 0", tt.f, keys(got), next, err, tt.want)
		}
	}
	if _, _, err := c.List(ctx, jobview.Filter{Status: "done"}); models.ErrorCode(err) != models.EInvalid {
		t.Errorf("List with an unknown status = %v, want invalid_request", err)
	}

	var paged []string
	var pages [][]string
	f := jobview.Filter{Limit: 2}
	for range len(rows) { // a bound: each page holds at least one row
		got, next, err := c.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, keys(got))
		paged = append(paged, keys(got)...)
		if next == 0 {
			break
		}
		if ids[next] != got[len(got)-1].IdempotencyKey {
			t.Errorf("next = %d, want the id of the page's last row %s", next, got[len(got)-1].IdempotencyKey)
		}
		f.Before = next
	}
	if !slices.Equal(paged, newestFirst(0, 1, 2, 3, 4, 5, 6)) || len(pages) != 4 || len(pages[3]) != 1 {
		t.Errorf("pages of 2: %v; want every row once, newest first, the last page with one row and next 0", pages)
	}
}

// Ten re-runs of the same archived job at the same moment make its effect
// happen once: Asynq moves the archived task to pending once, and the
// guard turns any further delivery into a duplicate.
func TestConsoleConcurrentRerunRunsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	w := e.flakyWorker(jobs.QueueCritical)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	e.archive(w, m)

	const n = 10
	var mu sync.Mutex
	outcomes := map[jobview.RerunOutcome]int{}
	var errs []error
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			outcome, err := c.Rerun(context.Background(), m.TaskID)
			mu.Lock()
			defer mu.Unlock()
			outcomes[outcome]++
			errs = append(errs, err)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()

	t.Logf("outcomes: %v", outcomes)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	queued := outcomes[jobview.RerunQueued]
	if queued < 1 || queued+outcomes[jobview.RerunInFlight]+outcomes[jobview.RerunAlreadyDone] != n {
		t.Fatalf("outcomes %v; want at least one queued, the rest in flight or already done", outcomes)
	}
	// The first run failed; then one delivery per re-run that queued it.
	results := e.waitRuns(w, m.TaskID, 1+queued)
	e.waitState(w.queue, m.TaskID, asynq.TaskStateCompleted)
	for i, err := range results[1:] {
		if err != nil {
			t.Errorf("delivery %d after the re-runs: %v", i+1, err)
		}
	}
	checkJob(t, e, m.TaskID, models.JobSucceeded, 2, 2, w.queue)
	checkOneInvoice(t, e, orderID)
}
