package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/models"
)

// Task types of the maintenance work. Each task's spec sits beside its
// handler below (outbox:reconcile's in reconcile.go); the Scheduler
// enqueues each once per period.
const (
	TaskSweepStuck   = "sweep:stuck"
	TaskSweepExpired = "sweep:expired"
	TaskPrune        = "prune"
	TaskRollup       = "stats:rollup"
	TaskPollPayments = "payments:poll"
	TaskJanitor      = "gateway:janitor"
)

// orderSweeper is the part of the orders service the expiry sweep needs.
type orderSweeper interface {
	Expire(ctx context.Context, id string) (bool, error)
}

// Maintenance holds the periodic tasks. They need no guard: each is a set
// of conditional statements that is harmless to run twice.
type Maintenance struct {
	db      *gorm.DB
	orders  orderSweeper
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics.Set

	// Grace is how long past expires_at a pending order may stay pending
	// before the sweeper expires it (its own order:expire task normally
	// does it on time).
	Grace time.Duration
	// PruneAfter is the age at which audit rows and finished jobs go.
	PruneAfter time.Duration
	// KeepBodiesFor is the age at which deliveries' kept bodies and
	// headers are cleared (DELIVERY_BODY_RETENTION); 0 clears them all.
	KeepBodiesFor time.Duration
	// Poll asks the gateways about pending orders whose
	// notification has not come (payments.Service.Poll with the
	// configured status clients); nil when no gateway can be asked.
	Poll func(ctx context.Context) (applied int, err error)
	// CatchUpRun asks the gateways what Sekali missed since the last run
	// (catchup.Service.Run), recorded as asked by askedBy (an admin on
	// the console; "" for the schedule); nil when the worker is not
	// given one.
	CatchUpRun func(ctx context.Context, askedBy string) error
	// AskUnknown asks the gateways again about the calls whose outcome
	// is unknown and whose next ask is due (janitor.Janitor.Run); nil
	// when the worker is not given one.
	AskUnknown func(ctx context.Context) (asked int, err error)
}

// NewMaintenance returns the periodic tasks, counting the jobs the
// sweeper fails into m.
func NewMaintenance(db *gorm.DB, orders orderSweeper, log *slog.Logger, pruneAfter time.Duration, m *metrics.Set) *Maintenance {
	return &Maintenance{db: db, orders: orders, log: log, now: time.Now, metrics: m, Grace: time.Minute, PruneAfter: pruneAfter}
}

func sweepStuckJob() Spec {
	return periodic(TaskSweepStuck, time.Minute, func(d Deps) asynq.HandlerFunc { return d.Maintenance.SweepStuck })
}

// SweepStuck marks failed every processing job whose lease ran out: its
// worker died or lost its lock. The row then shows the failure to admins,
// and the job's next delivery claims it with a higher fence.
func (m *Maintenance) SweepStuck(ctx context.Context, _ *asynq.Task) error {
	res := m.db.WithContext(ctx).Model(&models.JobExecution{}).
		Where("status = ? AND locked_until < ?", models.JobProcessing, m.now().UTC()).
		Updates(map[string]any{"status": models.JobFailed, "last_error": "lease expired: the worker died or lost its lock",
			"locked_until": nil, "finished_at": m.now().UTC()})
	if res.Error != nil {
		return fmt.Errorf("sweep stuck jobs: %w", res.Error)
	}
	if res.RowsAffected > 0 {
		m.metrics.StuckJobsSwept.Add(float64(res.RowsAffected))
		m.log.WarnContext(ctx, "swept stuck jobs", "count", res.RowsAffected)
	}
	return nil
}

func sweepExpiredJob() Spec {
	return periodic(TaskSweepExpired, time.Minute, func(d Deps) asynq.HandlerFunc { return d.Maintenance.SweepExpired })
}

// SweepExpired expires pending orders whose order:expire task was lost
// (Redis lost it, or it was deleted by hand).
func (m *Maintenance) SweepExpired(ctx context.Context, _ *asynq.Task) error {
	var ids []string
	err := m.db.WithContext(ctx).Model(&models.Order{}).
		Where("status = ? AND expires_at < ?", models.OrderPending, m.now().UTC().Add(-m.Grace)).
		Order("expires_at").Limit(500).Pluck("id", &ids).Error
	if err != nil {
		return fmt.Errorf("sweep expired orders: %w", err)
	}
	var errs []error // one order that keeps failing must not hold up the others
	for _, id := range ids {
		expired, err := m.orders.Expire(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep expired orders: %s: %w", id, err))
			continue
		}
		if expired {
			m.log.InfoContext(ctx, "order expired by the sweeper", "order_id", id, "status_after", models.OrderExpired)
		}
	}
	return errors.Join(errs...)
}

func rollupJob() Spec {
	return periodic(TaskRollup, time.Minute, func(d Deps) asynq.HandlerFunc { return d.Maintenance.RollupDeliveries })
}

// RollupDeliveries counts the deliveries of the minutes that have closed
// into delivery_counts, which the dashboard reads instead of counting
// callback_deliveries.
func (m *Maintenance) RollupDeliveries(ctx context.Context, _ *asynq.Task) error {
	_, err := stats.Rollup(ctx, m.db, m.now())
	return err
}

func pollPaymentsJob() Spec {
	return periodic(TaskPollPayments, time.Minute, func(d Deps) asynq.HandlerFunc { return d.Maintenance.PollPayments })
}

// pollMargin is how long before its task's deadline a poll stops asking:
// Asynq counts a handler still running at its deadline as failed —
// retried, then archived, with a jobs.archived alert about a task —
// while a poll that stops in time has asked what it could, and the next
// minute's run asks the rest. A request (or the applying of an answer)
// still under way then is cut off — what was applied stays applied —
// and the margin is what the poll needs to return after that.
const pollMargin = 10 * time.Second

// PollPayments is the payments:poll task: it applies what the gateways
// answer about orders nearing expiry through the callback pipeline, so a
// lost notification is made up for before the order's stock is released.
// A gateway that cannot be asked does not fail it (payments.Service.Poll:
// logged, and counted in sekali_status_requests_total, which an alert
// watches); its error is Sekali's own — the database — and is retried.
func (m *Maintenance) PollPayments(ctx context.Context, _ *asynq.Task) error {
	if m.Poll == nil {
		return nil
	}
	ctx, cancel := beforeDeadline(ctx)
	defer cancel()
	applied, err := m.Poll(ctx)
	if applied > 0 {
		m.log.InfoContext(ctx, "status poll applied payments the notifications had not", "count", applied)
	}
	return err
}

func janitorJob() Spec {
	return periodic(TaskJanitor, time.Minute, func(d Deps) asynq.HandlerFunc { return d.Maintenance.AskAboutUnknowns })
}

// AskAboutUnknowns is the gateway:janitor task: it asks the gateways
// again about the calls whose outcome is unknown — a page or a refund
// whose answer was lost, a refund still pending — once their next ask
// is due (app/janitor). An ask the gateway does not answer does not fail
// it; its error is Sekali's own — the database — and is retried. It stops
// asking pollMargin before its deadline, as the status poll does: the
// next minute's run asks the rest.
func (m *Maintenance) AskAboutUnknowns(ctx context.Context, _ *asynq.Task) error {
	if m.AskUnknown == nil {
		return nil
	}
	ctx, cancel := beforeDeadline(ctx)
	defer cancel()
	_, err := m.AskUnknown(ctx)
	return err
}

// beforeDeadline is ctx ended pollMargin before its deadline, if it has
// one: a task that asks gateways stops asking in time to return.
func beforeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, deadline.Add(-pollMargin))
	}
	return ctx, func() {}
}

func pruneJob() Spec {
	return periodic(TaskPrune, time.Hour, func(d Deps) asynq.HandlerFunc { return d.Maintenance.Prune })
}

// Prune deletes what has outlived PruneAfter: delivery audit rows (but
// never the one that applied an event, which the audit checks), succeeded
// job rows, dispatched outbox rows and client idempotency keys; and what
// has served its purpose sooner: failed log-ins that no longer count, and
// per-minute delivery counts older than the dashboard shows.
//
// Each DELETE runs once the one before it succeeded. A failure ends the
// run with its error — the database is likely in trouble, and more
// statements would only add to it — and Asynq retries the task; every
// step is harmless to run again.
func (m *Maintenance) Prune(ctx context.Context, _ *asynq.Task) error {
	cutoff := m.now().UTC().Add(-m.PruneAfter)
	db := m.db.WithContext(ctx)
	steps := []struct {
		what  string
		where *gorm.DB // the rows to delete; nothing runs until Delete
		model any
	}{
		{"callback deliveries", db.Where("received_at < ? AND outcome NOT IN ?", cutoff,
			[]string{models.OutcomeProcessed, models.OutcomeStale}), &models.CallbackDelivery{}},
		{"succeeded jobs", db.Where("status = ? AND finished_at < ?", models.JobSucceeded, cutoff), &models.JobExecution{}},
		{"dispatched outbox rows", db.Where("status = ? AND dispatched_at < ?", models.OutboxDispatched, cutoff), &models.OutboxMessage{}},
		{"idempotency keys", db.Where("created_at < ? AND response_code IS NOT NULL", cutoff), &models.APIIdempotencyKey{}},
		{"failed log-ins", db.Where("failed_at < ?", m.now().UTC().Add(-admins.FailureWindow)), &models.LoginFailure{}},
		{"admin actions", db.Where("created_at < ?", cutoff), &models.AdminAction{}},
		{"delivery counts", db.Where("minute < ?", m.now().UTC().Add(-stats.CountsKeptFor)), &models.DeliveryCount{}},
		// A pending alert is still to be sent: it stays.
		{"alerts", db.Where("created_at < ? AND status <> ?", cutoff, models.AlertPending), &models.Alert{}},
	}
	for _, s := range steps {
		res := s.where.Delete(s.model)
		if res.Error != nil {
			return fmt.Errorf("prune %s: %w", s.what, res.Error)
		}
		if res.RowsAffected > 0 {
			m.log.InfoContext(ctx, "pruned", "what", s.what, "rows", res.RowsAffected)
		}
	}
	return m.forgetBodies(ctx)
}

// bodiesPerStatement bounds one statement of forgetBodies: a long
// retention switched off clears millions of rows, in short statements.
const bodiesPerStatement = 10_000

// forgetBodies clears the bodies and headers kept longer than
// KeepBodiesFor (all of them when it is 0), through the partial index of
// the rows that still have one.
func (m *Maintenance) forgetBodies(ctx context.Context) error {
	cutoff := m.now().UTC().Add(-m.KeepBodiesFor)
	var total int64
	for {
		res := m.db.WithContext(ctx).Exec(`UPDATE callback_deliveries SET headers = NULL, body = NULL, body_json = NULL, body_hash = NULL
WHERE id IN (SELECT id FROM callback_deliveries WHERE body IS NOT NULL AND received_at < ? LIMIT ?)`, cutoff, bodiesPerStatement)
		if res.Error != nil {
			return fmt.Errorf("prune kept bodies: %w", res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < bodiesPerStatement {
			break
		}
	}
	if total > 0 {
		m.log.InfoContext(ctx, "pruned", "what", "kept delivery bodies", "rows", total)
	}
	return nil
}
