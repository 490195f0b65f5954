// Package mail sends Sekali's emails. An outbound_emails row is the
// intent to send (one per key, {template}:{order_id}); its Message-ID is
// derived from the key, so if the process dies after the SMTP server took
// the message but before the row says "sent", the retry sends the same
// message again, which receivers can recognise: at most one distinct
// message per key, delivered at least once.
package mail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/models"
)

// Message is one email to send.
type Message struct {
	MessageID string // without angle brackets
	From      string
	To        string
	Subject   string
	Body      string
}

// Sender delivers a message (SMTP, or the log).
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// MessageID derives the Message-ID of the email with key.
func MessageID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16]) + "@sekali.local"
}

// SendOrderPaidTx sends the payment confirmation of orderID through s,
// once: the outbound_emails row is created in tx (or found), the message
// is sent unless the row says it was, and the row is marked sent in tx.
// It returns the row, or nil when the order is not paid.
func SendOrderPaidTx(ctx context.Context, tx *gorm.DB, s Sender, from, orderID string, now time.Time) (*models.OutboundEmail, error) {
	o, err := orders.Lock(tx, orderID)
	if err != nil {
		return nil, err
	}
	if o.Status != models.OrderPaid {
		return nil, nil
	}
	key := models.EmailKey(models.EmailOrderPaid, orderID)
	e := models.OutboundEmail{
		Key:       key,
		MessageID: MessageID(key),
		To:        o.CustomerEmail,
		Subject:   fmt.Sprintf("Payment received for order %s", o.ID),
		Body: fmt.Sprintf("Thank you! We received your payment of %d %s for order %s.\n",
			o.TotalAmount, o.Currency, o.ID),
		Status: models.EmailPending,
	}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&e).Error; err != nil {
		return nil, err
	}
	if err := tx.Take(&e, "key = ?", key).Error; err != nil {
		return nil, err
	}
	if e.Status == models.EmailSent {
		metrics.UniqueViolationSaves.WithLabelValues("outbound_emails").Inc()
		return &e, nil
	}
	if err := s.Send(ctx, Message{MessageID: e.MessageID, From: from, To: e.To, Subject: e.Subject, Body: e.Body}); err != nil {
		return nil, fmt.Errorf("mail: send %s: %w", key, err)
	}
	sentAt := now.UTC()
	err = tx.Model(&e).Updates(map[string]any{"status": models.EmailSent, "sent_at": sentAt, "attempts": gorm.Expr("attempts + 1"), "last_error": ""}).Error
	if err != nil {
		return nil, err
	}
	e.Status, e.SentAt = models.EmailSent, &sentAt
	return &e, nil
}

// LogSender writes emails to the log instead of sending them (no SMTP_URL).
type LogSender struct{ Log *slog.Logger }

// Send implements Sender. The body is not logged: it is customer data.
func (l LogSender) Send(ctx context.Context, m Message) error {
	l.Log.InfoContext(ctx, "email not sent: SMTP_URL is unset", "message_id", m.MessageID, "subject", m.Subject)
	return nil
}
