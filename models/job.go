package models

import "time"

// JobStatus is the state of a business job.
type JobStatus string

const (
	JobProcessing JobStatus = "processing"
	JobSucceeded  JobStatus = "succeeded"
	JobFailed     JobStatus = "failed"
	// JobDiscarded: an operator gave up on the job for good; no run
	// has its effect any more (docs/jobs.md#discarding-a-job).
	JobDiscarded JobStatus = "discarded"
)

// MaxDiscardReason bounds the reason an operator gives for a discard.
const MaxDiscardReason = 500

// JobExecution is the status row of one business job; IdempotencyKey is
// the task id. Fence is raised by every claim: only the worker holding
// the current fence can finish the job.
type JobExecution struct {
	ID             int64
	IdempotencyKey string
	QueueName      string
	ExternalJobID  string
	BusinessKey    string
	Status         JobStatus
	Attempts       int
	Fence          int64
	WorkerID       string
	LockedUntil    *time.Time
	StartedAt      time.Time
	FinishedAt     *time.Time
	LastError      string
	ResultHash     string
	// DiscardedAt, DiscardedBy and DiscardReason say who gave up on a
	// discarded job, when and why; empty for any other status.
	DiscardedAt   *time.Time
	DiscardedBy   string
	DiscardReason string
}

// JobAttempt is one run of a business job: one claim (its fence), from
// its start to its end (none while it runs), how it ended and its error.
type JobAttempt struct {
	ID             int64
	IdempotencyKey string
	Fence          int64
	WorkerID       string
	StartedAt      time.Time
	FinishedAt     *time.Time
	Outcome        string
	Error          string
}
