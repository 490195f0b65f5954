package models

import "time"

// OutboxStatus is the state of an outbox row.
type OutboxStatus string

const (
	OutboxPending    OutboxStatus = "pending"
	OutboxDispatched OutboxStatus = "dispatched"
	// OutboxDiscarded: its job was discarded; never handed over again.
	OutboxDiscarded OutboxStatus = "discarded"
)

// OutboxMessage is a task written in the same transaction as the state
// change that causes it. TaskID is the task's idempotency key: the queue
// refuses a second task with the same id, and the unique index refuses a
// second row.
type OutboxMessage struct {
	ID           int64
	TaskType     string
	Payload      []byte
	TaskID       string
	Queue        string
	ProcessAt    time.Time
	Status       OutboxStatus
	Attempts     int
	LastError    string
	CreatedAt    time.Time
	DispatchedAt *time.Time
	// Traceparent is the W3C trace context of the transaction that wrote
	// the row, handed on to its task; nil when tracing is off.
	Traceparent *string
}
