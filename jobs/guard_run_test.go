package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The guard without a queue: Run takes the job as a plain value, so its
// steps can be driven one at a time.

func jobOf(m models.OutboxMessage) jobs.Job {
	return jobs.Job{Key: m.TaskID, Type: m.TaskType, Queue: m.Queue, Payload: m.Payload, Attempt: 1}
}

// A run whose lease has not run out keeps the job: a second run — its
// Redis lock gone, as after Redis lost its data — is turned away as busy
// (retried later, not a failure), and the fence stays where it was.
func TestClaimHonoursTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	g1 := jobs.NewGuard(e.db, e.rdb, e.log, "w1", time.Minute, metrics.New())
	g2 := jobs.NewGuard(e.db, e.rdb, e.log, "w2", time.Minute, metrics.New())

	reached, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := g1.Run(context.Background(), jobOf(m), nil, blockAfter(jobs.InvoiceEffect(time.Now, metrics.New()), reached, release))
		done <- err
	}()
	waitClosed(t, "w1 inside its effect", reached)
	if err := e.rdb.FlushAll(context.Background()).Err(); err != nil { // Redis forgets every lock
		t.Fatal(err)
	}
	outcome, err := g2.Run(context.Background(), jobOf(m), nil, jobs.InvoiceEffect(time.Now, metrics.New()))
	if outcome != "lock_busy" || !errors.Is(err, jobs.ErrLockBusy) {
		t.Fatalf("second run inside the lease: %s, %v; want lock_busy", outcome, err)
	}
	if j := e.job(m.TaskID); j.Fence != 1 || j.Attempts != 1 || j.WorkerID != "w1" || j.Status != models.JobProcessing {
		t.Errorf("after the refused claim: %+v; want w1's claim untouched", j)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("w1: %v", err)
	}
	checkOneInvoice(t, e, orderID)
	// Once the job succeeded, a late run is a duplicate, not a claim.
	if outcome, err := g2.Run(context.Background(), jobOf(m), nil, jobs.InvoiceEffect(time.Now, metrics.New())); outcome != "duplicate_ignored" || err != nil {
		t.Errorf("run after success: %s, %v", outcome, err)
	}
}

// jobRow writes the job row of outbox row m as an earlier run left it:
// row, with the key, queue and business key of m.
func (e *env) jobRow(m models.OutboxMessage, row models.JobExecution) {
	e.t.Helper()
	row.IdempotencyKey, row.QueueName, row.ExternalJobID, row.BusinessKey = m.TaskID, m.Queue, m.TaskID, jobOf(m).BusinessKey()
	if err := e.db.Create(&row).Error; err != nil {
		e.t.Fatal(err)
	}
}

// A lease that ran out is claimed by the next run, with a higher fence.
func TestClaimTakesAnExpiredLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	past := time.Now().Add(-time.Second).UTC()
	e.jobRow(m, models.JobExecution{Status: models.JobProcessing, Attempts: 1, Fence: 1, WorkerID: "dead", LockedUntil: &past, StartedAt: past})
	g := jobs.NewGuard(e.db, e.rdb, e.log, "w2", time.Minute, metrics.New())
	if outcome, err := g.Run(context.Background(), jobOf(m), nil, jobs.InvoiceEffect(time.Now, metrics.New())); outcome != "succeeded" || err != nil {
		t.Fatalf("run after the lease ran out: %s, %v", outcome, err)
	}
	checkJob(t, e, m.TaskID, models.JobSucceeded, 2, 2, "w2")
	checkOneInvoice(t, e, orderID)
}

// A claim keeps the newest attempts of a job and no more: the run that
// takes over a job with 60 failed runs records its own attempt (fence 61,
// ended with the success) and leaves the newest 50 (12…61).
func TestClaimPrunesOldAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	past := time.Now().Add(-time.Hour).UTC()
	e.jobRow(m, models.JobExecution{Status: models.JobFailed, Attempts: 60, Fence: 60, WorkerID: "old", StartedAt: past})
	for fence := range int64(60) {
		if err := e.db.Create(&models.JobAttempt{IdempotencyKey: m.TaskID, Fence: fence + 1, WorkerID: "old", StartedAt: past,
			FinishedAt: &past, Outcome: string(jobs.RunFailed)}).Error; err != nil {
			t.Fatal(err)
		}
	}
	g := jobs.NewGuard(e.db, e.rdb, e.log, "w2", time.Minute, metrics.New())
	if outcome, err := g.Run(context.Background(), jobOf(m), nil, jobs.InvoiceEffect(time.Now, metrics.New())); outcome != "succeeded" || err != nil {
		t.Fatalf("run: %s, %v", outcome, err)
	}
	var attempts []models.JobAttempt
	if err := e.db.Order("fence").Find(&attempts, "idempotency_key = ?", m.TaskID).Error; err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 50 || attempts[0].Fence != 12 {
		t.Fatalf("%d attempts from fence %d; want the newest 50, from 12", len(attempts), attempts[0].Fence)
	}
	last := attempts[49]
	if last.Fence != 61 || last.WorkerID != "w2" || last.Outcome != string(jobs.RunSucceeded) || last.FinishedAt == nil {
		t.Errorf("the run's attempt: %+v; want fence 61 by w2, succeeded and ended", last)
	}
	checkJob(t, e, m.TaskID, models.JobSucceeded, 61, 61, "w2")
}

// A job that runs longer than its lock's TTL keeps the lock and the
// lease: every refresh extends both.
func TestLockIsRefreshedWhileTheJobRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	const ttl = time.Second
	g := jobs.NewGuard(e.db, e.rdb, e.log, "w1", ttl, metrics.New())
	g.RefreshEvery = 100 * time.Millisecond
	reached, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := g.Run(context.Background(), jobOf(m), nil, blockAfter(jobs.InvoiceEffect(time.Now, metrics.New()), reached, release))
		done <- err
	}()
	waitClosed(t, "the effect", reached)
	first := *e.job(m.TaskID).LockedUntil
	// Wait, by the lease itself, until it has been extended past the
	// TTL of the first claim: the refresh is what keeps the job alive.
	eventually(t, "locked_until to move past the first claim's lease", func() bool {
		j := e.job(m.TaskID)
		return j.LockedUntil != nil && j.LockedUntil.After(first.Add(ttl))
	})
	if !e.lockHeld(m.TaskID) {
		t.Error("the Redis lock is gone although the job runs")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("a job longer than its TTL: %v", err)
	}
	checkJob(t, e, m.TaskID, models.JobSucceeded, 1, 1, "w1")
}

// A run whose lock is taken away (expired, or another owner) is cancelled:
// its context ends, its transaction rolls back, its row says why.
func TestLostLockCancelsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	g := jobs.NewGuard(e.db, e.rdb, e.log, "w1", time.Second, metrics.New())
	g.RefreshEvery = 50 * time.Millisecond
	reached := make(chan struct{})
	never := make(chan struct{})
	done := make(chan struct {
		outcome jobs.RunOutcome
		err     error
	}, 1)
	go func() {
		outcome, err := g.Run(context.Background(), jobOf(m), nil, blockAfter(jobs.InvoiceEffect(time.Now, metrics.New()), reached, never))
		done <- struct {
			outcome jobs.RunOutcome
			err     error
		}{outcome, err}
	}()
	waitClosed(t, "the effect", reached)
	if err := e.rdb.Set(context.Background(), "lock:"+m.TaskID, "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.outcome != "lock_lost" || r.err == nil {
		t.Fatalf("run after its lock was taken: %s, %v; want lock_lost", r.outcome, r.err)
	}
	if n := e.count("SELECT count(*) FROM invoices"); n != 0 {
		t.Errorf("%d invoices after a cancelled run, want 0 (rolled back)", n)
	}
	if j := e.job(m.TaskID); j.Status != models.JobFailed || j.LastError == "" {
		t.Errorf("job row: %s %q; want failed with the reason", j.Status, j.LastError)
	}
}

// blockingMailer holds every Send until release is closed.
type blockingMailer struct {
	entered chan struct{}
	release chan struct{}
}

func (s *blockingMailer) Send(ctx context.Context, _ mail.Message) error {
	close(s.entered)
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// While the mail server takes its time, the email job holds no
// transaction and no lock: a callback for the same order is answered
// while the message is still being sent, not kept waiting behind the
// order's row lock until it times out.
func TestSlowMailServerHoldsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: orderID}, time.Now())
	mailer := &blockingMailer{entered: make(chan struct{}), release: make(chan struct{})}
	g := jobs.NewGuard(e.db, e.rdb, e.log, "w1", time.Minute, metrics.New())
	email := jobs.NewEmail(e.db, mailer, "shop@example.com", time.Now, metrics.New())
	done := make(chan error, 1)
	go func() {
		_, err := g.Run(context.Background(), jobOf(m), email.Prepare, email.Effect)
		done <- err
	}()
	waitClosed(t, "the SMTP send", mailer.entered)

	// Nothing of the job's is open in PostgreSQL meanwhile.
	if n := e.count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'"); n != 0 {
		t.Errorf("%d sessions idle in a transaction while the email is being sent, want 0", n)
	}
	// A second charge for the same order locks the order row: answered now.
	body := testenv.SandboxBody(orderID, "tx-second-"+orderID, models.EventPaid, price)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := e.pay.Receive(ctx, payments.Delivery{
		Provider: sandbox.Name, Header: testenv.SandboxHeaders("evt_second_"+orderID, body, time.Now()),
		Body: bytes.NewReader(body), ContentType: "application/json",
	})
	if out.Status() != 200 || out.Result != models.ResultProcessed {
		t.Fatalf("callback during the send: %+v", out)
	}
	select {
	case err := <-done:
		t.Fatalf("the job finished before the mail server answered: %v", err)
	default:
	}
	close(mailer.release)
	if err := <-done; err != nil {
		t.Fatalf("email job: %v", err)
	}
	var em models.OutboundEmail
	e.db.Take(&em, "key = ?", mail.Key(mail.OrderPaid, orderID))
	if em.Status != models.EmailSent || em.Attempts != 1 {
		t.Errorf("email row: %s, %d attempts; want sent after 1", em.Status, em.Attempts)
	}
}

// A run that lost its fence before sending does not send: a newer run
// owns the job.
func TestFencedOutRunDoesNotSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	m := jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: orderID}, time.Now())
	g := jobs.NewGuard(e.db, e.rdb, e.log, "w1", time.Minute, metrics.New())
	email := jobs.NewEmail(e.db, e.mailer, "shop@example.com", time.Now, metrics.New())
	// Between the claim and the send, a newer claim raises the fence.
	raise := func(ctx context.Context, j jobs.Job) error {
		if err := e.db.Model(&models.JobExecution{}).Where("idempotency_key = ?", j.Key).
			Update("fence", gorm.Expr("fence + 1")).Error; err != nil {
			return err
		}
		return email.Prepare(ctx, j)
	}
	outcome, err := g.Run(context.Background(), jobOf(m), raise, email.Effect)
	if outcome != "fenced" || !errors.Is(err, jobs.ErrFenced) {
		t.Fatalf("run with a lost fence: %s, %v; want fenced", outcome, err)
	}
	if tries, _ := e.mailer.calls(); len(tries) != 0 {
		t.Errorf("a fenced-out run sent %d messages", len(tries))
	}
}

// Each guard counts into the metrics.Set it was given, and only there:
// a worker's /metrics shows its own runs, and a test reads exact counts
// even while other tests run jobs in the same binary.
func TestGuardCountsIntoItsOwnMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := jobs.Row(jobs.InvoiceArgs{OrderID: e.paidOrder()}, time.Now())
	set1, set2 := metrics.New(), metrics.New()
	g1 := jobs.NewGuard(e.db, e.rdb, e.log, "w1", time.Minute, set1)
	g2 := jobs.NewGuard(e.db, e.rdb, e.log, "w2", time.Minute, set2)

	if outcome, err := g1.Run(context.Background(), jobOf(m), nil, jobs.InvoiceEffect(time.Now, set1)); outcome != "succeeded" || err != nil {
		t.Fatalf("first run: %s, %v", outcome, err)
	}
	if outcome, err := g2.Run(context.Background(), jobOf(m), nil, jobs.InvoiceEffect(time.Now, set2)); outcome != "duplicate_ignored" || err != nil {
		t.Fatalf("second run: %s, %v", outcome, err)
	}
	runs := func(set *metrics.Set, outcome string) float64 {
		return testutil.ToFloat64(set.JobRuns.WithLabelValues(jobs.TaskInvoiceGenerate, outcome))
	}
	for _, c := range []struct {
		worker  string
		set     *metrics.Set
		outcome string
		want    float64
	}{
		{"w1", set1, "succeeded", 1}, {"w1", set1, "duplicate_ignored", 0},
		{"w2", set2, "succeeded", 0}, {"w2", set2, "duplicate_ignored", 1},
	} {
		if got := runs(c.set, c.outcome); got != c.want {
			t.Errorf("%s's %s runs: %v, want %v", c.worker, c.outcome, got, c.want)
		}
	}
}

// A job's log line names the callback delivery that caused it — the
// request id carried by the outbox row and the task — and the status it
// found and left, so one search follows a payment from its callback to
// its invoice.
func TestJobLogLinesFollowTheCallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	orderID := e.paidOrder()
	var logs bytes.Buffer
	g := jobs.NewGuard(e.db, e.rdb, slog.New(slog.NewJSONHandler(&logs, nil)), "w1", time.Minute, metrics.New())
	m := jobs.Row(jobs.InvoiceArgs{OrderID: orderID, RequestID: "req-cb-42"}, time.Now())
	for range 2 {
		if _, err := g.Run(context.Background(), jobOf(m), nil, jobs.InvoiceEffect(time.Now, metrics.New())); err != nil {
			t.Fatal(err)
		}
	}
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var line map[string]any
		if json.Unmarshal(l, &line) == nil && strings.HasPrefix(fmt.Sprint(line["msg"]), "job ") {
			lines = append(lines, line)
		}
	}
	want := [][3]string{{"job succeeded", "", "succeeded"}, {"job duplicate_ignored", "succeeded", "succeeded"}}
	if len(lines) != len(want) {
		t.Fatalf("%d job log lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, w := range want {
		l := lines[i]
		if l["msg"] != w[0] || l["status_before"] != w[1] || l["status_after"] != w[2] || l["request_id"] != "req-cb-42" || l["business_key"] != orderID {
			t.Errorf("line %d: %v; want %s, %q → %q, request_id req-cb-42", i+1, l, w[0], w[1], w[2])
		}
	}
}
