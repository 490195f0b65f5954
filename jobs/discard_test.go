package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// failedInvoice pays an order, relays its tasks (the rows are dispatched,
// as in production) and lets the invoice task fail once on w, a flaky
// worker of the critical queue, which archives it: a failed job an
// operator may discard.
func (e *env) failedInvoice(w *worker) (orderID string, m models.OutboxMessage) {
	e.t.Helper()
	orderID = e.paidOrder()
	m = jobs.Row(jobs.InvoiceArgs{OrderID: orderID}, time.Now())
	if _, err := jobs.NewRelay(e.db, e.client, e.log, retention, "", metrics.New()).RelayOnce(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	if err := e.waitRuns(w, m.TaskID, 1)[0]; !errors.Is(err, errBroken) {
		e.t.Fatalf("%s: first run returned %v, want %v", m.TaskID, err, errBroken)
	}
	e.waitState(w.queue, m.TaskID, asynq.TaskStateArchived)
	checkJob(e.t, e, m.TaskID, models.JobFailed, 1, 1, w.queue)
	return orderID, m
}

func discardOf(key string) jobview.Discard {
	return jobview.Discard{Key: key, Reason: "the customer was invoiced by hand", Admin: "ops@example.com", RemoteAddr: "192.0.2.7"}
}

// A discarded job stays discarded: the relay does not hand its row over,
// the reconciler does not send it again however long it has been gone
// from the queue, and a copy the queue still delivers is finished by the
// guard without its effect. The action log has who and why, in the same
// commit.
func TestDiscardedJobIsLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	ctx := context.Background()
	w := e.flakyWorker(jobs.QueueCritical)
	orderID, m := e.failedInvoice(w)

	if err := c.Discard(ctx, discardOf(m.TaskID)); err != nil {
		t.Fatal(err)
	}
	j := e.job(m.TaskID)
	if j.Status != models.JobDiscarded || j.Fence != 2 || j.DiscardedBy != "ops@example.com" ||
		j.DiscardReason != "the customer was invoiced by hand" || j.DiscardedAt == nil || j.LockedUntil != nil {
		t.Errorf("discarded job row: %+v", j)
	}
	if got := e.count("SELECT count(*) FROM outbox_messages WHERE task_id = ? AND status = 'discarded'", m.TaskID); got != 1 {
		t.Errorf("outbox row not discarded")
	}
	if got := e.count(`SELECT count(*) FROM admin_actions WHERE action = 'discard job' AND target = ? AND admin_email = 'ops@example.com'
		AND detail = 'the customer was invoiced by hand' AND result = 'ok' AND remote_addr = '192.0.2.7'`, m.TaskID); got != 1 {
		t.Errorf("%d action log entries for the discard, want 1", got)
	}
	if _, err := e.insp.GetTaskInfo(w.queue, m.TaskID); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Errorf("the archived task is still in the queue after the discard: %v", err)
	}

	// The relay: even made due again, the row is not pending, so not claimed.
	e.db.Exec("UPDATE outbox_messages SET process_at = now() - interval '1 hour' WHERE task_id = ?", m.TaskID)
	if n, err := jobs.NewRelay(e.db, e.client, e.log, retention, "", metrics.New()).RelayOnce(ctx); n != 0 || err != nil {
		t.Errorf("relay after the discard: %d dispatched, %v; want 0", n, err)
	}
	// The reconciler: its row was dispatched long ago and the queue has no
	// task of that id, which is what a lost task looks like; it is left alone.
	e.db.Exec("UPDATE outbox_messages SET dispatched_at = now() - interval '1 hour' WHERE task_id = ?", m.TaskID)
	r := jobs.NewReconciler(e.db, e.client, e.log, retention, 0, metrics.New())
	if n, err := r.Once(ctx); n != 0 || err != nil {
		t.Errorf("reconciler pass: %d sent again, %v; want 0", n, err)
	}
	if _, err := e.insp.GetTaskInfo(w.queue, m.TaskID); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Errorf("after the relay and the reconciler, the queue has the task again: %v", err)
	}

	// The guard: a copy delivered all the same is acked with no effect.
	e.enqueue(m, w.queue)
	if err := e.waitRuns(w, m.TaskID, 2)[1]; err != nil {
		t.Fatalf("run of a discarded job: %v, want nil (finished without the effect)", err)
	}
	e.waitState(w.queue, m.TaskID, asynq.TaskStateCompleted)
	if got := e.count("SELECT count(*) FROM invoices WHERE order_id = ?", orderID); got != 0 {
		t.Errorf("%d invoices after a run of the discarded job, want 0", got)
	}
	if j := e.job(m.TaskID); j.Status != models.JobDiscarded || j.Attempts != 1 || j.Fence != 2 {
		t.Errorf("after the guard skipped it: status %s, attempts %d, fence %d; want discarded, 1, 2", j.Status, j.Attempts, j.Fence)
	}

	// A re-run is refused; the discard was for good.
	if _, err := c.Rerun(ctx, m.TaskID); models.ErrorCode(err) != models.EInvalidTransition {
		t.Errorf("Rerun of a discarded job: %v; want %s", err, models.EInvalidTransition)
	}
	if err := c.Discard(ctx, discardOf(m.TaskID)); models.ErrorCode(err) != models.EInvalidTransition {
		t.Errorf("second Discard: %v; want %s", err, models.EInvalidTransition)
	}
}

// The audit does not count a paid order whose invoice job was discarded
// as missing its invoice, and the drain does not wait for it: the run is
// green and lists the discarded job, with who and why, as information.
func TestAuditAcceptsADiscardedJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, m := e.failedInvoice(e.flakyWorker(jobs.QueueCritical))
	e.normalWorker(jobs.QueueDefault) // the order's email is sent
	if err := e.console().Discard(context.Background(), discardOf(m.TaskID)); err != nil {
		t.Fatal(err)
	}
	report, err := audit.New(e.db).Run(context.Background(), 20*time.Second)
	if err != nil || !report.OK || !report.Drained {
		t.Fatalf("audit: ok %v, drained %v, violations %+v, %v", report.OK, report.Drained, report.Violations, err)
	}
	if len(report.Discarded) != 1 || report.Discarded[0].Ref != "job:"+m.TaskID ||
		!strings.Contains(report.Discarded[0].Detail, "ops@example.com") || !strings.Contains(report.Discarded[0].Detail, "invoiced by hand") {
		t.Errorf("discarded in the report: %+v", report.Discarded)
	}
}

// What a discard refuses: a succeeded job, one running under a live
// lease, an unknown key, no reason. A stuck job (its lease ran out) may be
// discarded, and its fence is raised so its worker, should it wake up,
// commits nothing.
func TestDiscardRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	ctx := context.Background()
	row := func(key, status string, lockedUntil any) {
		t.Helper()
		err := e.db.Exec(`INSERT INTO job_executions (idempotency_key, queue_name, external_job_id, business_key, status, worker_id, locked_until, started_at)
			VALUES (?, 'critical', ?, 'ORD-X', ?, 'w1', ?, now())`, key, key, status, lockedUntil).Error
		if err != nil {
			t.Fatal(err)
		}
	}
	row("invoice:generate:ORD-DONE", "succeeded", nil)
	row("invoice:generate:ORD-RUNNING", "processing", time.Now().Add(time.Hour))
	row("invoice:generate:ORD-STUCK", "processing", time.Now().Add(-time.Hour))
	for _, tt := range []struct {
		key, reason, code string
	}{
		{"invoice:generate:ORD-DONE", "r", models.EInvalidTransition},
		{"invoice:generate:ORD-RUNNING", "r", models.EInvalidTransition},
		{"invoice:generate:ORD-NONE", "r", models.ENotFound},
		{"invoice:generate:ORD-STUCK", "  ", models.EMissingField},
		{"invoice:generate:ORD-STUCK", strings.Repeat("x", models.MaxDiscardReason+1), models.EInvalid},
	} {
		d := discardOf(tt.key)
		d.Reason = tt.reason
		if err := c.Discard(ctx, d); models.ErrorCode(err) != tt.code {
			t.Errorf("Discard(%s, reason of %d bytes) = %v; want %s", tt.key, len(tt.reason), err, tt.code)
		}
	}
	if got := e.count("SELECT count(*) FROM job_executions WHERE status = 'discarded'"); got != 0 {
		t.Fatalf("%d jobs discarded by refused discards", got)
	}
	if err := c.Discard(ctx, discardOf("invoice:generate:ORD-STUCK")); err != nil {
		t.Fatalf("discard of a stuck job: %v", err)
	}
	if j := e.job("invoice:generate:ORD-STUCK"); j.Status != models.JobDiscarded || j.Fence != 2 {
		t.Errorf("stuck job after the discard: status %s, fence %d; want discarded, 2", j.Status, j.Fence)
	}
}

// A discard and a re-run of the same failed job, released together: one
// wins, the other is refused, and the database says which — the job is
// discarded with no invoice, or it ran again and has its invoice.
func TestDiscardRacingRerunOneWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	w := e.flakyWorker(jobs.QueueCritical)
	const rounds = 4
	for round := range rounds {
		orderID, m := e.failedInvoice(w)
		start := make(chan struct{})
		var ready, done sync.WaitGroup
		var rerunErr, discardErr error
		ready.Add(2)
		done.Add(2)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			_, rerunErr = c.Rerun(context.Background(), m.TaskID)
		}()
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			discardErr = c.Discard(context.Background(), discardOf(m.TaskID))
		}()
		ready.Wait()
		close(start)
		done.Wait()
		t.Logf("round %d: re-run %v, discard %v", round, rerunErr, discardErr)

		switch {
		case discardErr == nil && rerunErr == nil:
			t.Fatalf("round %d: both the re-run and the discard won", round)
		case discardErr == nil:
			if models.ErrorCode(rerunErr) != models.EInvalidTransition {
				t.Fatalf("round %d: re-run lost with %v, want %s", round, rerunErr, models.EInvalidTransition)
			}
			if j := e.job(m.TaskID); j.Status != models.JobDiscarded {
				t.Fatalf("round %d: the discard won but the job is %s", round, j.Status)
			}
			if got := e.count("SELECT count(*) FROM invoices WHERE order_id = ?", orderID); got != 0 {
				t.Fatalf("round %d: the discard won but there are %d invoices", round, got)
			}
		case rerunErr == nil:
			if models.ErrorCode(discardErr) != models.EInvalidTransition {
				t.Fatalf("round %d: discard lost with %v, want %s", round, discardErr, models.EInvalidTransition)
			}
			eventually(t, "the re-run's invoice", func() bool {
				return e.count("SELECT count(*) FROM invoices WHERE order_id = ?", orderID) == 1
			})
			if j := e.job(m.TaskID); j.Status != models.JobSucceeded {
				t.Fatalf("round %d: the re-run won but the job is %s", round, j.Status)
			}
		default:
			t.Fatalf("round %d: neither won: re-run %v, discard %v", round, rerunErr, discardErr)
		}
	}
}

// The guard writes one attempt per claim: a run that failed, then the
// re-run that succeeded, each with its fence, worker, times and error,
// newest first on the job's page.
func TestJobAttemptsAreRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console()
	ctx := context.Background()
	w := e.flakyWorker(jobs.QueueCritical)
	orderID, m := e.failedInvoice(w)
	if _, err := c.Rerun(ctx, m.TaskID); err != nil {
		t.Fatal(err)
	}
	e.waitState(w.queue, m.TaskID, asynq.TaskStateCompleted)
	checkOneInvoice(t, e, orderID)
	d, err := c.Job(ctx, m.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != 2 {
		t.Fatalf("attempts %+v; want 2", d.Attempts)
	}
	last, first := d.Attempts[0], d.Attempts[1]
	if first.Fence != 1 || first.Outcome != string(jobs.RunFailed) || !strings.Contains(first.Error, errBroken.Error()) ||
		first.WorkerID != w.queue || first.FinishedAt == nil || first.FinishedAt.Before(first.StartedAt) {
		t.Errorf("first attempt %+v", first)
	}
	if last.Fence != 2 || last.Outcome != string(jobs.RunSucceeded) || last.Error != "" || last.FinishedAt == nil {
		t.Errorf("second attempt %+v", last)
	}
	if d.Job.Status != models.JobSucceeded || d.Outbox == nil || d.Task == nil || d.Task.State != "completed" || d.TaskError != "" {
		t.Errorf("job detail: job %s, outbox %v, task %+v, task error %q", d.Job.Status, d.Outbox, d.Task, d.TaskError)
	}
}
