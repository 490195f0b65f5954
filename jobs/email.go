package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/models"
)

// TaskEmailSend sends one templated email about an order.
const TaskEmailSend = "email:send"

// EmailArgs are the args of email:send:{template}:{order_id}, on the
// default queue. The callback that paid the order writes the task
// (Tasks.Paid); RequestID is as InvoiceArgs'.
type EmailArgs struct {
	Template  string `json:"template"`
	OrderID   string `json:"order_id"`
	RequestID string `json:"request_id,omitempty"`
}

// Kind is email:send on the default queue.
func (EmailArgs) Kind() Kind { return Kind{Type: TaskEmailSend, Queue: QueueDefault} }

// Key is the email's key, {template}:{order_id} (mail.Key); "" without an
// order.
func (a EmailArgs) Key() string {
	if a.OrderID == "" {
		return ""
	}
	return mail.Key(a.Template, a.OrderID)
}

// emailJob sends a templated email about an order, once per template and
// order.
func emailJob() Spec {
	return Spec{
		Task:     EmailArgs{}.Kind(),
		MaxRetry: 25, // it must happen eventually, and a retry of a job that is done costs one read
		Timeout:  2 * time.Minute,
		Handler: func(d Deps) asynq.HandlerFunc {
			email := NewEmail(d.DB, d.Sender, d.MailFrom, d.Now, d.Metrics)
			return d.Guard.WrapPrepared(email.Prepare, email.Effect)
		},
	}
}

// Email sends a templated email (email:send:{template}:{order_id}) in
// three steps, none of which holds a lock across the network:
//
//  1. (Prepare) the outbound_emails row is found or created, no
//     transaction; the run checks that it still holds the job's fence;
//  2. (Prepare) the message goes out over SMTP, outside any transaction;
//  3. (Effect) the row is marked sent in the guard's fenced transaction.
//
// If the process dies between 2 and 3, the retry sends the same message
// again: its Message-ID is derived from the key, so receivers see one
// message (see app/mail).
type Email struct {
	db      *gorm.DB
	sender  mail.Sender
	from    string
	now     func() time.Time
	metrics *metrics.Set
}

// NewEmail returns the email job; a message found sent counts in m as a
// save of the outbound_emails table.
func NewEmail(db *gorm.DB, sender mail.Sender, from string, now func() time.Time, m *metrics.Set) *Email {
	return &Email{db: db, sender: sender, from: from, now: now, metrics: m}
}

// emailArgs decodes the job's args; a template this worker does not know
// never succeeds.
func emailArgs(j Job) (EmailArgs, error) {
	args, err := decode[EmailArgs](j)
	if err == nil && args.Template != mail.OrderPaid {
		err = fmt.Errorf("email template %q: unknown: %w", args.Template, asynq.SkipRetry)
	}
	return args, err
}

// Prepare sends the message unless it went out before.
func (m *Email) Prepare(ctx context.Context, j Job) error {
	args, err := emailArgs(j)
	if err != nil {
		return err
	}
	e, err := mail.OrderPaidIntent(ctx, m.db, args.OrderID)
	if err != nil || e == nil {
		return skipIfGone(err)
	}
	// A run that lost its fence must not send: a newer run owns the job.
	if err := holdsFence(ctx, m.db, j); err != nil {
		return err
	}
	if e.Status == models.EmailSent {
		m.metrics.UniqueViolationSaves.WithLabelValues("outbound_emails").Inc()
		return nil
	}
	return mail.Deliver(ctx, m.db, m.sender, m.from, e)
}

// Effect marks the email sent, in the guard's transaction.
func (m *Email) Effect(ctx context.Context, tx *gorm.DB, j Job) (string, error) {
	args, err := emailArgs(j)
	if err != nil {
		return "", err
	}
	key := args.Key()
	var e models.OutboundEmail
	if err := tx.Where("key = ?", key).Limit(1).Find(&e).Error; err != nil {
		return "", err
	}
	if e.ID == 0 {
		return "not paid: nothing to send", nil
	}
	if _, err := mail.MarkSentTx(tx, key, m.now()); err != nil {
		return "", err
	}
	return e.MessageID, nil
}
