package models

import (
	"encoding/json"
	"time"
)

// OutboxStatus is the state of an outbox row.
type OutboxStatus string

const (
	OutboxPending    OutboxStatus = "pending"
	OutboxDispatched OutboxStatus = "dispatched"
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
}

// Task types. A business task's id is its type plus the key of what it
// acts on, e.g. "invoice:generate:ORD-01H…".
const (
	TaskInvoiceGenerate = "invoice:generate"
	TaskEmailSend       = "email:send"
	TaskOrderExpire     = "order:expire"

	QueueDefault  = "default"
	QueueCritical = "critical"

	// EmailOrderPaid is the template of the payment confirmation email.
	EmailOrderPaid = "order_paid"
)

// OrderPayload is the payload of tasks that act on one order.
type OrderPayload struct {
	OrderID string `json:"order_id"`
}

// EmailPayload is the payload of email:send tasks.
type EmailPayload struct {
	Template string `json:"template"`
	OrderID  string `json:"order_id"`
}

// EmailKey is the idempotency key of one email: {template}:{order_id}.
func EmailKey(template, orderID string) string { return template + ":" + orderID }

// InvoiceTask returns the outbox row that issues orderID's invoice.
func InvoiceTask(orderID string, now time.Time) OutboxMessage {
	return newTask(TaskInvoiceGenerate, TaskInvoiceGenerate+":"+orderID, QueueCritical, now, OrderPayload{OrderID: orderID})
}

// EmailTask returns the outbox row that sends the template email for orderID.
func EmailTask(template, orderID string, now time.Time) OutboxMessage {
	return newTask(TaskEmailSend, TaskEmailSend+":"+EmailKey(template, orderID), QueueDefault, now,
		EmailPayload{Template: template, OrderID: orderID})
}

// ExpireTask returns the outbox row that expires orderID at expiresAt.
func ExpireTask(orderID string, expiresAt time.Time) OutboxMessage {
	return newTask(TaskOrderExpire, TaskOrderExpire+":"+orderID, QueueDefault, expiresAt, OrderPayload{OrderID: orderID})
}

func newTask(taskType, taskID, queue string, processAt time.Time, payload any) OutboxMessage {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err) // the payloads above are plain structs of strings
	}
	return OutboxMessage{
		TaskType:  taskType,
		Payload:   b,
		TaskID:    taskID,
		Queue:     queue,
		ProcessAt: processAt.UTC(),
		Status:    OutboxPending,
	}
}
