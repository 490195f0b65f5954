// Package stats counts what the admin dashboard shows, cheaply enough to
// refresh every few seconds on a database with millions of rows: no
// count over a whole big table. Deliveries are read from per-minute
// rollups (delivery_counts) plus a live count of the few minutes the
// rollup has not reached; everything else is a count over a small index
// range (a time window, or a partial index of rare states).
package stats

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Rollup settings.
const (
	// rollupMark is the name of the delivery rollup's row in rollup_marks.
	rollupMark = "delivery_counts"
	// Settle is how old a minute must be before it is rolled up: delivery
	// rows that applied nothing are written in batches shortly after the
	// response, so the last minutes may still grow.
	Settle = 2 * time.Minute
	// CountsKeptFor is how long per-minute counts are kept: the
	// dashboard's longest window, and a day more.
	CountsKeptFor = 48 * time.Hour
	// longestWindow is the dashboard's longest window.
	longestWindow = 24 * time.Hour
)

// Rollup counts the deliveries of every closed minute the rollup has not
// counted yet (at most the last longestWindow) into delivery_counts. It
// is safe to run twice, and at once from several workers: it holds the
// mark's row lock while it counts, and a minute's count is recomputed
// from the rows, never added to.
func Rollup(ctx context.Context, db *gorm.DB, now time.Time) (minutes int, err error) {
	upTo := now.UTC().Add(-Settle).Truncate(time.Minute)
	err = store.Transaction(ctx, db, func(tx *gorm.DB) error {
		floor := upTo.Add(-longestWindow)
		mark := models.RollupMark{Name: rollupMark, DoneUntil: floor}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&mark).Error; err != nil {
			return err
		}
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&mark, "name = ?", rollupMark).Error; err != nil {
			return err
		}
		from := mark.DoneUntil.UTC()
		if from.Before(floor) {
			from = floor
		}
		if !from.Before(upTo) {
			return nil
		}
		err := tx.Exec(`
INSERT INTO delivery_counts (minute, provider, outcome, deliveries)
SELECT date_trunc('minute', received_at), provider, outcome, count(*)
FROM callback_deliveries
WHERE received_at >= ? AND received_at < ?
GROUP BY 1, 2, 3
ON CONFLICT (minute, provider, outcome) DO UPDATE SET deliveries = excluded.deliveries`, from, upTo).Error
		if err != nil {
			return err
		}
		minutes = int(upTo.Sub(from) / time.Minute)
		return tx.Model(&models.RollupMark{}).Where("name = ?", rollupMark).Update("done_until", upTo).Error
	})
	if err != nil {
		return 0, fmt.Errorf("stats.Rollup: %w", err)
	}
	return minutes, nil
}

// Reader reads the dashboard's figures.
type Reader struct {
	db  *gorm.DB
	now func() time.Time
}

// NewReader returns a reader on the clock now.
func NewReader(db *gorm.DB, now func() time.Time) *Reader { return &Reader{db: db, now: now} }

// Dashboard reads the dashboard's figures as of now.
func (r *Reader) Dashboard(ctx context.Context) (Dashboard, error) { return Read(ctx, r.db, r.now()) }

// DeliveriesSince is DeliveriesSince on the reader's database.
func (r *Reader) DeliveriesSince(ctx context.Context, from time.Time) ([]MinuteCount, error) {
	return DeliveriesSince(ctx, r.db, from)
}

// MinuteCount is the deliveries of one outcome in one minute.
type MinuteCount struct {
	Minute     time.Time
	Outcome    string
	Deliveries int64
}

// DeliveriesSince returns the deliveries per minute and outcome since
// from (at most the last longestWindow): rolled-up minutes from
// delivery_counts, the rest counted live.
func DeliveriesSince(ctx context.Context, db *gorm.DB, from time.Time) ([]MinuteCount, error) {
	from = from.UTC().Truncate(time.Minute)
	var rows []MinuteCount
	err := db.WithContext(ctx).Raw(`
WITH mark AS (
    SELECT greatest(coalesce((SELECT done_until FROM rollup_marks WHERE name = ?), ?), ?) AS done_until
)
SELECT minute, outcome, sum(deliveries)::bigint AS deliveries
FROM delivery_counts, mark
WHERE minute >= ? AND minute < mark.done_until
GROUP BY minute, outcome
UNION ALL
SELECT date_trunc('minute', received_at), outcome, count(*)
FROM callback_deliveries, mark
WHERE received_at >= mark.done_until
GROUP BY 1, 2
ORDER BY 1, 2`, rollupMark, from, from, from).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("stats.DeliveriesSince: %w", store.Classify(err))
	}
	return rows, nil
}

// Dashboard is everything the dashboard shows besides the deliveries and
// the queue's own counts.
type Dashboard struct {
	// Orders created in the window, by their status now.
	OrdersHour, OrdersDay map[models.OrderStatus]int64
	// Jobs now: processing, failed, and processing past their lease.
	JobsProcessing, JobsFailed, JobsStuck int64
	// Jobs that succeeded in the window.
	JobsSucceededHour, JobsSucceededDay int64
	// The outbox: due rows not yet handed to the queue, and the oldest's age.
	OutboxPending   int64
	OutboxOldestAge time.Duration
	// Callbacks that had a conflicting delivery in the last 24 hours: how
	// many, and the most recent few.
	ConflictsDay int64
	Conflicts    []models.PaymentCallback
	// The last audit verdict, nil if the audit never ran.
	LastAudit *models.AuditRun
	// The newest operational webhooks, newest first.
	Alerts []models.Alert
}

// RecentAlerts is how many alerts the dashboard lists.
const RecentAlerts = 10

// Read reads the dashboard's figures as of now.
func Read(ctx context.Context, db *gorm.DB, now time.Time) (Dashboard, error) {
	now = now.UTC()
	d := Dashboard{}
	db = db.WithContext(ctx)
	var err error
	if d.OrdersHour, err = ordersByStatus(db, now.Add(-time.Hour)); err != nil {
		return d, err
	}
	if d.OrdersDay, err = ordersByStatus(db, now.Add(-longestWindow)); err != nil {
		return d, err
	}
	var jobs struct{ Processing, Failed, Stuck, SucceededHour, SucceededDay int64 }
	err = db.Raw(`
SELECT (SELECT count(*) FROM job_executions WHERE status = 'processing') AS processing,
       (SELECT count(*) FROM job_executions WHERE status = 'failed') AS failed,
       (SELECT count(*) FROM job_executions WHERE status = 'processing' AND locked_until < ?) AS stuck,
       (SELECT count(*) FROM job_executions WHERE status = 'succeeded' AND finished_at >= ?) AS succeeded_hour,
       (SELECT count(*) FROM job_executions WHERE status = 'succeeded' AND finished_at >= ?) AS succeeded_day`,
		now, now.Add(-time.Hour), now.Add(-longestWindow)).Scan(&jobs).Error
	if err != nil {
		return d, fmt.Errorf("stats.Read: jobs: %w", store.Classify(err))
	}
	d.JobsProcessing, d.JobsFailed, d.JobsStuck = jobs.Processing, jobs.Failed, jobs.Stuck
	d.JobsSucceededHour, d.JobsSucceededDay = jobs.SucceededHour, jobs.SucceededDay
	var outbox struct {
		Pending int64
		Oldest  *time.Time
	}
	err = db.Raw(`SELECT count(*) AS pending, min(process_at) AS oldest FROM outbox_messages WHERE status = 'pending' AND process_at <= ?`, now).
		Scan(&outbox).Error
	if err != nil {
		return d, fmt.Errorf("stats.Read: outbox: %w", store.Classify(err))
	}
	d.OutboxPending = outbox.Pending
	if outbox.Oldest != nil {
		d.OutboxOldestAge = now.Sub(*outbox.Oldest)
	}
	conflicts := db.Model(&models.PaymentCallback{}).Where("conflict_count > 0 AND last_received_at >= ?", now.Add(-longestWindow))
	if err := conflicts.Count(&d.ConflictsDay).Error; err != nil {
		return d, fmt.Errorf("stats.Read: conflicts: %w", store.Classify(err))
	}
	err = conflicts.Order("last_received_at DESC").Limit(5).Find(&d.Conflicts).Error
	if err != nil {
		return d, fmt.Errorf("stats.Read: conflicts: %w", store.Classify(err))
	}
	if d.LastAudit, err = audit.Latest(ctx, db); err != nil {
		return d, fmt.Errorf("stats.Read: %w", err)
	}
	if d.Alerts, err = alerts.Recent(ctx, db, RecentAlerts); err != nil {
		return d, fmt.Errorf("stats.Read: %w", err)
	}
	return d, nil
}

func ordersByStatus(db *gorm.DB, since time.Time) (map[models.OrderStatus]int64, error) {
	var rows []struct {
		Status models.OrderStatus
		N      int64
	}
	err := db.Model(&models.Order{}).Select("status, count(*) AS n").
		Where("created_at >= ?", since).Group("status").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("stats.Read: orders: %w", store.Classify(err))
	}
	m := make(map[models.OrderStatus]int64, len(rows))
	for _, r := range rows {
		m[r.Status] = r.N
	}
	return m, nil
}
