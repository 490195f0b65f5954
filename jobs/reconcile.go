package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// TaskReconcile is the maintenance task that runs the Reconciler.
const TaskReconcile = "outbox:reconcile"

func reconcileJob() Spec {
	return periodic(TaskReconcile, time.Minute, func(d Deps) asynq.HandlerFunc { return d.Reconciler.Reconcile })
}

// Reconciler hands the queue again the tasks it lost. Redis may lose
// data — a restart without persistence, a failover — and a task the
// relay handed over is then gone while its outbox row says
// "dispatched". Every minute the reconciler looks at the rows dispatched
// more than After ago (and less than Lookback) whose job has not
// succeeded and was not discarded, and hands each to the queue again under its own task id: the
// queue refuses a task it still holds (pending, running, retrying,
// archived or completed), so only the lost ones are queued again — and
// they run through the guard, so the effect still happens once. (Asking
// the queue first would not do: after a data loss Asynq's client does not
// register its queues again, and its inspector then reports them missing.)
type Reconciler struct {
	db        *gorm.DB
	queue     enqueuer
	log       *slog.Logger
	retention time.Duration
	now       func() time.Time
	metrics   *metrics.Set

	// After is how long a dispatched task may take before its absence
	// from the queue counts as lost (RECONCILE_AFTER).
	After time.Duration
	// Lookback bounds how far back rows are checked, so each pass reads a
	// day of rows, not the whole outbox; older losses show in the audit.
	Lookback time.Duration
	// Batch bounds the rows one pass re-dispatches.
	Batch int
}

// NewReconciler returns a reconciler of tasks lost for after, counting
// the tasks it hands over again into m.
func NewReconciler(db *gorm.DB, queue enqueuer, log *slog.Logger, retention, after time.Duration, m *metrics.Set) *Reconciler {
	return &Reconciler{db: db, queue: queue, log: log, retention: retention, now: time.Now, metrics: m,
		After: after, Lookback: 24 * time.Hour, Batch: 500}
}

// Reconcile is the maintenance task's handler.
func (r *Reconciler) Reconcile(ctx context.Context, _ *asynq.Task) error {
	_, err := r.Once(ctx)
	return err
}

// Once runs one pass and returns how many tasks it dispatched again.
func (r *Reconciler) Once(ctx context.Context) (int, error) {
	now := r.now().UTC()
	var candidates []models.OutboxMessage
	err := r.db.WithContext(ctx).
		Where("status = ? AND dispatched_at < ? AND dispatched_at >= ?", models.OutboxDispatched, now.Add(-r.After), now.Add(-r.After-r.Lookback)).
		// A discarded job's row is discarded too and is not read; the job
		// row is checked as well, so a discard is respected whichever row
		// a future change forgets.
		Where("NOT EXISTS (SELECT 1 FROM job_executions j WHERE j.idempotency_key = outbox_messages.task_id AND j.status IN ?)",
			[]models.JobStatus{models.JobSucceeded, models.JobDiscarded}).
		Order("id").Limit(r.Batch).Find(&candidates).Error
	if err != nil {
		return 0, fmt.Errorf("jobs.Reconciler: %w", store.Classify(err))
	}
	recovered := 0
	var errs []error
	for _, m := range candidates {
		lost, err := r.redispatch(ctx, m, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.TaskID, err))
			continue
		}
		if !lost {
			continue // the queue still holds it
		}
		recovered++
		r.metrics.OutboxReconciled.WithLabelValues(m.TaskType).Inc()
		r.log.WarnContext(ctx, "outbox task dispatched again: the queue had lost it",
			"idempotency_key", m.TaskID, "type", m.TaskType, "queue", m.Queue, "dispatched_at", m.DispatchedAt)
	}
	return recovered, errors.Join(errs...)
}

// resentEvent is the reconciler.resent alert of m, handed over again by
// a pass that began at now: one per window, however many tasks a loss of
// Redis data makes it hand over again, naming the first.
func resentEvent(m models.OutboxMessage, now time.Time) alerts.Event {
	start := now.Truncate(alerts.Window)
	return alerts.Event{Type: alerts.ReconcilerSent, Key: alerts.WindowKey(start), At: now, Data: map[string]any{
		"window_start": start, "window_end": start.Add(alerts.Window),
		"first_task_id": m.TaskID, "first_task_type": m.TaskType, "dispatched_at": m.DispatchedAt,
	}}
}

// redispatch hands m to the queue again, with the row locked (a relay or
// an admin may act on it too). lost reports whether the queue took it —
// it had lost it —, and then the row's clock restarts and the pass's
// alert (pass is when it began) is raised.
func (r *Reconciler) redispatch(ctx context.Context, m models.OutboxMessage, pass time.Time) (lost bool, err error) {
	err = r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Exec("SELECT 1 FROM outbox_messages WHERE id = ? AND status = ? FOR UPDATE", m.ID, models.OutboxDispatched)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error // gone or pending again meanwhile: the relay has it
		}
		held, err := enqueue(ctx, r.queue, m, r.retention, r.metrics.OutboxErrors)
		if err != nil || held {
			return err
		}
		lost = true
		now := r.now().UTC()
		err = tx.Model(&models.OutboxMessage{}).Where("id = ?", m.ID).
			Updates(map[string]any{"dispatched_at": now, "attempts": gorm.Expr("attempts + 1")}).Error
		if err != nil {
			return err
		}
		_, err = alerts.Raise(tx, Tasks{}, resentEvent(m, pass))
		return err
	})
	return lost, store.Classify(err)
}
