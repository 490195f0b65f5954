package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/models"
)

// orderSweeper is the part of the orders service the expiry sweep needs.
type orderSweeper interface {
	Expire(ctx context.Context, id string) (bool, error)
}

// Maintenance holds the periodic tasks. They need no guard: each is a set
// of conditional statements that is harmless to run twice.
type Maintenance struct {
	db     *gorm.DB
	orders orderSweeper
	log    *slog.Logger
	now    func() time.Time

	// Grace is how long past expires_at a pending order may stay pending
	// before the sweeper expires it (its own order:expire task normally
	// does it on time).
	Grace time.Duration
	// PruneAfter is the age at which audit rows and finished jobs go.
	PruneAfter time.Duration
}

// NewMaintenance returns the periodic tasks.
func NewMaintenance(db *gorm.DB, orders orderSweeper, log *slog.Logger, pruneAfter time.Duration) *Maintenance {
	return &Maintenance{db: db, orders: orders, log: log, now: time.Now, Grace: time.Minute, PruneAfter: pruneAfter}
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
		metrics.StuckJobsSwept.Add(float64(res.RowsAffected))
		m.log.WarnContext(ctx, "swept stuck jobs", "count", res.RowsAffected)
	}
	return nil
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

// Prune deletes what has outlived PruneAfter: delivery audit rows (but
// never the one that applied an event, which the audit checks), succeeded
// job rows, dispatched outbox rows and client idempotency keys.
func (m *Maintenance) Prune(ctx context.Context, _ *asynq.Task) error {
	cutoff := m.now().UTC().Add(-m.PruneAfter)
	db := m.db.WithContext(ctx)
	steps := []struct {
		what string
		tx   *gorm.DB
	}{
		{"callback deliveries", db.Where("received_at < ? AND outcome NOT IN ?", cutoff,
			[]string{models.OutcomeProcessed, models.OutcomeStale}).Delete(&models.CallbackDelivery{})},
		{"succeeded jobs", db.Where("status = ? AND finished_at < ?", models.JobSucceeded, cutoff).Delete(&models.JobExecution{})},
		{"dispatched outbox rows", db.Where("status = ? AND dispatched_at < ?", models.OutboxDispatched, cutoff).Delete(&models.OutboxMessage{})},
		{"idempotency keys", db.Where("created_at < ? AND response_code IS NOT NULL", cutoff).Delete(&models.APIIdempotencyKey{})},
	}
	for _, s := range steps {
		if s.tx.Error != nil {
			return fmt.Errorf("prune %s: %w", s.what, s.tx.Error)
		}
		if s.tx.RowsAffected > 0 {
			m.log.InfoContext(ctx, "pruned", "what", s.what, "rows", s.tx.RowsAffected)
		}
	}
	return nil
}
