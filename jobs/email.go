package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/models"
)

// emailJob sends a templated email about an order, once per template and
// order. The paid callback writes its task with models.EmailTask:
// email:send:{template}:{order_id} (the idempotency key) with an
// EmailPayload, on the default queue.
func emailJob() Spec {
	return Spec{
		Task:     models.EmailKind,
		MaxRetry: 25, // it must happen eventually, and a retry of a job that is done costs one read
		Timeout:  2 * time.Minute,
		Handler: func(d Deps) asynq.HandlerFunc {
			email := NewEmail(d.Guard.db, d.Sender, d.MailFrom, d.Guard.now, d.Guard.metrics)
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

func emailPayload(j Job) (models.EmailPayload, error) {
	var p models.EmailPayload
	if err := json.Unmarshal(j.Payload, &p); err != nil || p.OrderID == "" {
		return p, fmt.Errorf("decode %s: %v: %w", j.Type, err, asynq.SkipRetry)
	}
	if p.Template != models.EmailOrderPaid {
		return p, fmt.Errorf("email template %q: unknown: %w", p.Template, asynq.SkipRetry)
	}
	return p, nil
}

// Prepare sends the message unless it went out before.
func (m *Email) Prepare(ctx context.Context, j Job) error {
	p, err := emailPayload(j)
	if err != nil {
		return err
	}
	e, err := mail.OrderPaidIntent(ctx, m.db, p.OrderID)
	if err != nil || e == nil {
		return skipIfGone(err)
	}
	// A run that lost its fence must not send: a newer run owns the job.
	var n int64
	if err := m.db.WithContext(ctx).Model(&models.JobExecution{}).
		Where("idempotency_key = ? AND fence = ? AND status = ?", j.Key, j.Fence, models.JobProcessing).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return ErrFenced
	}
	if e.Status == models.EmailSent {
		m.metrics.UniqueViolationSaves.WithLabelValues("outbound_emails").Inc()
		return nil
	}
	return mail.Deliver(ctx, m.db, m.sender, m.from, e)
}

// Effect marks the email sent, in the guard's transaction.
func (m *Email) Effect(ctx context.Context, tx *gorm.DB, j Job) (string, error) {
	p, err := emailPayload(j)
	if err != nil {
		return "", err
	}
	key := models.EmailKey(p.Template, p.OrderID)
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
