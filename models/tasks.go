package models

import (
	"encoding/json"
	"time"
)

// The business tasks, as app/ packages write them into the outbox in the
// transaction of the state change that causes them. This is the half of a
// job those packages need — its type, queue, payload and task id — and it
// lives here because they do not import Asynq. The other half, how it runs
// (retries, timeout, handler), is the job's spec beside its effect in
// jobs/ (jobs/invoice.go, jobs/email.go, jobs/expire.go), and that spec
// holds the same TaskKind, so writer and worker cannot disagree.

// TaskKind is a kind of task: its Asynq type and the queue it runs on.
type TaskKind struct {
	Type  string
	Queue string
}

// ID is the id of the task of kind k that acts on key — its type, a colon
// and the key: "invoice:generate:ORD-01H…". The queue refuses a second task
// with the same id, and for a business task it is the job's idempotency key.
func (k TaskKind) ID(key string) string { return k.Type + ":" + key }

// Row returns the outbox row of the task of kind k that acts on key, with
// payload as JSON, due at processAt.
func (k TaskKind) Row(key string, payload any, processAt time.Time) OutboxMessage {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err) // the payloads below are plain structs of strings
	}
	return OutboxMessage{
		TaskType:  k.Type,
		Payload:   b,
		TaskID:    k.ID(key),
		Queue:     k.Queue,
		ProcessAt: processAt.UTC(),
		Status:    OutboxPending,
	}
}

// Task types and queues of the business tasks.
const (
	TaskInvoiceGenerate = "invoice:generate"
	TaskEmailSend       = "email:send"
	TaskOrderExpire     = "order:expire"

	QueueCritical = "critical"
	QueueDefault  = "default"
)

// OrderPayload is the payload of tasks that act on one order.
// RequestID is the request id of the callback delivery that caused the
// task, when one did: the job's log lines carry it, so one search follows
// a payment from its callback to its invoice and email.
type OrderPayload struct {
	OrderID   string `json:"order_id"`
	RequestID string `json:"request_id,omitempty"`
}

// InvoiceKind issues the invoice of a paid order: invoice:generate:{order_id}.
var InvoiceKind = TaskKind{Type: TaskInvoiceGenerate, Queue: QueueCritical}

// InvoiceTask returns the outbox row that issues orderID's invoice, caused
// by the delivery with requestID.
func InvoiceTask(orderID string, now time.Time, requestID string) OutboxMessage {
	return InvoiceKind.Row(orderID, OrderPayload{OrderID: orderID, RequestID: requestID}, now)
}

// EmailKind sends one templated email about an order:
// email:send:{template}:{order_id}.
var EmailKind = TaskKind{Type: TaskEmailSend, Queue: QueueDefault}

// EmailOrderPaid is the template of the payment confirmation email.
const EmailOrderPaid = "order_paid"

// EmailPayload is the payload of email:send tasks.
type EmailPayload struct {
	Template  string `json:"template"`
	OrderID   string `json:"order_id"`
	RequestID string `json:"request_id,omitempty"` // as OrderPayload's
}

// EmailKey is the idempotency key of one email: {template}:{order_id}.
func EmailKey(template, orderID string) string { return template + ":" + orderID }

// EmailTask returns the outbox row that sends the template email for
// orderID, caused by the delivery with requestID.
func EmailTask(template, orderID string, now time.Time, requestID string) OutboxMessage {
	return EmailKind.Row(EmailKey(template, orderID), EmailPayload{Template: template, OrderID: orderID, RequestID: requestID}, now)
}

// ExpireKind releases the stock of an order still pending at its
// expires_at: order:expire:{order_id}.
var ExpireKind = TaskKind{Type: TaskOrderExpire, Queue: QueueDefault}

// ExpireTask returns the outbox row that expires orderID at expiresAt.
func ExpireTask(orderID string, expiresAt time.Time) OutboxMessage {
	return ExpireKind.Row(orderID, OrderPayload{OrderID: orderID}, expiresAt)
}
