package jobs

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/models"
)

// Task types of maintenance work (business types are in models: they are
// written to the outbox by app/ packages, which do not import Asynq).
const (
	TaskSweepStuck   = "sweep:stuck"
	TaskSweepExpired = "sweep:expired"
	TaskPrune        = "prune"

	QueueMaintenance = "maintenance"
)

// Queues and their weights: invoices first, emails and expiry next,
// maintenance when there is room.
var Queues = map[string]int{models.QueueCritical: 6, models.QueueDefault: 3, QueueMaintenance: 1}

// taskPolicy is how a task type is run.
type taskPolicy struct {
	MaxRetry int
	Timeout  time.Duration
}

// policies per business type. MaxRetry is high: these jobs must happen
// eventually, and a retry of a job that is done costs one read.
var policies = map[string]taskPolicy{
	models.TaskInvoiceGenerate: {MaxRetry: 25, Timeout: time.Minute},
	models.TaskEmailSend:       {MaxRetry: 25, Timeout: 2 * time.Minute},
	models.TaskOrderExpire:     {MaxRetry: 25, Timeout: time.Minute},
}

// EnqueueOptions are the Asynq options of an outbox row: its task id as
// the Asynq TaskID (a second enqueue is refused), its queue and time, the
// type's retry and timeout policy, and a retention so the id stays taken
// after the task succeeds, for as long as providers may deliver again.
func EnqueueOptions(m models.OutboxMessage, retention time.Duration) []asynq.Option {
	p, ok := policies[m.TaskType]
	if !ok {
		p = taskPolicy{MaxRetry: 10, Timeout: time.Minute}
	}
	return []asynq.Option{
		asynq.TaskID(m.TaskID),
		asynq.Queue(m.Queue),
		asynq.ProcessAt(m.ProcessAt),
		asynq.MaxRetry(p.MaxRetry),
		asynq.Timeout(p.Timeout),
		asynq.Retention(retention),
	}
}

// NewTask turns an outbox row into the Asynq task it stands for.
func NewTask(m models.OutboxMessage, retention time.Duration) *asynq.Task {
	return asynq.NewTask(m.TaskType, m.Payload, EnqueueOptions(m, retention)...)
}

// orderPayload decodes the order id of a business task; a payload that
// cannot be decoded can never succeed, so it skips the retries.
func orderPayload(t *asynq.Task) (string, error) {
	var p models.OrderPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.OrderID == "" {
		return "", fmt.Errorf("decode %s: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	return p.OrderID, nil
}

// businessKey is what a task acts on, for logs and job_executions.
func businessKey(t *asynq.Task) string {
	var p struct {
		OrderID string `json:"order_id"`
	}
	if json.Unmarshal(t.Payload(), &p) == nil && p.OrderID != "" {
		return p.OrderID
	}
	return t.Type()
}
