// Package jobview is what the admin console sees of the background jobs:
// the filter of its lists, a task as the queue holds it, and what a re-run
// or a dispatch did. The jobs package (which talks to the queue) returns
// these and the web package (which shows them) reads them; neither
// imports the other. Plain values, no I/O.
package jobview

import (
	"time"

	"github.com/sekali/sekali/models"
)

// QueuedTask is a task as the queue holds it: archived (it gave up),
// waiting for a retry, scheduled, pending, active or completed.
type QueuedTask struct {
	ID            string    `json:"id"`
	Queue         string    `json:"queue"`
	Type          string    `json:"type"`
	State         string    `json:"state"`
	Payload       string    `json:"payload"`
	MaxRetry      int       `json:"max_retry"`
	Retried       int       `json:"retried"`
	LastError     string    `json:"last_error"`
	LastFailedAt  time.Time `json:"last_failed_at"`
	NextProcessAt time.Time `json:"next_process_at"`
}

// Stuck is the status a Filter may ask for beyond models.JobStatus: a job
// processing past its lease.
const Stuck = "stuck"

// Filter selects job_executions rows and archived tasks.
type Filter struct {
	Status string // processing, succeeded, failed, discarded or stuck; "" for all
	Type   string // a task type (invoice:generate, email:send, order:expire, refund:send); "" for all
	Key    string // a prefix of the idempotency key, or an order id (the business key)
	Before int64  // keyset cursor: job_executions ids below it
	Limit  int
}

// RerunOutcome is what a re-run did.
type RerunOutcome string

const (
	// RerunAlreadyDone: the job succeeded before; nothing changed.
	RerunAlreadyDone RerunOutcome = "already_done"
	// RerunQueued: the queue's task (archived, or waiting for a retry) runs now.
	RerunQueued RerunOutcome = "queued"
	// RerunRedispatched: the queue had no task; its outbox row hands it over again.
	RerunRedispatched RerunOutcome = "redispatched"
	// RerunInFlight: the task is pending, running, or scheduled for its time already.
	RerunInFlight RerunOutcome = "in_flight"
)

// DispatchOutcome is what "dispatch now" did with an outbox row.
type DispatchOutcome string

const (
	// DispatchDone: the queue took the task.
	DispatchDone DispatchOutcome = "dispatched"
	// DispatchAlreadyQueued: the queue had a task with this id already.
	DispatchAlreadyQueued DispatchOutcome = "already_queued"
)

// Discard is an operator's request to give up on a job for good: which
// job, why, and who asks from where (the action log's actor and address).
type Discard struct {
	Key        string
	Reason     string
	Admin      string
	RemoteAddr string
}

// DiscardOutcome is what discarding one job of a bulk discard did.
type DiscardOutcome string

const (
	// DiscardDone: the job is discarded.
	DiscardDone DiscardOutcome = "discarded"
	// DiscardRefused: it left the states a discard leaves from meanwhile
	// (it ran again, succeeded, or is running).
	DiscardRefused DiscardOutcome = "refused"
)

// JobDetail is everything known of one business job, for its page: its
// row, its attempts (newest first, at most 50), its outbox row (nil when
// pruned) and the queue's task (nil when the queue has none; TaskError
// when the queue could not be asked).
type JobDetail struct {
	Job       models.JobExecution
	Attempts  []models.JobAttempt
	Outbox    *models.OutboxMessage
	Task      *QueuedTask
	TaskError string
}
