package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// checkJob compares the job row of key with what a test expects.
func checkJob(t *testing.T, e *env, key string, status models.JobStatus, attempts int, fence int64, workerID string) models.JobExecution {
	t.Helper()
	j := e.job(key)
	if j.Status != status || j.Attempts != attempts || j.Fence != fence || j.WorkerID != workerID {
		t.Errorf("job %s: status %s, attempts %d, fence %d, worker %s; want %s, %d, %d, %s (last_error %q)",
			key, j.Status, j.Attempts, j.Fence, j.WorkerID, status, attempts, fence, workerID, j.LastError)
	}
	if status == models.JobSucceeded && (j.LastError != "" || j.LockedUntil != nil || j.FinishedAt == nil || j.ResultHash == "") {
		t.Errorf("succeeded job %s: last_error %q, locked_until %v, finished_at %v, result_hash %q",
			key, j.LastError, j.LockedUntil, j.FinishedAt, j.ResultHash)
	}
	return j
}

func checkOneInvoice(t *testing.T, e *env, orderID string) models.Invoice {
	t.Helper()
	if n := e.count("SELECT count(*) FROM invoices"); n != 1 {
		t.Fatalf("%d invoices, want 1", n)
	}
	var inv models.Invoice
	if err := e.db.Take(&inv, "order_id = ?", orderID).Error; err != nil {
		t.Fatalf("invoice of %s: %v", orderID, err)
	}
	if inv.Sequence != 1 || inv.Amount != price {
		t.Errorf("invoice %s: sequence %d, amount %d; want 1, %d", inv.Number, inv.Sequence, inv.Amount, price)
	}
	if last := e.count("SELECT coalesce(sum(last), 0) FROM invoice_counters"); last != 1 {
		t.Errorf("invoice counters add up to %d numbers taken, want 1", last)
	}
	return inv
}

func checkOneEmail(t *testing.T, e *env, orderID string) {
	t.Helper()
	want := mail.MessageID(mail.Key(mail.OrderPaid, orderID))
	tries, sent := e.mailer.calls()
	if len(sent) != 1 || sent[0] != want {
		t.Errorf("sent %q, want exactly [%s]", sent, want)
	}
	var em models.OutboundEmail
	if err := e.db.Take(&em, "key = ?", mail.Key(mail.OrderPaid, orderID)).Error; err != nil {
		t.Fatalf("outbound email: %v", err)
	}
	// attempts counts the tries at the SMTP server, failed ones too.
	// A mail server took it: not the log's (mail.LogMailer) email.
	if em.Status != models.EmailSent || em.Attempts != len(tries) || em.MessageID != want || em.Logged {
		t.Errorf("outbound email: status %s, attempts %d, message id %s, logged %v; want sent, %d, %s, not logged",
			em.Status, em.Attempts, em.MessageID, em.Logged, len(tries), want)
	}
}

// The same task delivered again after it succeeded is acked (nil) without
// a second claim or effect: attempts and fence stay 1.
func TestDeliveredTwiceInARow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		task  func(e *env) (models.OutboxMessage, string)
		check func(t *testing.T, e *env, orderID string)
	}{
		{
			name: "invoice",
			task: func(e *env) (models.OutboxMessage, string) {
				id := e.paidOrder()
				return jobs.Row(jobs.InvoiceArgs{OrderID: id}, time.Now()), id
			},
			check: func(t *testing.T, e *env, orderID string) { checkOneInvoice(t, e, orderID) },
		},
		{
			name: "email",
			task: func(e *env) (models.OutboxMessage, string) {
				id := e.paidOrder()
				return jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: id}, time.Now()), id
			},
			check: checkOneEmail,
		},
		{
			name: "expire",
			task: func(e *env) (models.OutboxMessage, string) {
				o := e.pendingOrder()
				return jobs.Row(jobs.ExpireArgs{OrderID: o.ID}, time.Now()), o.ID // due now
			},
			check: func(t *testing.T, e *env, orderID string) {
				var o models.Order
				e.db.Take(&o, "id = ?", orderID)
				released := e.count("SELECT count(*) FROM stock_movements WHERE order_id = ? AND kind = ?", orderID, models.MovementRelease)
				stock := e.count("SELECT p.stock FROM products p JOIN order_items i ON i.sku = p.sku WHERE i.order_id = ?", orderID)
				if o.Status != models.OrderExpired || released != 1 || stock != 1 {
					t.Errorf("order %s, %d release movements, stock %d; want expired, 1, 1", o.Status, released, stock)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			w := e.normalWorker("w1")
			m, orderID := tt.task(e)

			e.enqueue(m, w.queue)
			if err := e.waitRuns(w, m.TaskID, 1)[0]; err != nil {
				t.Fatalf("first delivery: %v", err)
			}
			e.waitState(w.queue, m.TaskID, asynq.TaskStateCompleted)
			checkJob(t, e, m.TaskID, models.JobSucceeded, 1, 1, "w1")

			// Asynq's first filter: the retained id refuses a re-enqueue.
			if _, err := e.client.Enqueue(jobs.NewTask(m, retention), asynq.Queue(w.queue)); !errors.Is(err, asynq.ErrTaskIDConflict) {
				t.Fatalf("re-enqueue: %v, want ErrTaskIDConflict", err)
			}
			// The guard is the real one: run the completed task again.
			if err := e.insp.RunTask(w.queue, m.TaskID); err != nil {
				t.Fatal(err)
			}
			if err := e.waitRuns(w, m.TaskID, 2)[1]; err != nil {
				t.Fatalf("second delivery: %v, want nil (duplicate_ignored)", err)
			}
			e.waitState(w.queue, m.TaskID, asynq.TaskStateCompleted)
			checkJob(t, e, m.TaskID, models.JobSucceeded, 1, 1, "w1")
			tt.check(t, e, orderID)
		})
	}
}

// Two workers get the invoice and the email task at the same instant:
// one runs each job, the other is turned away by the lock (or finds the
// job done), and every later delivery is a duplicate.
func TestDeliveredTwiceAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const deliveries = 4 // two tasks, each to both workers
	arrived := make(chan struct{}, deliveries)
	start := make(chan struct{})
	var once sync.Once
	hold := func() {
		select {
		case arrived <- struct{}{}:
		default: // a retry, after the start
		}
		<-start
	}
	w1 := e.normalWorker("w1", withHold(hold), retryWhileLocked())
	w2 := e.normalWorker("w2", withHold(hold), retryWhileLocked())
	t.Cleanup(func() { once.Do(func() { close(start) }) }) // before the workers shut down
	orderID := e.paidOrder()
	tasks := []models.OutboxMessage{
		jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now()),
		jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: orderID}, time.Now()),
	}
	for _, m := range tasks {
		e.enqueue(m, w1.queue)
		e.enqueue(m, w2.queue)
	}
	timeout := time.After(testenv.Budget(t))
	for range deliveries {
		select {
		case <-arrived:
		case <-timeout:
			t.Fatal("timed out waiting until every delivery reached its handler")
		}
	}
	once.Do(func() { close(start) })

	for _, m := range tasks {
		first := []error{e.waitRuns(w1, m.TaskID, 1)[0], e.waitRuns(w2, m.TaskID, 1)[0]}
		for i, err := range first {
			if err != nil && !errors.Is(err, jobs.ErrLockBusy) {
				t.Errorf("%s: worker %d's first run returned %v, want nil or ErrLockBusy", m.TaskID, i+1, err)
			}
		}
		if first[0] != nil && first[1] != nil {
			t.Errorf("%s: neither worker ran the job: %v", m.TaskID, first)
		}
		// A loser turned away by the lock is retried by Asynq and acked.
		e.waitState(w1.queue, m.TaskID, asynq.TaskStateCompleted)
		e.waitState(w2.queue, m.TaskID, asynq.TaskStateCompleted)
		j := e.job(m.TaskID)
		checkJob(t, e, m.TaskID, models.JobSucceeded, 1, 1, j.WorkerID)

		// A later delivery is a duplicate too.
		n := len(w1.results(m.TaskID))
		if err := e.insp.RunTask(w1.queue, m.TaskID); err != nil {
			t.Fatal(err)
		}
		if err := e.waitRuns(w1, m.TaskID, n+1)[n]; err != nil {
			t.Errorf("%s: later delivery returned %v, want nil (duplicate_ignored)", m.TaskID, err)
		}
		e.waitState(w1.queue, m.TaskID, asynq.TaskStateCompleted)
		checkJob(t, e, m.TaskID, models.JobSucceeded, 1, 1, j.WorkerID)
	}
	checkOneInvoice(t, e, orderID)
	checkOneEmail(t, e, orderID)
}

// A failed run is recorded (failed, last_error) and rolled back; the retry
// claims the job anew (attempts 2, fence 2) and sends the email once.
func TestFailedRunIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mailer.failFirst = 1
	// The retry is started by hand, so the failed row can be looked at first.
	w := e.normalWorker("w1", withRetryDelay(time.Hour))
	orderID := e.paidOrder()
	m := jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: orderID}, time.Now())

	e.enqueue(m, w.queue)
	if err := e.waitRuns(w, m.TaskID, 1)[0]; !errors.Is(err, errSMTPDown) {
		t.Fatalf("first run: %v, want %v", err, errSMTPDown)
	}
	j := checkJob(t, e, m.TaskID, models.JobFailed, 1, 1, "w1")
	if !strings.Contains(j.LastError, errSMTPDown.Error()) || j.LockedUntil != nil || j.FinishedAt == nil {
		t.Errorf("failed job: last_error %q, locked_until %v, finished_at %v", j.LastError, j.LockedUntil, j.FinishedAt)
	}
	// The intent to send exists (it is written outside the transaction,
	// so that the send holds no lock); it is not sent, and says why.
	var em models.OutboundEmail
	if err := e.db.Take(&em, "key = ?", mail.Key(mail.OrderPaid, orderID)).Error; err != nil ||
		em.Status != models.EmailPending || em.Attempts != 1 || !strings.Contains(em.LastError, errSMTPDown.Error()) {
		t.Errorf("outbound email after the failed run: %+v, %v; want pending, 1 attempt, the error", em, err)
	}

	e.waitState(w.queue, m.TaskID, asynq.TaskStateRetry)
	if err := e.insp.RunTask(w.queue, m.TaskID); err != nil {
		t.Fatal(err)
	}
	if err := e.waitRuns(w, m.TaskID, 2)[1]; err != nil {
		t.Fatalf("retry: %v", err)
	}
	checkJob(t, e, m.TaskID, models.JobSucceeded, 2, 2, "w1")
	checkOneEmail(t, e, orderID)
	if tries, _ := e.mailer.calls(); len(tries) != 2 || tries[0] != tries[1] {
		t.Errorf("send attempts %q, want two with the same Message-ID", tries)
	}
}

// startStale starts w1, whose guard's lock expires while its effect (fn,
// then a wait for release) runs, and waits until the lock is gone. It
// returns w1 and a function that releases the effect.
func startStale(t *testing.T, e *env, m models.OutboxMessage, fn jobs.Effect) (*worker, func()) {
	t.Helper()
	g1 := jobs.NewGuard(e.db, e.rdb, e.log, "w1", 300*time.Millisecond, metrics.New())
	g1.RefreshEvery = time.Hour // never refreshed: the lock expires mid-job
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	mux := asynq.NewServeMux()
	mux.Handle(m.TaskType, g1.Wrap(blockAfter(fn, reached, release)))
	w1 := e.startWorker("w1", mux)
	t.Cleanup(unblock) // before w1 shuts down

	e.enqueue(m, w1.queue)
	waitClosed(t, "w1's effect ran", reached)
	eventually(t, "w1's lock expired", func() bool { return !e.lockHeld(m.TaskID) })
	// The lease on the row was set by the claim, a moment after the lock:
	// it runs out a moment later too. Until then a new claimant is told
	// the job is busy.
	eventually(t, "w1's lease ran out", func() bool {
		var passed bool
		e.db.Raw("SELECT locked_until < now() FROM job_executions WHERE idempotency_key = ?", m.TaskID).Scan(&passed)
		return passed
	})
	return w1, unblock
}

// A worker whose lock expired mid-job loses to the worker that claimed
// after it: its commit is fenced off and rolled back, the newer claimant's
// effect is the one that stays.
func TestExpiredLockIsFencedOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	// w1 dates its invoice in 2030, so the surviving invoice shows whose
	// transaction committed.
	stale := jobs.InvoiceEffect(func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }, metrics.New())
	w1, unblock := startStale(t, e, m, stale) // w1 now holds the order row in its open transaction
	w2 := e.normalWorker("w2")

	e.enqueue(m, w2.queue)
	// w2's claim commits on its own; its effect then waits for the order
	// row until w1's transaction ends, so w1 is released only after that.
	eventually(t, "w2 claimed the job", func() bool { return e.fence(m.TaskID) == 2 })
	unblock()

	if err := e.waitRuns(w1, m.TaskID, 1)[0]; !errors.Is(err, jobs.ErrFenced) {
		t.Fatalf("w1: %v, want ErrFenced", err)
	}
	if err := e.waitRuns(w2, m.TaskID, 1)[0]; err != nil {
		t.Fatalf("w2: %v", err)
	}
	// w1's retry finds the job done.
	e.waitState(w1.queue, m.TaskID, asynq.TaskStateCompleted)
	e.waitState(w2.queue, m.TaskID, asynq.TaskStateCompleted)

	inv := checkOneInvoice(t, e, orderID)
	if inv.Year == 2030 {
		t.Errorf("the invoice is w1's (%s): its fenced transaction committed", inv.Number)
	}
	if n := e.count("SELECT count(*) FROM invoice_counters WHERE year = 2030"); n != 0 {
		t.Errorf("w1's invoice counter survived its rollback")
	}
	checkJob(t, e, m.TaskID, models.JobSucceeded, 2, 2, "w2")
}

var errProvider = errors.New("upstream timed out")

// A stale worker whose effect fails after a newer claimant succeeded does
// not overwrite succeeded with failed.
func TestStaleFailureKeepsSucceeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	failing := func(context.Context, *gorm.DB, jobs.Job) (string, error) { return "", errProvider }
	w1, unblock := startStale(t, e, m, failing) // holds no row: w2 runs through
	w2 := e.normalWorker("w2")

	e.enqueue(m, w2.queue)
	if err := e.waitRuns(w2, m.TaskID, 1)[0]; err != nil {
		t.Fatalf("w2: %v", err)
	}
	checkJob(t, e, m.TaskID, models.JobSucceeded, 2, 2, "w2")

	unblock()
	if err := e.waitRuns(w1, m.TaskID, 1)[0]; !errors.Is(err, errProvider) {
		t.Fatalf("w1: %v, want %v", err, errProvider)
	}
	checkJob(t, e, m.TaskID, models.JobSucceeded, 2, 2, "w2")
	e.waitState(w1.queue, m.TaskID, asynq.TaskStateCompleted) // its retry is a duplicate
	checkJob(t, e, m.TaskID, models.JobSucceeded, 2, 2, "w2")
	checkOneInvoice(t, e, orderID)
}

// Tasks that can never succeed skip Asynq's retries (they are archived
// at once) and leave a failed job row saying why.
func TestPoisonTasksSkipRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.normalWorker("w1")
	now := time.Now()
	raw := func(taskType, id, payload string) *asynq.Task {
		return asynq.NewTask(taskType, []byte(payload), asynq.TaskID(id), asynq.MaxRetry(25), asynq.Retention(retention))
	}
	missing := "ORD-01JNOSUCHORDER0000000000"
	paid := e.paidOrder()
	tests := []struct {
		name string
		task *asynq.Task
	}{
		{"invoice payload not JSON", raw(jobs.TaskInvoiceGenerate, "invoice:generate:broken", `{"order_id":`)},
		{"invoice payload without order", raw(jobs.TaskInvoiceGenerate, "invoice:generate:empty", `{}`)},
		{"email payload not JSON", raw(jobs.TaskEmailSend, "email:send:broken", `[]`)},
		{"expire payload not JSON", raw(jobs.TaskOrderExpire, "order:expire:broken", `nope`)},
		{"invoice of a missing order", jobs.NewTask(jobs.Row(jobs.InvoiceArgs{OrderID: missing}, now), retention)},
		{"email of a missing order", jobs.NewTask(jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: missing}, now), retention)},
		{"expiry of a missing order", jobs.NewTask(jobs.Row(jobs.ExpireArgs{OrderID: missing}, now), retention)},
		{"email with an unknown template", jobs.NewTask(jobs.Row(jobs.EmailArgs{Template: "welcome", OrderID: paid}, now), retention)},
	}
	ids := make([]string, len(tests))
	for i, tt := range tests {
		info, err := e.client.Enqueue(tt.task, asynq.Queue(w.queue))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		ids[i] = info.ID
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := e.waitRuns(w, ids[i], 1)[0]; !errors.Is(err, asynq.SkipRetry) {
				t.Errorf("returned %v, want an error wrapping SkipRetry", err)
			}
			e.waitState(w.queue, ids[i], asynq.TaskStateArchived)
			if j := checkJob(t, e, ids[i], models.JobFailed, 1, 1, "w1"); j.LastError == "" {
				t.Error("failed job has no last_error")
			}
		})
	}
	if n := e.count("SELECT count(*) FROM invoices") + e.count("SELECT count(*) FROM outbound_emails"); n != 0 {
		t.Errorf("%d invoices and emails from poison tasks, want 0", n)
	}
}
