package models

import "time"

// JobStatus is the state of a business job.
type JobStatus string

const (
	JobProcessing JobStatus = "processing"
	JobSucceeded  JobStatus = "succeeded"
	JobFailed     JobStatus = "failed"
)

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
}
