package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/models"
)

// The queues of the business tasks: invoices and refunds first, then
// emails and expiry (QueueWeights). The periodic tasks run on QueueMaintenance.
const (
	QueueCritical = "critical"
	QueueDefault  = "default"
)

// Kind is a kind of task: its Asynq type and the queue it runs on.
type Kind struct {
	Type  string
	Queue string
}

// ID is the id of the task of kind k that acts on key — its type, a colon
// and the key: "invoice:generate:ORD-01H…". The queue refuses a second task
// with the same id, and for a business task it is the job's idempotency key.
func (k Kind) ID(key string) string { return k.Type + ":" + key }

// Args are the typed arguments of a business task, in the style of Asynq's
// and River's jobs: they own the task's kind and the key it acts on, and
// as JSON they are its payload. Each kind has its file, with its spec and
// handler beside its args: invoice.go, email.go, expire.go, refund.go.
type Args interface {
	Kind() Kind
	// Key is what the task acts on ("" when the args name nothing, which
	// no handler can run); the task id is Kind().ID(Key()).
	Key() string
}

// Row is the outbox row of the task that args stand for, due at at. App
// packages write it in the transaction of the state change that causes
// it, through Tasks.
func Row(args Args, at time.Time) models.OutboxMessage {
	payload, err := json.Marshal(args)
	if err != nil {
		panic(err) // args are plain structs of strings
	}
	return models.OutboxMessage{
		TaskType:  args.Kind().Type,
		Payload:   payload,
		TaskID:    taskID(args),
		Queue:     args.Kind().Queue,
		ProcessAt: at.UTC(),
		Status:    models.OutboxPending,
	}
}

// taskID is the id of the task args stand for: its job's idempotency key.
func taskID(args Args) string { return args.Kind().ID(args.Key()) }

// decode reads a job's payload into its args. A payload that cannot be
// read, or that names nothing to act on, can never succeed: it skips the
// retries.
func decode[A Args](j Job) (A, error) {
	var args A
	err := json.Unmarshal(j.Payload, &args)
	if err == nil && args.Key() == "" {
		err = errors.New("nothing to act on: no order or refund id")
	}
	if err != nil {
		return args, fmt.Errorf("decode %s: %v: %w", j.Type, err, asynq.SkipRetry)
	}
	return args, nil
}

// Tasks makes the outbox rows of the business tasks for the app packages
// that cause them (orders, payments, refunds) and the story that shows them. Those
// packages declare the part they need (orders.Tasks, payments.Tasks,
// story.Tasks) and do not import this package; cmd/sekali hands them
// Tasks{}.
type Tasks struct{}

// AdminNotice is the row of the task that sends the admin's notice with
// key (mail.AdminNoticeKey), written with the change it tells of.
func (Tasks) AdminNotice(key string, now time.Time) models.OutboxMessage {
	return Row(EmailArgs{Template: mail.AdminNotice, Notice: key}, now)
}

// Expire is the row of the task that expires orderID at expiresAt, written
// when the order is created.
func (Tasks) Expire(orderID string, expiresAt time.Time) models.OutboxMessage {
	return Row(ExpireArgs{OrderID: orderID}, expiresAt)
}

// Paid are the rows of what a payment causes, written by the callback that
// paid orderID (its delivery's requestID): the invoice and the email.
func (Tasks) Paid(orderID, requestID string, now time.Time) []models.OutboxMessage {
	return []models.OutboxMessage{
		Row(InvoiceArgs{OrderID: orderID, RequestID: requestID}, now),
		Row(EmailArgs{Template: mail.OrderPaid, OrderID: orderID, RequestID: requestID}, now),
	}
}

// RefundSucceeded is the row of the task that emails the customer of
// orderID that refund refundID went through, written by the news of it
// (its delivery's requestID).
func (Tasks) RefundSucceeded(orderID string, refundID int64, requestID string, now time.Time) models.OutboxMessage {
	return Row(EmailArgs{Template: mail.RefundSucceeded, OrderID: orderID, RefundID: refundID, RequestID: requestID}, now)
}

// RefundFailed is the row of the task that tells the customer of orderID
// that refund refundID, which had succeeded, failed after all, written by
// the news of the failure (its delivery's requestID). The email goes out
// only if the customer was told of the refund (mail.RefundFailedIntent).
func (Tasks) RefundFailed(orderID string, refundID int64, requestID string, now time.Time) models.OutboxMessage {
	return Row(EmailArgs{Template: mail.RefundFailed, OrderID: orderID, RefundID: refundID, RequestID: requestID}, now)
}

// Ended are the rows of what a pending order that ends in status causes,
// written by what ended it: the email that tells its customer it was
// cancelled or expired. A failed order has none: its customer saw the
// payment fail on the gateway's page.
func (Tasks) Ended(orderID string, status models.OrderStatus, now time.Time) []models.OutboxMessage {
	template := map[models.OrderStatus]string{models.OrderCancelled: mail.OrderCancelled, models.OrderExpired: mail.OrderExpired}[status]
	if template == "" {
		return nil
	}
	return []models.OutboxMessage{Row(EmailArgs{Template: template, OrderID: orderID}, now)}
}

// Refund is the row of the task that sends refund record refundRequestID
// of orderID, written with the record; requestID is the admin's HTTP
// request that asked for it.
func (Tasks) Refund(refundRequestID int64, orderID, requestID string, now time.Time) models.OutboxMessage {
	return Row(RefundArgs{RefundRequestID: refundRequestID, OrderID: orderID, RequestID: requestID}, now)
}
