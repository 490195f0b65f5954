package models

import "time"

// Invoice is the one invoice of a paid order. Number is INV-YYYY-NNNNNN;
// Year and Sequence are its parts, gapless per year.
type Invoice struct {
	ID       int64     `json:"-"`
	OrderID  string    `json:"order_id"`
	Number   string    `json:"number"`
	Year     int       `json:"-"`
	Sequence int64     `json:"-"`
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	IssuedAt time.Time `json:"issued_at"`
}

// InvoiceCounter holds the last invoice sequence of a year.
type InvoiceCounter struct {
	Year int `gorm:"primaryKey;autoIncrement:false"`
	Last int64
}

// EmailStatus is the state of an outbound email.
type EmailStatus string

const (
	EmailPending EmailStatus = "pending"
	EmailSent    EmailStatus = "sent"
)

// OutboundEmail is the intent to send one email, keyed {template}:{order_id}.
type OutboundEmail struct {
	ID        int64
	Key       string
	MessageID string
	To        string `gorm:"column:to"`
	Subject   string
	Body      string
	Status    EmailStatus
	Attempts  int
	LastError string
	SentAt    *time.Time
	CreatedAt time.Time
}

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
