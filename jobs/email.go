package jobs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/models"
)

// TaskEmailSend sends one templated email about an order, or one notice
// to an admin.
const TaskEmailSend = "email:send"

// EmailArgs are the args of email:send:{template}:{order_id} (and
// :{refund_id} for a refund's email), on the default queue. What the
// email tells writes the task, in its own transaction: the callback that
// paid the order (Tasks.Paid), the news that a refund succeeded
// (Tasks.RefundSucceeded) or that it failed after that
// (Tasks.RefundFailed), an order's end (Tasks.Ended); RequestID is as
// InvoiceArgs'.
type EmailArgs struct {
	Template string `json:"template"`
	OrderID  string `json:"order_id"`
	// RefundID is the refunds row a refund's email is about.
	RefundID int64 `json:"refund_id,omitempty"`
	// Notice is the key of an admin's notice (mail.AdminNotice), whose
	// row was written with the change it tells of.
	Notice    string `json:"notice,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Kind is email:send on the default queue.
func (EmailArgs) Kind() Kind { return Kind{Type: TaskEmailSend, Queue: QueueDefault} }

// Key is the email's key, {template}:{order_id} (mail.Key), and for a
// refund's email {template}:{order_id}:{refund_id} (mail.RefundKey), and
// an admin's notice its own key (mail.AdminNoticeKey); "" without an
// order, or a refund's email without its refund.
func (a EmailArgs) Key() string {
	switch {
	case a.Template == mail.AdminNotice:
		return a.Notice
	case a.OrderID == "":
		return ""
	case mail.AboutRefund(a.Template) && a.RefundID <= 0:
		return ""
	case mail.AboutRefund(a.Template):
		return mail.RefundKey(a.Template, a.OrderID, a.RefundID)
	}
	return mail.Key(a.Template, a.OrderID)
}

// emailJob sends a templated email about an order, once per template and
// order (and refund).
func emailJob() Spec {
	return Spec{
		Task:     EmailArgs{}.Kind(),
		MaxRetry: 25, // it must happen eventually, and a retry of a job that is done costs one read
		Timeout:  2 * time.Minute,
		Guarded: func(d Deps) (Prepare, Effect) {
			email := NewEmail(d.DB, d.Mailer, d.MailFrom, d.Now, d.Metrics)
			return email.Prepare, email.Effect
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
	mailer  mail.Mailer
	from    string
	now     func() time.Time
	metrics *metrics.Set
}

// NewEmail returns the email job; a message found sent counts in m as a
// save of the outbound_emails table.
func NewEmail(db *gorm.DB, mailer mail.Mailer, from string, now func() time.Time, m *metrics.Set) *Email {
	return &Email{db: db, mailer: mailer, from: from, now: now, metrics: m}
}

// emailArgs decodes the job's args; a template this worker does not know
// never succeeds.
func emailArgs(j Job) (EmailArgs, error) {
	args, err := decode[EmailArgs](j)
	if err == nil && !slices.Contains(mail.Templates, args.Template) {
		err = fmt.Errorf("email template %q: unknown: %w", args.Template, asynq.SkipRetry)
	}
	return args, err
}

// intent is the email's outbound_emails row, made when what it tells is
// true (the order paid, cancelled or expired, the refund succeeded, or
// failed after its customer was told it had); nil when it is not.
func (m *Email) intent(ctx context.Context, args EmailArgs) (*models.OutboundEmail, error) {
	switch args.Template {
	case mail.RefundSucceeded:
		return mail.RefundSucceededIntent(ctx, m.db, args.OrderID, args.RefundID)
	case mail.RefundFailed:
		return mail.RefundFailedIntent(ctx, m.db, args.OrderID, args.RefundID)
	case mail.OrderCancelled, mail.OrderExpired:
		return mail.OrderEndedIntent(ctx, m.db, args.Template, args.OrderID)
	case mail.AdminNotice:
		return mail.AdminNoticeIntent(ctx, m.db, args.Notice)
	}
	return mail.OrderPaidIntent(ctx, m.db, args.OrderID)
}

// nothingToSend is the result of a job whose email was not true to tell
// when it ran, by template.
var nothingToSend = map[string]string{
	mail.OrderPaid:       "not paid: nothing to send",
	mail.RefundSucceeded: "the refund has not succeeded: nothing to send",
	mail.RefundFailed:    "the customer was never told the refund succeeded: nothing to send",
	mail.OrderCancelled:  "no longer cancelled: nothing to send",
	mail.OrderExpired:    "no longer expired: nothing to send",
	mail.AdminNotice:     "no such notice: nothing to send",
}

// Prepare sends the message unless it went out before.
func (m *Email) Prepare(ctx context.Context, j Job) error {
	args, err := emailArgs(j)
	if err != nil {
		return err
	}
	e, err := m.intent(ctx, args)
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
	return mail.Deliver(ctx, m.db, m.mailer, m.from, e)
}

// Effect marks the email sent, in the guard's transaction.
func (m *Email) Effect(ctx context.Context, tx *gorm.DB, j Job) (string, error) {
	args, err := emailArgs(j)
	if err != nil {
		return "", err
	}
	key := args.Key()
	sent, err := mail.MarkSentTx(tx, key, m.now(), mail.Logs(m.mailer))
	if err != nil {
		return "", err
	}
	if sent { // the common case, in one statement; the row's Message-ID derives from its key
		return mail.MessageID(key), nil
	}
	// Nothing marked: the row was sent before, or there is none, or none
	// of its tries was made (what it tells stopped being true first).
	var e models.OutboundEmail
	if err := tx.Where("key = ?", key).Limit(1).Find(&e).Error; err != nil {
		return "", err
	}
	if e.Status != models.EmailSent {
		return nothingToSend[args.Template], nil
	}
	return e.MessageID, nil
}
