package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Bounds of the console's queue reads. Asynq lists a queue's archive a page
// at a time, so a filter that matches little reads many pages; these keep a
// request's work bounded.
const (
	// maxArchived is the most archived tasks one list shows.
	maxArchived = store.MaxPageSize
	// maxRerun is the most jobs one "re-run every failed job" touches.
	maxRerun = 1000
	// archivePage is how many archived tasks one read from Redis takes.
	archivePage = 500
	// rerunAttempts bounds how often Rerun looks again at a task whose
	// state changed between its look and its action.
	rerunAttempts = 3
)

// errMoved: the task left the state Rerun saw before it could act on it
// (another re-run, a worker, Asynq's own retry); Rerun looks again.
var errMoved = errors.New("jobs: the task changed state meanwhile")

// Console is what the admin console does with jobs: it lists them, shows
// what the queue holds and runs them again. A re-run never runs an effect
// itself: it hands the job back to the queue, under its own task id, and
// the guard decides as for any delivery — so a re-run of a job that is
// done, or many re-runs at once, still make the effect happen once.
type Console struct {
	db        *gorm.DB
	insp      *asynq.Inspector
	queue     enqueuer
	retention time.Duration
	metrics   *metrics.Set
}

// NewConsole returns the console's jobs; retention is the relay's
// (TASK_RETENTION), so a task dispatched by hand keeps its id as long.
// What it hands to the queue counts in m, as the relay's does.
func NewConsole(db *gorm.DB, inspector *asynq.Inspector, queue enqueuer, retention time.Duration, m *metrics.Set) *Console {
	return &Console{db: db, insp: inspector, queue: queue, retention: retention, metrics: m}
}

// List returns a page of job_executions rows matching f, newest first, and
// the cursor of the next page (0 when it is the last).
func (c *Console) List(ctx context.Context, f jobview.Filter) (rows []models.JobExecution, next int64, err error) {
	q := c.db.WithContext(ctx).Model(&models.JobExecution{})
	switch f.Status {
	case "":
	case jobview.Stuck: // what sweep:stuck will mark failed
		q = q.Where("status = ? AND locked_until < now()", models.JobProcessing)
	case string(models.JobProcessing), string(models.JobSucceeded), string(models.JobFailed), string(models.JobDiscarded):
		q = q.Where("status = ?", f.Status)
	default:
		return nil, 0, fmt.Errorf("jobs.Console.List: %w", models.Errorf(models.EInvalid, "unknown job status %q", f.Status))
	}
	next, err = store.Keyset(filterJobs(q, f), f.Before, f.Limit, &rows, func(j models.JobExecution) int64 { return j.ID })
	if err != nil {
		return nil, 0, fmt.Errorf("jobs.Console.List: %w", err)
	}
	return rows, next, nil
}

// filterJobs applies f's type and key to a job_executions query. Both are
// prefixes of the idempotency key, which its text_pattern_ops index serves;
// an order id also matches the business key.
func filterJobs(q *gorm.DB, f jobview.Filter) *gorm.DB {
	if f.Type != "" {
		q = q.Where("idempotency_key LIKE ?", store.LikePrefix(f.Type+":"))
	}
	if f.Key != "" {
		q = q.Where("(idempotency_key LIKE ? OR business_key = ?)", store.LikePrefix(f.Key), f.Key)
	}
	return q
}

// Archived returns the tasks the queue gave up on that match f's type and
// key, newest failure first: at most f.Limit, and never more than 200.
func (c *Console) Archived(ctx context.Context, f jobview.Filter) ([]jobview.QueuedTask, error) {
	limit := maxArchived
	if f.Limit > 0 {
		limit = min(f.Limit, maxArchived)
	}
	infos, err := c.archived(ctx, f, limit)
	if err != nil {
		return nil, fmt.Errorf("jobs.Console.Archived: %w", err)
	}
	tasks := make([]jobview.QueuedTask, len(infos))
	for i, t := range infos {
		tasks[i] = queuedTask(t)
	}
	return tasks, nil
}

// archived reads, queue by queue, the archived tasks matching f until it
// has limit of them or the archive ends. Each queue's archive comes newest
// failure first, so the first limit of each, merged, are the newest of all.
func (c *Console) archived(ctx context.Context, f jobview.Filter, limit int) ([]*asynq.TaskInfo, error) {
	var found []*asynq.TaskInfo
	for _, q := range queueNames() {
		matched := 0
	pages:
		for page := 1; ; page++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			tasks, err := c.insp.ListArchivedTasks(q, asynq.PageSize(archivePage), asynq.Page(page))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				break // nothing was ever enqueued into it
			}
			if err != nil {
				return nil, err
			}
			for _, t := range tasks {
				if !archivedMatches(t, f) {
					continue
				}
				found = append(found, t)
				if matched++; matched == limit {
					break pages
				}
			}
			if len(tasks) < archivePage {
				break
			}
		}
	}
	slices.SortStableFunc(found, func(a, b *asynq.TaskInfo) int {
		return cmp.Or(b.LastFailedAt.Compare(a.LastFailedAt), strings.Compare(a.ID, b.ID))
	})
	return found[:min(len(found), limit)], nil
}

// archivedMatches applies f to an archived task as filterJobs does to job
// rows: the type exactly, the key as a prefix of the id or as the order id.
func archivedMatches(t *asynq.TaskInfo, f jobview.Filter) bool {
	if f.Type != "" && t.Type != f.Type {
		return false
	}
	if f.Key == "" || strings.HasPrefix(t.ID, f.Key) {
		return true
	}
	var p struct {
		OrderID string `json:"order_id"`
	}
	return json.Unmarshal(t.Payload, &p) == nil && p.OrderID == f.Key
}

// ArchivedCount is how many tasks the queues gave up on: a counter Redis
// keeps per queue, so the dashboard can show it on every refresh.
func (c *Console) ArchivedCount(ctx context.Context) (int, error) {
	existing, err := c.insp.Queues()
	if err != nil {
		return 0, fmt.Errorf("jobs.Console.ArchivedCount: %w", err)
	}
	n := 0
	for _, q := range queueNames() {
		if !slices.Contains(existing, q) {
			continue // nothing was ever enqueued into it; GetQueueInfo would fail
		}
		info, err := c.insp.GetQueueInfo(q)
		if err != nil {
			return 0, fmt.Errorf("jobs.Console.ArchivedCount: %w", err)
		}
		n += info.Archived
	}
	return n, nil
}

// TaskState is the queue's state of the task whose id is key (pending,
// active, scheduled, retry, archived, completed, aggregating), or "" when
// no queue has it.
func (c *Console) TaskState(ctx context.Context, key string) (string, error) {
	k, err := known(c.db.WithContext(ctx), key)
	if err != nil {
		return "", fmt.Errorf("jobs.Console.TaskState: %w", err)
	}
	info, err := c.find(key, k.JobQueue, k.OutboxQueue)
	if err != nil {
		return "", fmt.Errorf("jobs.Console.TaskState: %w", err)
	}
	if info == nil {
		return "", nil
	}
	return info.State.String(), nil
}

// Rerun runs the job whose task id is key again, through the queue and the
// guard:
//
//   - a job that succeeded is left alone (RerunAlreadyDone);
//   - a task the queue gave up on or waits to retry runs now (RerunQueued);
//   - a task that is pending, running or scheduled for later is left to
//     the queue (RerunInFlight);
//   - a task the queue no longer has (Redis lost it, or its retention
//     ended) goes back through its outbox row, rebuilt from the key if it
//     was pruned, and the relay hands it over again (RerunRedispatched).
//
// A key that names nothing Rerun can run is an ENotFound error.
func (c *Console) Rerun(ctx context.Context, key string) (jobview.RerunOutcome, error) {
	outcome, err := c.rerun(ctx, key)
	if err != nil {
		return "", fmt.Errorf("jobs.Console.Rerun: %w", err)
	}
	return outcome, nil
}

// rerun is Rerun, looking again while the task moves under it.
func (c *Console) rerun(ctx context.Context, key string) (jobview.RerunOutcome, error) {
	for attempt := 1; ; attempt++ {
		outcome, err := c.rerunOnce(ctx, key)
		if !errors.Is(err, errMoved) || attempt == rerunAttempts {
			return outcome, err
		}
	}
}

// rerunOnce looks and acts with the job row locked, so that a discard of
// the same job waits for it and then sees what it did (and a re-run
// waits for a discard): of the two, one wins.
func (c *Console) rerunOnce(ctx context.Context, key string) (outcome jobview.RerunOutcome, err error) {
	err = c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SELECT 1 FROM job_executions WHERE idempotency_key = ? FOR UPDATE", key).Error; err != nil {
			return err
		}
		outcome, err = c.rerunLocked(tx, key)
		return err
	})
	return outcome, store.Classify(err)
}

func (c *Console) rerunLocked(tx *gorm.DB, key string) (jobview.RerunOutcome, error) {
	k, err := known(tx, key)
	if err != nil {
		return "", err
	}
	switch k.JobStatus {
	case string(models.JobSucceeded):
		return jobview.RerunAlreadyDone, nil
	case string(models.JobDiscarded):
		return "", models.Errorf(models.EInvalidTransition, "job %s was discarded; a discarded job does not run again", key)
	}
	info, err := c.find(key, k.JobQueue, k.OutboxQueue)
	if err != nil {
		return "", err
	}
	if info == nil {
		return c.redispatch(tx, key, nil)
	}
	switch info.State {
	case asynq.TaskStateArchived, asynq.TaskStateRetry:
		if err := c.insp.RunTask(info.Queue, key); err != nil {
			if again, lookErr := c.insp.GetTaskInfo(info.Queue, key); lookErr == nil && again.State == info.State {
				return "", fmt.Errorf("run %s in %s: %w", key, info.Queue, err)
			}
			// Another re-run, a worker or Asynq itself moved it first.
			return "", fmt.Errorf("%w: run %s in %s: %w", errMoved, key, info.Queue, err)
		}
		return jobview.RerunQueued, nil
	case asynq.TaskStateCompleted:
		if k.JobStatus == "" {
			// Asynq completes a task only once its handler returned nil,
			// and the guard returns nil only for a job that succeeded:
			// this one's row has been pruned since.
			return jobview.RerunAlreadyDone, nil
		}
		return c.redispatch(tx, key, info)
	default:
		// Pending, active or aggregating: it runs already. Scheduled: it
		// runs at its time, which for an order's expiry is expires_at;
		// running it now would expire a pending order early.
		return jobview.RerunInFlight, nil
	}
}

// redispatch hands the job back to the relay: its outbox row becomes
// pending and due (a scheduled one keeps its later time), or, if the row was
// pruned, a new one is built from the key. completed, when not nil, is the
// queue's finished task of the same id, deleted first so the relay's
// enqueue is not refused as a duplicate.
func (c *Console) redispatch(tx *gorm.DB, key string, completed *asynq.TaskInfo) (jobview.RerunOutcome, error) {
	outcome := jobview.RerunRedispatched
	err := tx.Transaction(func(tx *gorm.DB) error {
		// The job may have succeeded since it was read: then a new task
		// would only be acked as a duplicate.
		var done int64
		err := tx.Model(&models.JobExecution{}).
			Where("idempotency_key = ? AND status = ?", key, models.JobSucceeded).Count(&done).Error
		if err != nil {
			return err
		}
		if done > 0 {
			outcome = jobview.RerunAlreadyDone
			return nil
		}
		if completed != nil {
			err := c.insp.DeleteTask(completed.Queue, key)
			if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
				// It is running again (another re-run): look again.
				return fmt.Errorf("%w: delete %s from %s: %w", errMoved, key, completed.Queue, err)
			}
		}
		res := tx.Model(&models.OutboxMessage{}).Where("task_id = ?", key).
			Updates(map[string]any{"status": models.OutboxPending, "process_at": gorm.Expr("least(process_at, now())")})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected > 0 {
			return nil
		}
		m, err := rebuildTask(tx, key)
		if err != nil {
			return err
		}
		return outbox.Add(tx, m)
	})
	if err != nil {
		return "", store.Classify(err)
	}
	return outcome, nil
}

// rebuildTask builds the outbox row of a business task from its id, for a
// job whose row was pruned: invoice:generate:{order},
// email:send:{template}:{order} of the templates about the order alone
// (order_paid, order_cancelled, order_expired) or order:expire:{order},
// of an order that exists. An expiry keeps the order's expires_at. An
// email rebuilt still tells only what is true when it runs.
func rebuildTask(tx *gorm.DB, key string) (models.OutboxMessage, error) {
	notFound := models.Errorf(models.ENotFound, "no job, queued task or outbox row %q, and it names no task to rebuild", key)
	taskType, orderID := "", ""
	for _, t := range []string{TaskInvoiceGenerate, TaskOrderExpire, TaskEmailSend + ":" + mail.OrderPaid,
		TaskEmailSend + ":" + mail.OrderCancelled, TaskEmailSend + ":" + mail.OrderExpired} {
		if id, ok := strings.CutPrefix(key, t+":"); ok && id != "" {
			taskType, orderID = t, id
		}
	}
	if taskType == "" {
		return models.OutboxMessage{}, notFound
	}
	var o models.Order
	err := tx.Select("id", "expires_at").Take(&o, "id = ?", orderID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return models.OutboxMessage{}, notFound
	}
	if err != nil {
		return models.OutboxMessage{}, err
	}
	switch taskType {
	case TaskInvoiceGenerate:
		return Row(InvoiceArgs{OrderID: orderID}, time.Now()), nil
	case TaskOrderExpire:
		return Row(ExpireArgs{OrderID: orderID}, o.ExpiresAt), nil
	default:
		template := strings.TrimPrefix(taskType, TaskEmailSend+":")
		return Row(EmailArgs{Template: template, OrderID: orderID}, time.Now()), nil
	}
}

// TaskTypes are the types of the business tasks — the ones behind the
// guard, with a job row each — for the console's filters.
func (c *Console) TaskTypes() []string {
	var types []string
	for _, s := range specs() {
		if s.Every == 0 && s.Task.Queue != QueueMaintenance { // the catch-up is maintenance, scheduled only when set
			types = append(types, s.Task.Type)
		}
	}
	return types
}

// Rerunnable returns the keys that "re-run every failed job" would re-run
// for f: the failed jobs (whatever f.Status says), then the archived tasks,
// maintenance ones included, that are not among them; at most 1000.
func (c *Console) Rerunnable(ctx context.Context, f jobview.Filter) ([]string, error) {
	var keys []string
	err := filterJobs(c.db.WithContext(ctx).Model(&models.JobExecution{}).Where("status = ?", models.JobFailed), f).
		Order("id DESC").Limit(maxRerun).Pluck("idempotency_key", &keys).Error
	if err != nil {
		return nil, fmt.Errorf("jobs.Console.Rerunnable: %w", store.Classify(err))
	}
	archived, err := c.archived(ctx, f, maxRerun)
	if err != nil {
		return nil, fmt.Errorf("jobs.Console.Rerunnable: %w", err)
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		seen[k] = true
	}
	for _, t := range archived {
		if len(keys) == maxRerun {
			break
		}
		if !seen[t.ID] {
			seen[t.ID] = true
			keys = append(keys, t.ID)
		}
	}
	return keys, nil
}

// AnyFailed reports whether a failed job matches f's type and key: the
// console offers to re-run them only then.
func (c *Console) AnyFailed(ctx context.Context, f jobview.Filter) (bool, error) {
	var found []int64
	err := filterJobs(c.db.WithContext(ctx).Model(&models.JobExecution{}).Where("status = ?", models.JobFailed), f).
		Limit(1).Pluck("id", &found).Error
	if err != nil {
		return false, fmt.Errorf("jobs.Console.AnyFailed: %w", store.Classify(err))
	}
	return len(found) > 0, nil
}

// RerunAll re-runs every key of Rerunnable(f) and counts the outcomes. A
// key that fails does not stop the others; the errors come back joined.
func (c *Console) RerunAll(ctx context.Context, f jobview.Filter) (map[jobview.RerunOutcome]int, error) {
	keys, err := c.Rerunnable(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("jobs.Console.RerunAll: %w", err)
	}
	counts := map[jobview.RerunOutcome]int{}
	var errs []error
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		outcome, err := c.rerun(ctx, key)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		counts[outcome]++
	}
	if err := errors.Join(errs...); err != nil {
		return counts, fmt.Errorf("jobs.Console.RerunAll: %w", err)
	}
	return counts, nil
}

// DispatchNow hands outbox row outboxID to the queue now, as the relay
// would, whether it is pending or was dispatched already (Redis may have
// lost the task). A row that is not due yet is refused: until its time
// it is safest in PostgreSQL, and the relay hands it over then. The row
// is locked meanwhile, so a relay waits for it; on a queue error nothing
// is written and the error is returned.
func (c *Console) DispatchNow(ctx context.Context, outboxID int64) (jobview.DispatchOutcome, error) {
	var m models.OutboxMessage
	var outcome jobview.DispatchOutcome
	err := c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&m, "id = ?", outboxID).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return models.Errorf(models.ENotFound, "no outbox row %d", outboxID)
		}
		if err != nil {
			return err
		}
		if m.Status == models.OutboxDiscarded {
			return models.Errorf(models.EInvalidTransition, "task %s was discarded; it is not handed to the queue again", m.TaskID)
		}
		if m.Status == models.OutboxPending && m.ProcessAt.After(time.Now()) {
			return models.Errorf(models.EInvalidTransition, "task %s is not due until %s; the relay hands it over then",
				m.TaskID, m.ProcessAt.UTC().Format(time.RFC3339))
		}
		alreadyQueued, err := enqueue(ctx, c.queue, m, c.retention, c.metrics.OutboxErrors)
		if err != nil {
			return err // rolled back: the row stays as it was
		}
		outcome = jobview.DispatchDone
		if alreadyQueued {
			outcome = jobview.DispatchAlreadyQueued
		}
		return outbox.MarkDispatched(tx, []int64{m.ID})
	})
	if err != nil {
		return "", fmt.Errorf("jobs.Console.DispatchNow: %w", store.Classify(err))
	}
	if m.Status == models.OutboxPending { // counted as the relay counts: once per row
		c.metrics.OutboxDispatched.WithLabelValues(m.TaskType).Inc()
	}
	return outcome, nil
}

// knownTask is what the database knows of a task id: its job row's status
// and queue, its outbox row's queue; empty where there is no such row.
type knownTask struct {
	JobStatus   string
	JobQueue    string
	OutboxQueue string
}

func known(db *gorm.DB, key string) (knownTask, error) {
	var k knownTask
	err := db.Raw(`SELECT coalesce(j.status, '') AS job_status, coalesce(j.queue_name, '') AS job_queue,
			coalesce(o.queue, '') AS outbox_queue
		FROM (SELECT ?::text AS key) k
		LEFT JOIN job_executions j ON j.idempotency_key = k.key
		LEFT JOIN outbox_messages o ON o.task_id = k.key`, key).Scan(&k).Error
	if err != nil {
		return knownTask{}, store.Classify(err)
	}
	return k, nil
}

// find looks for task id key in the queues named first, then in every
// queue of QueueWeights; nil when none has it.
func (c *Console) find(key string, named ...string) (*asynq.TaskInfo, error) {
	tried := map[string]bool{"": true}
	for _, q := range append(named, queueNames()...) {
		if tried[q] {
			continue
		}
		tried[q] = true
		info, err := c.insp.GetTaskInfo(q, key)
		switch {
		case errors.Is(err, asynq.ErrQueueNotFound), errors.Is(err, asynq.ErrTaskNotFound):
			continue
		case err != nil:
			return nil, err
		}
		return info, nil
	}
	return nil, nil
}

// queueNames are the names of the queues, in a stable order.
func queueNames() []string { return slices.Sorted(maps.Keys(QueueWeights())) }

func queuedTask(t *asynq.TaskInfo) jobview.QueuedTask {
	return jobview.QueuedTask{
		ID: t.ID, Queue: t.Queue, Type: t.Type, State: t.State.String(), Payload: string(t.Payload),
		MaxRetry: t.MaxRetry, Retried: t.Retried, LastError: t.LastErr,
		LastFailedAt: t.LastFailedAt, NextProcessAt: t.NextProcessAt,
	}
}

// Job returns what is known of the job whose task id is key: its row,
// its attempts, its outbox row and the queue's task. A key with no job
// row is ENotFound. The queue being away does not fail it: TaskError says
// so, and the rest comes from PostgreSQL.
func (c *Console) Job(ctx context.Context, key string) (jobview.JobDetail, error) {
	var d jobview.JobDetail
	db := c.db.WithContext(ctx)
	err := db.Take(&d.Job, "idempotency_key = ?", key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return d, fmt.Errorf("jobs.Console.Job: %w", models.Errorf(models.ENotFound, "no job %q", key))
	}
	if err != nil {
		return d, fmt.Errorf("jobs.Console.Job: %w", store.Classify(err))
	}
	if err := db.Where("idempotency_key = ?", key).Order("fence DESC").Limit(maxAttempts).Find(&d.Attempts).Error; err != nil {
		return d, fmt.Errorf("jobs.Console.Job: %w", store.Classify(err))
	}
	var m []models.OutboxMessage
	if err := db.Where("task_id = ?", key).Limit(1).Find(&m).Error; err != nil {
		return d, fmt.Errorf("jobs.Console.Job: %w", store.Classify(err))
	}
	outboxQueue := ""
	if len(m) == 1 {
		d.Outbox, outboxQueue = &m[0], m[0].Queue
	}
	info, err := c.find(key, d.Job.QueueName, outboxQueue)
	switch {
	case err != nil:
		d.TaskError = err.Error()
	case info != nil:
		t := queuedTask(info)
		d.Task = &t
	}
	return d, nil
}
