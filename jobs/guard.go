package jobs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed" // the guard's SQL
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/lock"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/models"
)

// Guard errors. Each makes Asynq retry the task later; the retry then
// finds the job done (duplicate_ignored) or claims it anew.
var (
	// ErrLockBusy: another worker holds the job right now — its Redis
	// lock, or its lease (a processing row whose locked_until is still
	// ahead). Not a failure of the job.
	ErrLockBusy = errors.New("jobs: held by another worker")
	// ErrFenced: a newer claimant raised the fence; this run's effect was
	// rolled back.
	ErrFenced = errors.New("jobs: fenced out by a newer claim")
	// errLockLost cancels a run whose lock expired or was taken.
	errLockLost = errors.New("jobs: lock lost")
)

// Job is one run of a business job: what the guard needs to know of it,
// whichever queue delivered it. Wrap fills it from an Asynq task; tests
// build one by hand and call Run.
type Job struct {
	Key     string // the idempotency key: the task id, e.g. invoice:generate:ORD-…
	Type    string // the task type, e.g. invoice:generate
	Queue   string
	Payload []byte
	Attempt int   // 1 for the first run
	Fence   int64 // this run's fence, set by the claim
}

// RequestID is the id of the HTTP request that caused the job — the
// callback delivery that paid an order, the admin's request that asked
// for a refund — from its payload ("" when none did). RefundRequestID is
// the refund record a refund:send job sends (0 for other jobs); an old
// refund payload's numeric request_id is that (RefundArgs).
func (j Job) RequestID() (requestID string, refundRequestID int64) {
	var p struct {
		RequestID       json.RawMessage `json:"request_id"`
		RefundRequestID int64           `json:"refund_request_id"`
	}
	json.Unmarshal(j.Payload, &p)
	requestID, refundRequestID, _ = requestIDs(p.RequestID)
	return requestID, cmp.Or(p.RefundRequestID, refundRequestID)
}

// logIDs are the ids a job's log lines carry: always request_id, and
// refund_request_id where the job has one.
func (j Job) logIDs() []any {
	requestID, refundRequestID := j.RequestID()
	ids := []any{"request_id", requestID}
	if refundRequestID > 0 {
		ids = append(ids, "refund_request_id", refundRequestID)
	}
	return ids
}

// BusinessKey is what the job acts on: its payload's order id, or its type.
func (j Job) BusinessKey() string {
	var p struct {
		OrderID string `json:"order_id"`
	}
	if json.Unmarshal(j.Payload, &p) == nil && p.OrderID != "" {
		return p.OrderID
	}
	return j.Type
}

// Effect is the business part of a job. It runs inside the guard's
// transaction and must write its effect so that a duplicate does not
// abort the transaction (ON CONFLICT DO NOTHING, or look first under a
// row lock). It returns a short description of the result (an invoice
// number, a Message-ID) whose hash is kept on the job row.
type Effect func(ctx context.Context, tx *gorm.DB, j Job) (result string, err error)

// Prepare is work a job does after its claim and before its
// transaction, outside any transaction: a network call that must hold no
// row lock and no pooled connection while it waits (sending an email). It
// runs again if the job is retried, so it must be safe to repeat.
type Prepare func(ctx context.Context, j Job) error

// Guard runs business jobs exactly once, whatever Asynq delivers twice:
//
//  1. a Redis lock lock:{key} with an owner token, refreshed while the
//     job runs (each refresh also extends locked_until); a lost lock
//     cancels the job's context;
//  2. a claim in its own short transaction: the job_executions row is
//     created or taken over — attempts+1, fence+1 — unless it succeeded
//     (the run is acked as duplicate_ignored) or another run holds its
//     lease (processing, locked_until ahead: retried later);
//  3. the job's Prepare, if it has one, outside any transaction;
//  4. one transaction for the effect and the fenced
//     UPDATE … SET status = 'succeeded' WHERE key = $k AND fence = $myFence;
//     zero rows means a newer claimant owns the job: roll back;
//  5. commit, then ack.
//
// On failure the row is marked failed with the same fence (a stale worker
// never overwrites succeeded) and the error goes back to Asynq to retry.
type Guard struct {
	db       *gorm.DB
	rdb      redis.UniversalClient
	log      *slog.Logger
	workerID string
	now      func() time.Time
	metrics  *metrics.Set

	// LockTTL is the lifetime of the lock and of locked_until.
	LockTTL time.Duration
	// RefreshEvery is how often a running job extends both; LockTTL/3 by
	// default. Tests set it beyond LockTTL to let a lock expire mid-job.
	RefreshEvery time.Duration
}

// NewGuard returns a guard whose locks live for lockTTL, counting its
// runs into m.
func NewGuard(db *gorm.DB, rdb redis.UniversalClient, log *slog.Logger, workerID string, lockTTL time.Duration, m *metrics.Set) *Guard {
	return &Guard{db: db, rdb: rdb, log: log, workerID: workerID, now: time.Now, metrics: m, LockTTL: lockTTL, RefreshEvery: lockTTL / 3}
}

// Wrap turns an Effect into an Asynq handler behind the guard.
func (g *Guard) Wrap(fn Effect) asynq.HandlerFunc { return g.WrapPrepared(nil, fn) }

// WrapPrepared is Wrap for a job with a Prepare step.
func (g *Guard) WrapPrepared(prepare Prepare, fn Effect) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		key, _ := asynq.GetTaskID(ctx)
		queue, _ := asynq.GetQueueName(ctx)
		retry, _ := asynq.GetRetryCount(ctx)
		if retry > 0 {
			g.metrics.JobRetries.WithLabelValues(t.Type()).Inc()
		}
		_, err := g.Run(ctx, Job{Key: key, Type: t.Type(), Queue: queue, Payload: t.Payload(), Attempt: retry + 1}, prepare, fn)
		return err
	}
}

// RunOutcome is how one run of a job behind the guard ended; it is the
// outcome label of sekali_job_runs_total and of the run's log line.
type RunOutcome string

const (
	RunSucceeded RunOutcome = "succeeded"         // the effect committed with the run's fence
	RunDuplicate RunOutcome = "duplicate_ignored" // the job had succeeded before: nothing ran
	RunLockBusy  RunOutcome = "lock_busy"         // another run holds the lock or the lease
	RunFenced    RunOutcome = "fenced"            // a newer claim owns the job: this run committed nothing
	RunLockLost  RunOutcome = "lock_lost"         // the lock expired during the run
	RunFailed    RunOutcome = "failed"            // the effect failed; the queue retries
	RunDiscarded RunOutcome = "discarded"         // an operator discarded the job: finished without the effect
)

// maxAttempts bounds the job_attempts rows kept per job: the newest.
const maxAttempts = 50

// Run runs one job behind the guard (the steps above) and says how it
// ended. A nil error means the job is done and may be acked.
func (g *Guard) Run(ctx context.Context, j Job, prepare Prepare, fn Effect) (outcome RunOutcome, err error) {
	start := time.Now()
	// request_id is the request's that caused the job: one search for it
	// follows a payment from its callback to its invoice and email, and a
	// refund from the admin's button to the gateway.
	attrs := append([]any{"idempotency_key", j.Key, "external_job_id", j.Key, "business_key", j.BusinessKey()}, j.logIDs()...)
	log := g.log.With(append(attrs, "type", j.Type, "attempt", j.Attempt, "worker_id", g.workerID, "lock_key", lockKey(j.Key))...)
	var before models.JobStatus
	outcome, err = g.run(ctx, log, j, prepare, fn, &before)
	g.metrics.JobRuns.WithLabelValues(j.Type, string(outcome)).Inc()
	g.metrics.JobDuration.WithLabelValues(j.Type).Observe(time.Since(start).Seconds())
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	log.Log(ctx, level, "job "+string(outcome), "status_before", before, "status_after", statusAfter(outcome, before),
		"duration_ms", time.Since(start).Milliseconds(), "error", err)
	return outcome, err
}

// statusAfter is the job row's status as a run that ended with outcome
// left it, before being the status the run found ("" for a new job).
func statusAfter(outcome RunOutcome, before models.JobStatus) models.JobStatus {
	switch outcome {
	case RunSucceeded, RunDuplicate:
		return models.JobSucceeded
	case RunDiscarded:
		return models.JobDiscarded
	case RunFailed, RunLockLost:
		if before == models.JobSucceeded { // refused before any claim: nothing changed
			return before
		}
		return models.JobFailed
	case RunFenced: // a newer run owns the row
		return models.JobProcessing
	}
	return before // lock_busy: not claimed, nothing changed
}

func (g *Guard) run(ctx context.Context, log *slog.Logger, j Job, prepare Prepare, fn Effect, before *models.JobStatus) (outcome RunOutcome, err error) {
	if j.Key == "" {
		return RunFailed, fmt.Errorf("jobs: task %s has no id: %w", j.Type, asynq.SkipRetry)
	}
	l, ok, err := lock.Acquire(ctx, g.rdb, lockKey(j.Key), g.LockTTL)
	if err != nil {
		return RunFailed, fmt.Errorf("jobs: lock %s: %w", j.Key, err)
	}
	if !ok {
		g.metrics.LockFailures.WithLabelValues(j.Type).Inc()
		return RunLockBusy, ErrLockBusy
	}
	defer l.Release(context.WithoutCancel(ctx))

	claimCtx, span := tracing.Start(ctx, "guard.claim", attribute.String("sekali.idempotency_key", j.Key))
	fence, state, err := g.claim(claimCtx, j, before)
	if err == nil {
		span.SetAttributes(attribute.Int64("sekali.fence", fence), attribute.String("sekali.claim", state.String()))
	}
	tracing.End(span, err)
	switch {
	case err != nil:
		return RunFailed, err
	case state == claimDone:
		return RunDuplicate, nil
	case state == claimDiscarded:
		// A copy the queue still held (archived, retrying) of a job an
		// operator gave up on: acked, so the queue forgets it, and no effect.
		return RunDiscarded, nil
	case state == claimLeased:
		g.metrics.LockFailures.WithLabelValues(j.Type).Inc()
		return RunLockBusy, fmt.Errorf("%w: its lease has not run out", ErrLockBusy)
	}
	j.Fence = fence

	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := g.keepAlive(jobCtx, cancel, l, j.Key, fence)
	if prepare != nil {
		prepCtx, span := tracing.Start(jobCtx, "guard.prepare")
		err = prepare(prepCtx, j)
		tracing.End(span, err)
	}
	if err == nil {
		effectCtx, span := tracing.Start(jobCtx, "guard.effect")
		err = store.Transaction(effectCtx, g.db, func(tx *gorm.DB) error {
			result, err := fn(effectCtx, tx, j)
			if err != nil {
				return err
			}
			return g.succeed(tx, j.Key, fence, result)
		})
		tracing.End(span, err)
	}
	stop()
	if err == nil {
		return RunSucceeded, nil
	}
	if cause := context.Cause(jobCtx); errors.Is(cause, errLockLost) && !errors.Is(err, ErrFenced) {
		err = fmt.Errorf("%w: %w", errLockLost, err)
	}
	outcome = RunFailed
	switch {
	case errors.Is(err, ErrFenced):
		outcome = RunFenced
	case errors.Is(err, errLockLost):
		outcome = RunLockLost
	}
	g.fail(j.Key, fence, outcome, err, log)
	return outcome, err
}

// succeed is the fence check that ends the effect's transaction: the job
// row becomes succeeded only if this run's fence still holds it; else
// ErrFenced, and the effect rolls back. The attempt row ends in the same
// statement (guard_succeed.sql).
func (g *Guard) succeed(tx *gorm.DB, key string, fence int64, result string) (err error) {
	ctx, span := tracing.Start(tx.Statement.Context, "guard.fence", attribute.Int64("sekali.fence", fence))
	defer func() { tracing.End(span, err) }()
	var updated int64
	err = queryRow(ctx, tx, succeedSQL, key, fence, g.now().UTC(), hash(result)).Scan(&updated)
	if err != nil {
		return err
	}
	if updated == 0 {
		return ErrFenced
	}
	return nil
}

// What a claim found.
type claimState int

const (
	claimed        claimState = iota // this run owns the job now, with a new fence
	claimDone                        // the job succeeded before
	claimLeased                      // another run holds its lease
	claimDiscarded                   // an operator discarded it
)

// String names what a claim found, for its span.
func (s claimState) String() string {
	return [...]string{claimed: "claimed", claimDone: "done", claimLeased: "leased", claimDiscarded: "discarded"}[s]
}

// The guard's statements, each in a file of its own.
var (
	//go:embed guard_claim.sql
	claimSQL string
	//go:embed guard_attempt.sql
	attemptSQL string
	//go:embed guard_succeed.sql
	succeedSQL string
)

// queryRow runs one of the guard's statements on db's pool, or in its
// transaction, straight through database/sql. They run on every job, and
// GORM has nothing to build in a statement handed to it whole: with
// GORM's named parameters, their scan of the text alone was a tenth of
// the guarded job's CPU in BenchmarkGuardVersusBare's profile.
func queryRow(ctx context.Context, db *gorm.DB, query string, args ...any) *sql.Row {
	return db.Statement.ConnPool.QueryRowContext(ctx, query, args...)
}

// claim creates or takes over the job's row in its own short statement
// (guard_claim.sql) and returns the new fence. A row that succeeded is
// left alone (done); so is a processing row whose lease has not run out
// (leased): its run may be alive, and two runs must not do the work side
// by side. before is set to the status the statement found, for the
// run's log line ("" for a new job).
func (g *Guard) claim(ctx context.Context, j Job, before *models.JobStatus) (fence int64, state claimState, err error) {
	now := g.now().UTC()
	var found sql.NullString
	var newFence sql.NullInt64
	err = queryRow(ctx, g.db, claimSQL, j.Key, j.Queue, j.BusinessKey(), g.workerID, now.Add(g.LockTTL), now).
		Scan(&found, &newFence)
	if err != nil {
		return 0, 0, fmt.Errorf("jobs: claim %s: %w", j.Key, err)
	}
	*before = models.JobStatus(found.String)
	if newFence.Valid {
		g.startAttempt(ctx, j.Key, newFence.Int64, now)
		return newFence.Int64, claimed, nil
	}
	// Not claimed: the row as it is now, which the statement's snapshot
	// may not have seen (a run that committed meanwhile), says why.
	var row models.JobExecution
	if err := g.db.WithContext(ctx).Select("status").Take(&row, "idempotency_key = ?", j.Key).Error; err != nil {
		return 0, 0, fmt.Errorf("jobs: claim %s: %w", j.Key, err)
	}
	switch row.Status {
	case models.JobSucceeded:
		return 0, claimDone, nil
	case models.JobDiscarded:
		return 0, claimDiscarded, nil
	}
	return 0, claimLeased, nil
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
// The run's attempt row ends with its outcome and error either way.
func (g *Guard) fail(key string, fence int64, outcome RunOutcome, cause error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg := models.Truncate(cause.Error(), 1000)
	now := g.now().UTC()
	err := g.db.WithContext(ctx).Model(&models.JobExecution{}).
		Where("idempotency_key = ? AND fence = ? AND status = ?", key, fence, models.JobProcessing).
		Updates(map[string]any{"status": models.JobFailed, "last_error": msg, "finished_at": now, "locked_until": nil}).Error
	if err == nil {
		err = endAttempt(g.db.WithContext(ctx), key, fence, now, outcome, msg)
	}
	if err != nil {
		log.Error("could not record the job failure", "error", err)
	}
}

// startAttempt writes the attempt row of the run that claimed fence, and
// deletes the job's attempts older than the newest maxAttempts, in one
// statement (guard_attempt.sql). It is a record for people: a failure to
// write it does not stop the run.
func (g *Guard) startAttempt(ctx context.Context, key string, fence int64, now time.Time) {
	if _, err := g.db.Statement.ConnPool.ExecContext(ctx, attemptSQL, key, fence, fence-maxAttempts, g.workerID, now); err != nil {
		g.log.WarnContext(ctx, "could not record the job attempt", "idempotency_key", key, "fence", fence, "error", err)
	}
}

// endAttempt ends the attempt row of the run that claimed fence.
func endAttempt(db *gorm.DB, key string, fence int64, now time.Time, outcome RunOutcome, msg string) error {
	return db.Model(&models.JobAttempt{}).
		Where("idempotency_key = ? AND fence = ? AND finished_at IS NULL", key, fence).
		Updates(map[string]any{"finished_at": now, "outcome": string(outcome), "error": models.Truncate(msg, 1000)}).Error
}

// holdsFence returns ErrFenced unless run j still holds its job's fence
// and the job is still processing: a Prepare step checks it before an
// effect outside the transaction (an email) that a newer run now owns.
func holdsFence(ctx context.Context, db *gorm.DB, j Job) (err error) {
	ctx, span := tracing.Start(ctx, "guard.fence_check", attribute.Int64("sekali.fence", j.Fence))
	defer func() { tracing.End(span, err) }()
	var n int64
	if err := db.WithContext(ctx).Model(&models.JobExecution{}).
		Where("idempotency_key = ? AND fence = ? AND status = ?", j.Key, j.Fence, models.JobProcessing).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return ErrFenced
	}
	return nil
}

func lockKey(key string) string { return "lock:" + key }

func hash(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
