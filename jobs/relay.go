package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/models"
)

// enqueuer is the part of the Asynq client the relay needs.
type enqueuer interface {
	EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error)
}

// Relay moves due outbox rows to Asynq. Several relays may run at once:
// each claims its batch with FOR UPDATE SKIP LOCKED. A row is marked
// dispatched in the same transaction that claimed it, after Asynq took the
// task (or already had its id); a Redis error leaves it pending with the
// error, and the relay backs off. Redis being down delays jobs, never
// loses them.
type Relay struct {
	db        *gorm.DB
	queue     enqueuer
	log       *slog.Logger
	retention time.Duration
	listenURL string
	metrics   *metrics.Set

	// Batch is how many rows one transaction claims.
	Batch int
	// Poll is how often the relay looks when nothing woke it: rows that
	// become due (process_at) and notifications that were missed.
	Poll time.Duration
	// MaxBackoff bounds the pause after a failure.
	MaxBackoff time.Duration
	// Tracer traces each hand-over of a row that carries a trace
	// context; nil: none is traced.
	Tracer trace.TracerProvider
}

// NewRelay returns a relay. listenURL is the database URL for LISTEN
// (wake-up on insert); empty disables it and the relay only polls. It
// counts what it hands over, and its failures, into m.
func NewRelay(db *gorm.DB, queue enqueuer, log *slog.Logger, retention time.Duration, listenURL string, m *metrics.Set) *Relay {
	return &Relay{db: db, queue: queue, log: log, retention: retention, listenURL: listenURL, metrics: m,
		Batch: 100, Poll: time.Second, MaxBackoff: 30 * time.Second}
}

// Run relays until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	if r.listenURL != "" {
		go r.listen(ctx, wake)
	}
	backoff := time.Duration(0)
	for {
		n, err := r.RelayOnce(ctx)
		wait := r.Poll
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			backoff = min(max(2*backoff, 100*time.Millisecond), r.MaxBackoff)
			wait = backoff
			r.log.Warn("outbox relay: will retry", "error", err, "backoff", backoff.String())
		case n == r.Batch:
			backoff = 0
			continue // more may be waiting
		default:
			backoff = 0
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-wake:
			if err != nil { // a notification does not cut a backoff short
				select {
				case <-ctx.Done():
					timer.Stop()
					return nil
				case <-timer.C:
				}
			}
		case <-timer.C:
		}
		timer.Stop()
	}
}

// RelayOnce claims one batch of due rows, hands them to Asynq and records
// the outcome. It returns how many rows it dispatched.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	var dispatched int
	var queueErr error
	var done []models.OutboxMessage
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		dispatched, queueErr, done = 0, nil, nil
		msgs, err := outbox.ClaimBatch(tx, r.Batch)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if _, err := r.dispatch(ctx, m); err != nil {
				queueErr = err
				if err := outbox.MarkFailed(tx, m.ID, queueErr.Error()); err != nil {
					return err
				}
				break // the queue is likely down: leave the rest for the next try
			}
			done = append(done, m)
		}
		dispatched = len(done)
		ids := make([]int64, len(done))
		for i, m := range done {
			ids[i] = m.ID
		}
		return outbox.MarkDispatched(tx, ids)
	})
	if err != nil {
		return 0, fmt.Errorf("outbox relay: %w", err)
	}
	for _, m := range done { // counted once committed
		r.metrics.OutboxDispatched.WithLabelValues(m.TaskType).Inc()
	}
	return dispatched, queueErr
}

// dispatch is enqueue in a span of the trace row m carries, when it
// carries one and the relay traces: the task's headers then name the
// span, so the worker's spans are its children.
func (r *Relay) dispatch(ctx context.Context, m models.OutboxMessage) (alreadyQueued bool, err error) {
	if r.Tracer == nil || m.Traceparent == nil {
		return enqueue(ctx, r.queue, m, r.retention, r.metrics.OutboxErrors)
	}
	ctx, span := r.Tracer.Tracer(tracing.Scope).Start(tracing.Join(ctx, *m.Traceparent), "outbox.dispatch "+m.TaskType,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("sekali.task_id", m.TaskID), attribute.Int64("sekali.outbox_id", m.ID)))
	tp := tracing.Traceparent(ctx)
	m.Traceparent = &tp
	alreadyQueued, err = enqueue(ctx, r.queue, m, r.retention, r.metrics.OutboxErrors)
	span.SetAttributes(attribute.Bool("sekali.already_queued", alreadyQueued))
	tracing.End(span, err)
	return alreadyQueued, err
}

// enqueue hands the task of outbox row m to the queue. A task id the
// queue already has (ErrTaskIDConflict: a relay that died before marking
// the row, or a row dispatched again by hand) counts as handed over;
// alreadyQueued says so; a failure counts in errs. The relay, the
// reconciler and Console.DispatchNow all use it, so a row is handed over
// one way.
func enqueue(ctx context.Context, q enqueuer, m models.OutboxMessage, retention time.Duration, errs prometheus.Counter) (alreadyQueued bool, err error) {
	_, err = q.EnqueueContext(ctx, NewTask(m, retention))
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return true, nil
	case err != nil:
		errs.Inc()
		return false, fmt.Errorf("enqueue %s: %w", m.TaskID, err)
	}
	return false, nil
}

// listen wakes the relay on NOTIFY outbox_messages (sent after a commit
// that wrote tasks: outbox.Notify, outbox.Notifier), reconnecting after
// errors.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("outbox relay: LISTEN failed; polling until it reconnects", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	conn, err := pgx.Connect(ctx, r.listenURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN outbox_messages"); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		select {
		case wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}
