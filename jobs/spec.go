package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/models"
)

// Spec is one job in one place: its task's type and queue, how often a
// failed run is retried and how long a run may take, whether it runs
// periodically, and how its handler is built. Each job's spec sits beside
// its handler (invoice.go, email.go, expire.go, refund.go,
// maintenance.go, reconcile.go); specs lists them, and the mux (NewMux), the relay's
// enqueue options (EnqueueOptions) and the schedule (Periodic) are
// all read from that list.
type Spec struct {
	// Task is the type and queue. For a business task it is its args'
	// Kind (InvoiceArgs{}.Kind()): the rows Tasks writes into the outbox
	// carry the same.
	Task     Kind
	MaxRetry int
	Timeout  time.Duration
	// Every makes the task periodic: the Scheduler enqueues it once per
	// period. Zero for tasks that come from the outbox.
	Every time.Duration
	// Guarded builds a business job's two parts from the worker's parts:
	// the guard runs them (Guard.Run), once in effect however often the
	// task is delivered. Handler builds the handler of a task that needs
	// no guard (the maintenance tasks, alert:send). A spec has one of the
	// two.
	Guarded func(Deps) (Prepare, Effect)
	Handler func(Deps) asynq.HandlerFunc
	// Discard, when set, is what discarding the job task id gives up on
	// beyond the job itself, in the discard's transaction (why says who
	// and why): a refund's record stops being sent. An error refuses the
	// discard.
	Discard func(tx *gorm.DB, taskID, why string) error
}

// specs is every job the worker runs, as Asynq's mux registers handlers:
// adding a job is a file with its args, spec and handler, and a line
// here. It is a function because the list refers to itself: the
// reconciler's handler enqueues, and enqueueing reads the specs.
func specs() []Spec {
	return []Spec{
		invoiceJob(),
		emailJob(),
		expireJob(),
		refundJob(),
		sweepStuckJob(),
		sweepExpiredJob(),
		pruneJob(),
		rollupJob(),
		reconcileJob(),
		pollPaymentsJob(),
		janitorJob(),
		alertJob(),
		watchJob(),
		catchUpJob(),
	}
}

// handler is the task's handler: its own, or its guarded parts behind
// d's guard.
func (s Spec) handler(d Deps) asynq.HandlerFunc {
	if s.Guarded != nil {
		return d.Guard.WrapPrepared(s.Guarded(d))
	}
	return s.Handler(d)
}

// RunGuarded runs outbox row m's job once, in this goroutine, through
// d.Guard: what a worker does with the task the relay hands it, without
// the queue — for a test that steps through the work in an order of its
// choosing. attempt is the run's number, 1 for the first. A task that is
// not a guarded job is an error.
func RunGuarded(ctx context.Context, d Deps, m models.OutboxMessage, attempt int) (RunOutcome, error) {
	s, ok := specOfTask(m.TaskID)
	if !ok || s.Guarded == nil || s.Task.Type != m.TaskType {
		return "", fmt.Errorf("jobs.RunGuarded: %s is not a guarded job", m.TaskID)
	}
	prepare, effect := s.Guarded(d)
	return d.Guard.Run(ctx, Job{Key: m.TaskID, Type: m.TaskType, Queue: m.Queue, Payload: m.Payload, Attempt: attempt}, prepare, effect)
}

// specOfTask is the spec of task id taskID ({type}:{key}).
func specOfTask(taskID string) (Spec, bool) {
	for _, s := range specs() {
		if strings.HasPrefix(taskID, s.Task.Type+":") {
			return s, true
		}
	}
	return Spec{}, false
}

// Deps are the parts handlers are built from; RunWorker builds them once.
type Deps struct {
	DB          *gorm.DB
	Now         func() time.Time
	Metrics     *metrics.Set
	Guard       *Guard
	Maintenance *Maintenance
	Reconciler  *Reconciler
	Orders      *orders.Service
	Refunds     RefundSender // nil in a worker that sends no refunds
	Mailer      mail.Mailer
	MailFrom    string
	Alerts      *alerts.Sender // delivers alert:send; its address may be empty (alerts are then recorded, not sent)
	Watch       *Watch
}

// QueueMaintenance is the queue of the periodic tasks (the business
// queues are in task.go).
const QueueMaintenance = "maintenance"

// QueueWeights are the queues and their weights: invoices and refunds
// first, emails and expiry next, maintenance when there is room.
func QueueWeights() map[string]int {
	return map[string]int{QueueCritical: 6, QueueDefault: 3, QueueMaintenance: 1}
}

// periodic is the spec of a maintenance task that runs every period on the
// maintenance queue, without the guard (each is a set of conditional
// statements that is harmless to run twice): three retries, and at most
// one period per run.
func periodic(taskType string, every time.Duration, handler func(Deps) asynq.HandlerFunc) Spec {
	return Spec{Task: Kind{Type: taskType, Queue: QueueMaintenance},
		MaxRetry: 3, Timeout: every, Every: every, Handler: handler}
}

// Schedule is Periodic() for a worker whose RECONCILE_AFTER is
// reconcileAfter: when that is shorter than the reconciler's minute, the
// reconciler looks that often, so a task Redis lost waits about
// RECONCILE_AFTER, not up to a minute more.
func Schedule(reconcileAfter time.Duration) []Spec {
	schedule := Periodic()
	for i, s := range schedule {
		if s.Task.Type == TaskReconcile && reconcileAfter >= time.Second && reconcileAfter < s.Every {
			schedule[i].Every, schedule[i].Timeout = reconcileAfter, reconcileAfter
		}
	}
	return schedule
}

// Periodic is the maintenance schedule: every spec that runs
// periodically.
func Periodic() []Spec {
	var p []Spec
	for _, s := range specs() {
		if s.Every > 0 {
			p = append(p, s)
		}
	}
	return p
}

// EnqueueOptions are the Asynq options of an outbox row: its task id as
// the Asynq TaskID (a second enqueue is refused), its queue and time, its
// spec's retries and timeout, and a retention so the id stays taken after
// the task succeeds, for as long as providers may deliver again.
func EnqueueOptions(m models.OutboxMessage, retention time.Duration) []asynq.Option {
	s := Spec{MaxRetry: 10, Timeout: time.Minute} // a type no spec knows
	for _, known := range specs() {
		if known.Task.Type == m.TaskType {
			s = known
			break
		}
	}
	return []asynq.Option{
		asynq.TaskID(m.TaskID),
		asynq.Queue(m.Queue),
		asynq.ProcessAt(m.ProcessAt),
		asynq.MaxRetry(s.MaxRetry),
		asynq.Timeout(s.Timeout),
		asynq.Retention(retention),
	}
}

// NewTask turns an outbox row into the Asynq task it stands for. The
// row's trace context rides in the task's headers (tracing.go).
func NewTask(m models.OutboxMessage, retention time.Duration) *asynq.Task {
	return asynq.NewTaskWithHeaders(m.TaskType, m.Payload, taskHeaders(m), EnqueueOptions(m, retention)...)
}

// skipIfGone makes "the order does not exist" a permanent failure.
func skipIfGone(err error) error {
	if models.ErrorCode(err) == models.ENotFound {
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return err
}
