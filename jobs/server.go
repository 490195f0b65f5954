package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
)

// WorkerConfig is what a worker needs besides its connections.
type WorkerConfig struct {
	Concurrency int
	LockTTL     time.Duration
	WorkerID    string
	MailFrom    string
	PruneAfter  time.Duration
	// KeepBodiesFor is how long deliveries' bodies are kept
	// (DELIVERY_BODY_RETENTION); 0: none is, and any left are cleared.
	KeepBodiesFor time.Duration
	// ReconcileAfter is how long a dispatched task may be missing from
	// the queue before it is dispatched again (RECONCILE_AFTER).
	ReconcileAfter time.Duration
	// TaskRetention is the retention of re-dispatched tasks (TASK_RETENTION).
	TaskRetention time.Duration
	// PollPayments asks the gateways about orders whose notification has
	// not come (the payments:poll task); nil when none can be asked.
	PollPayments func(ctx context.Context) (applied int, err error)
	// CatchUp asks the gateways what Sekali missed (payments:catch-up,
	// scheduled with CATCH_UP_EVERY, or asked by an admin: askedBy);
	// nil when it cannot.
	CatchUp func(ctx context.Context, askedBy string) error
	// AskUnknown asks the gateways again about the calls whose outcome
	// is unknown (gateway:janitor); nil when it cannot.
	AskUnknown func(ctx context.Context) (asked int, err error)
	// Refunds sends the refunds admins ask for (refund:send); nil in a
	// worker that cannot.
	Refunds RefundSender
	// AlertWebhookURL is where alerts are POSTed, signed with
	// AlertWebhookKey (ALERT_WEBHOOK_URL, ALERT_WEBHOOK_SECRET); empty:
	// alerts are recorded and shown, not sent.
	AlertWebhookURL string
	AlertWebhookKey []byte
	// ShutdownTimeout is how long running jobs get to finish on stop;
	// unfinished ones are handed back to the queue.
	ShutdownTimeout time.Duration
	// Tracer traces each task, joining the trace its row carried; nil:
	// none is traced.
	Tracer trace.TracerProvider
}

// NewMux routes every task type to the handler its spec builds from d.
func NewMux(d Deps) *asynq.ServeMux {
	mux := asynq.NewServeMux()
	for _, s := range specs() {
		mux.Handle(s.Task.Type, s.handler(d))
	}
	return mux
}

// RunWorker processes tasks until ctx ends, then stops taking new ones
// and waits for the running ones (up to ShutdownTimeout).
func RunWorker(ctx context.Context, db *gorm.DB, rdb redis.UniversalClient, log *slog.Logger,
	o *orders.Service, mailer mail.Mailer, m *metrics.Set, cfg WorkerConfig) error {
	guard := NewGuard(db, rdb, log, cfg.WorkerID, cfg.LockTTL, m)
	reconciler := NewReconciler(db, asynq.NewClientFromRedisClient(rdb), log,
		cfg.TaskRetention, cfg.ReconcileAfter, m)
	maintenance := NewMaintenance(db, o, log, cfg.PruneAfter, m)
	maintenance.Poll = cfg.PollPayments
	maintenance.CatchUpRun = cfg.CatchUp
	maintenance.AskUnknown = cfg.AskUnknown
	maintenance.KeepBodiesFor = cfg.KeepBodiesFor
	mux := NewMux(Deps{
		DB:          db,
		Now:         time.Now,
		Metrics:     m,
		Guard:       guard,
		Maintenance: maintenance,
		Reconciler:  reconciler,
		Orders:      o,
		Refunds:     cfg.Refunds,
		Mailer:      mailer,
		MailFrom:    cfg.MailFrom,
		Alerts:      alerts.NewSender(db, cfg.AlertWebhookURL, cfg.AlertWebhookKey, time.Now),
		Watch:       NewWatch(db, asynq.NewInspectorFromRedisClient(rdb), log, time.Now),
	})
	if cfg.Tracer != nil {
		mux.Use(traceTasks(cfg.Tracer))
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              cfg.Concurrency,
		Queues:                   QueueWeights(),
		RetryDelayFunc:           RetryDelay,
		Logger:                   slogAdapter{log: log.With("component", "asynq")},
		LogLevel:                 asynq.WarnLevel,
		ShutdownTimeout:          cfg.ShutdownTimeout,
		DelayedTaskCheckInterval: time.Second,            // retries come back within a second of their time
		TaskCheckInterval:        100 * time.Millisecond, // an idle worker notices new work quickly
		IsFailure: func(err error) bool {
			return !errors.Is(err, ErrLockBusy) // another worker has it: not a failure of the task
		},
	})
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("jobs: start worker: %w", err)
	}
	log.Info("worker started", "worker_id", cfg.WorkerID, "concurrency", cfg.Concurrency)
	<-ctx.Done()
	srv.Shutdown()
	return nil
}

// RetryDelay decides when a failed task runs again: soon after a lost
// lease or a busy lock (the job itself is fine), otherwise exponentially
// with jitter, capped at ten minutes.
func RetryDelay(n int, err error, _ *asynq.Task) time.Duration {
	if errors.Is(err, asynq.ErrLeaseExpired) || errors.Is(err, ErrLockBusy) || errors.Is(err, ErrFenced) {
		return time.Second
	}
	d := time.Second << min(n, 10)
	return min(d, 10*time.Minute) + time.Duration(rand.Int64N(int64(time.Second)))
}

// slogAdapter lets Asynq log through slog.
type slogAdapter struct{ log *slog.Logger }

func (a slogAdapter) Debug(args ...any) { a.log.Debug(fmt.Sprint(args...)) }
func (a slogAdapter) Info(args ...any)  { a.log.Info(fmt.Sprint(args...)) }
func (a slogAdapter) Warn(args ...any)  { a.log.Warn(fmt.Sprint(args...)) }
func (a slogAdapter) Error(args ...any) { a.log.Error(fmt.Sprint(args...)) }
func (a slogAdapter) Fatal(args ...any) { a.log.Error(fmt.Sprint(args...)); os.Exit(1) } // Asynq's contract
