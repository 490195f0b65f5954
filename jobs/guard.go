package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/lock"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Guard errors. Both make Asynq retry the task later; the retry then finds
// the job done (duplicate_ignored) or claims it anew.
var (
	// ErrLockBusy: another worker holds the job's lock right now.
	ErrLockBusy = errors.New("jobs: lock held by another worker")
	// ErrFenced: a newer claimant raised the fence; this run's effect was
	// rolled back.
	ErrFenced = errors.New("jobs: fenced out by a newer claim")
	// errLockLost cancels a run whose lock expired or was taken.
	errLockLost = errors.New("jobs: lock lost")
)

// Effect is the business part of a job. It runs inside the guard's
// transaction and must write its effect so that a duplicate does not
// abort the transaction (ON CONFLICT DO NOTHING, or look first under a
// row lock). It returns a short description of the result (an invoice
// number, a Message-ID) whose hash is kept on the job row.
type Effect func(ctx context.Context, tx *gorm.DB, t *asynq.Task) (result string, err error)

// Guard runs business jobs exactly once, whatever Asynq delivers twice:
//
//  1. a Redis lock lock:{key} with an owner token, refreshed while the
//     job runs (each refresh also extends locked_until); a lost lock
//     cancels the job's context;
//  2. a claim in its own short transaction: the job_executions row is
//     created or taken over — attempts+1, fence+1 — unless it succeeded,
//     in which case the run is acked as duplicate_ignored;
//  3. one transaction for the effect and the fenced
//     UPDATE … SET status = 'succeeded' WHERE key = $k AND fence = $myFence;
//     zero rows means a newer claimant owns the job: roll back;
//  4. commit, then ack.
//
// On failure the row is marked failed with the same fence (a stale worker
// never overwrites succeeded) and the error goes back to Asynq to retry.
type Guard struct {
	db       *gorm.DB
	rdb      redis.UniversalClient
	log      *slog.Logger
	workerID string
	now      func() time.Time

	// LockTTL is the lifetime of the lock and of locked_until.
	LockTTL time.Duration
	// RefreshEvery is how often a running job extends both; LockTTL/3 by
	// default. Tests set it beyond LockTTL to let a lock expire mid-job.
	RefreshEvery time.Duration
}

// NewGuard returns a guard whose locks live for lockTTL.
func NewGuard(db *gorm.DB, rdb redis.UniversalClient, log *slog.Logger, workerID string, lockTTL time.Duration) *Guard {
	return &Guard{db: db, rdb: rdb, log: log, workerID: workerID, now: time.Now, LockTTL: lockTTL, RefreshEvery: lockTTL / 3}
}

// Wrap turns an Effect into an Asynq handler behind the guard.
func (g *Guard) Wrap(fn Effect) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		start := time.Now()
		key, _ := asynq.GetTaskID(ctx)
		queue, _ := asynq.GetQueueName(ctx)
		retry, _ := asynq.GetRetryCount(ctx)
		log := g.log.With("idempotency_key", key, "external_job_id", key, "business_key", businessKey(t),
			"type", t.Type(), "attempt", retry+1, "worker_id", g.workerID, "lock_key", lockKey(key))
		if retry > 0 {
			metrics.JobRetries.WithLabelValues(t.Type()).Inc()
		}
		outcome, err := g.run(ctx, log, key, queue, t, fn)
		metrics.JobRuns.WithLabelValues(t.Type(), outcome).Inc()
		metrics.JobDuration.WithLabelValues(t.Type()).Observe(time.Since(start).Seconds())
		level := slog.LevelInfo
		if err != nil {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "job "+outcome, "duration_ms", time.Since(start).Milliseconds(), "error", err)
		return err
	}
}

func (g *Guard) run(ctx context.Context, log *slog.Logger, key, queue string, t *asynq.Task, fn Effect) (outcome string, err error) {
	if key == "" {
		return "failed", fmt.Errorf("jobs: task %s has no id: %w", t.Type(), asynq.SkipRetry)
	}
	l, ok, err := lock.Acquire(ctx, g.rdb, lockKey(key), g.LockTTL)
	if err != nil {
		return "failed", fmt.Errorf("jobs: lock %s: %w", key, err)
	}
	if !ok {
		metrics.LockFailures.WithLabelValues(t.Type()).Inc()
		return "lock_busy", ErrLockBusy
	}
	defer l.Release(context.WithoutCancel(ctx))

	fence, done, err := g.claim(ctx, key, queue, t)
	if err != nil {
		return "failed", err
	}
	if done {
		return "duplicate_ignored", nil
	}

	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := g.keepAlive(jobCtx, cancel, l, key, fence)
	err = store.Transaction(jobCtx, g.db, func(tx *gorm.DB) error {
		result, err := fn(jobCtx, tx, t)
		if err != nil {
			return err
		}
		res := tx.Model(&models.JobExecution{}).
			Where("idempotency_key = ? AND fence = ?", key, fence).
			Updates(map[string]any{
				"status": models.JobSucceeded, "finished_at": g.now().UTC(), "locked_until": nil,
				"last_error": "", "result_hash": hash(result),
			})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrFenced
		}
		return nil
	})
	stop()
	if err == nil {
		return "succeeded", nil
	}
	if cause := context.Cause(jobCtx); errors.Is(cause, errLockLost) && !errors.Is(err, ErrFenced) {
		err = fmt.Errorf("%w: %w", errLockLost, err)
	}
	g.fail(key, fence, err, log)
	switch {
	case errors.Is(err, ErrFenced):
		return "fenced", err
	case errors.Is(err, errLockLost):
		return "lock_lost", err
	}
	return "failed", err
}

// claim creates or takes over the job's row in its own transaction and
// returns the new fence; done is true when the job already succeeded.
func (g *Guard) claim(ctx context.Context, key, queue string, t *asynq.Task) (fence int64, done bool, err error) {
	now := g.now().UTC()
	until := now.Add(g.LockTTL)
	row := models.JobExecution{
		IdempotencyKey: key, QueueName: queue, ExternalJobID: key, BusinessKey: businessKey(t),
		Status: models.JobProcessing, Attempts: 1, Fence: 1, WorkerID: g.workerID,
		LockedUntil: &until, StartedAt: now,
	}
	res := g.db.WithContext(ctx).Clauses(
		clause.OnConflict{
			Columns: []clause.Column{{Name: "idempotency_key"}},
			DoUpdates: clause.Assignments(map[string]any{
				"status":       models.JobProcessing,
				"attempts":     gorm.Expr("job_executions.attempts + 1"),
				"fence":        gorm.Expr("job_executions.fence + 1"),
				"worker_id":    g.workerID,
				"locked_until": until,
				"started_at":   now,
				"finished_at":  nil,
			}),
			Where: clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "job_executions.status <> ?", Vars: []any{models.JobSucceeded}}}},
		},
		clause.Returning{Columns: []clause.Column{{Name: "fence"}}},
	).Create(&row)
	if res.Error != nil {
		return 0, false, fmt.Errorf("jobs: claim %s: %w", key, res.Error)
	}
	if res.RowsAffected == 0 {
		return 0, true, nil
	}
	return row.Fence, false, nil
}

// keepAlive refreshes the lock and locked_until until stop is called. If
// the lock is gone — expired, or taken by another worker — it cancels the
// job's context so the effect stops early; the fence keeps a run that
// does not stop in time from committing.
func (g *Guard) keepAlive(ctx context.Context, cancel context.CancelCauseFunc, l *lock.Lock, key string, fence int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(g.RefreshEvery)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if err := l.Refresh(ctx, g.LockTTL); errors.Is(err, lock.ErrNotHeld) {
				cancel(fmt.Errorf("%w: %w", errLockLost, err))
				return
			} else if err != nil {
				continue // Redis did not answer: try again; the fence guards the commit meanwhile
			}
			g.db.WithContext(ctx).Model(&models.JobExecution{}).
				Where("idempotency_key = ? AND fence = ? AND status = ?", key, fence, models.JobProcessing).
				Update("locked_until", g.now().UTC().Add(g.LockTTL))
		}
	}()
	return func() { close(done); <-finished }
}

// fail records a failed run, only if this run still holds the fence and
// the job is still processing: a stale worker never overwrites succeeded.
func (g *Guard) fail(key string, fence int64, cause error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg := cause.Error()
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	err := g.db.WithContext(ctx).Model(&models.JobExecution{}).
		Where("idempotency_key = ? AND fence = ? AND status = ?", key, fence, models.JobProcessing).
		Updates(map[string]any{"status": models.JobFailed, "last_error": msg, "finished_at": g.now().UTC(), "locked_until": nil}).Error
	if err != nil {
		log.Error("could not record the job failure", "error", err)
	}
}

func lockKey(key string) string { return "lock:" + key }

func hash(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
