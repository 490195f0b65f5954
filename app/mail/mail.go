// Package mail sends Sekali's emails. An outbound_emails row is the
// intent to send (one per key: {template}:{order_id}, and for a refund
// {template}:{order_id}:{refund_id}); its Message-ID is
// derived from the key, so if the process dies after the SMTP server took
// the message but before the row says "sent", the retry sends the same
// message again, which receivers can recognise: at most one distinct
// message per key, delivered at least once.
package mail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/models"
)

// The templates: the payment confirmation, and the email of a refund
// that succeeded.
const (
	OrderPaid       = "order_paid"
	RefundSucceeded = "refund_succeeded"
)

// Key is the key of one email: {template}:{order_id}. The email's row,
// its Message-ID and its job's idempotency key all derive from it.
func Key(template, orderID string) string { return template + ":" + orderID }

// RefundKey is the key of the email of refund refundID of orderID: one
// email per refund.
func RefundKey(orderID string, refundID int64) string {
	return Key(RefundSucceeded, orderID) + ":" + strconv.FormatInt(refundID, 10)
}

// Message is one email to send.
type Message struct {
	MessageID string // without angle brackets
	From      string
	To        string
	Subject   string
	Body      string
}

// Mailer delivers a message (SMTP, or the log).
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// Logs reports whether s only writes messages to the log (LogMailer):
// an email it "sends" reaches no one, and its row says so.
func Logs(s Mailer) bool {
	_, ok := s.(LogMailer)
	return ok
}

// MessageID derives the Message-ID of the email with key.
func MessageID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16]) + "@sekali.local"
}

// OrderPaidIntent returns the outbound_emails row of orderID's payment
// confirmation, creating it when the order is paid; nil when it is not.
// It takes no lock and opens no transaction: the row's unique key makes
// a second intent the same row.
func OrderPaidIntent(ctx context.Context, db *gorm.DB, orderID string) (*models.OutboundEmail, error) {
	var o models.Order
	err := db.WithContext(ctx).Take(&o, "id = ?", orderID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no order %q", orderID)
	}
	if err != nil {
		return nil, err
	}
	if !o.Status.WasPaid() {
		return nil, nil
	}
	return intent(db.WithContext(ctx), OrderPaidEmail(&o))
}

// intent is the outbound_emails row of e's key: e, created unless it
// exists, or the row made before (and perhaps sent since). A row it
// created is e as written, so only a row found is read back.
func intent(db *gorm.DB, e models.OutboundEmail) (*models.OutboundEmail, error) {
	res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&e)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 1 {
		return &e, nil
	}
	if err := db.Take(&e, "key = ?", e.Key).Error; err != nil {
		return nil, err
	}
	return &e, nil
}

// OrderPaidEmail is the payment confirmation email of o, not sent yet.
func OrderPaidEmail(o *models.Order) models.OutboundEmail {
	key := Key(OrderPaid, o.ID)
	return models.OutboundEmail{
		Key:       key,
		MessageID: MessageID(key),
		To:        o.CustomerEmail,
		Subject:   fmt.Sprintf("Payment received for order %s", o.ID),
		Body: fmt.Sprintf("Thank you! We received your payment of %d %s for order %s.\n",
			o.TotalAmount, o.Currency, o.ID),
		Status: models.EmailPending,
	}
}

// RefundSucceededIntent returns the outbound_emails row of the email that
// tells the customer of orderID that refund refundID went through,
// creating it while the refund has succeeded; nil when it has not (a
// refund that failed sends nothing). As OrderPaidIntent, it takes no
// lock: the row's unique key makes a second intent the same row.
func RefundSucceededIntent(ctx context.Context, db *gorm.DB, orderID string, refundID int64) (*models.OutboundEmail, error) {
	db = db.WithContext(ctx)
	var o models.Order
	var r models.Refund
	err := db.Take(&o, "id = ?", orderID).Error
	if err == nil {
		err = db.Take(&r, "id = ? AND order_id = ?", refundID, orderID).Error
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no refund %d of order %q", refundID, orderID)
	}
	if err != nil {
		return nil, err
	}
	if r.Status != models.RefundSucceeded {
		return nil, nil
	}
	return intent(db, RefundSucceededEmail(&o, &r))
}

// RefundSucceededEmail is the email of refund r of o, not sent yet. Like
// every kept email it holds no link with the order's access token: what
// the database keeps must not open the order.
func RefundSucceededEmail(o *models.Order, r *models.Refund) models.OutboundEmail {
	key := RefundKey(o.ID, r.ID)
	amount := models.Money(r.Amount, r.Currency)
	return models.OutboundEmail{
		Key:       key,
		MessageID: MessageID(key),
		To:        o.CustomerEmail,
		Subject:   fmt.Sprintf("Your refund of %s for order %s", amount, o.ID),
		Body: fmt.Sprintf("Your refund of %s for order %s has been sent back to the way you paid.\n"+
			"Depending on your bank it can take a few days to show.\n", amount, o.ID),
		Status: models.EmailPending,
	}
}

// Deliver sends e through s unless it was sent, outside any transaction:
// a slow mail server holds no row lock and no pooled connection. Each try
// is counted on the row, and a failure's message kept. If the process
// dies after the server took the message and before MarkSentTx commits,
// the retry sends it again with the same Message-ID.
func Deliver(ctx context.Context, db *gorm.DB, s Mailer, from string, e *models.OutboundEmail) error {
	if e.Status == models.EmailSent {
		return nil
	}
	db = db.WithContext(ctx)
	if err := db.Model(e).Update("attempts", gorm.Expr("attempts + 1")).Error; err != nil {
		return err
	}
	err := s.Send(ctx, Message{MessageID: e.MessageID, From: from, To: e.To, Subject: e.Subject, Body: e.Body})
	if err != nil {
		msg := err.Error()
		if len(msg) > 500 {
			msg = msg[:500]
		}
		db.Model(e).Update("last_error", msg) // best effort: the job's own row keeps the error too
		return fmt.Errorf("mail: send %s: %w", e.Key, err)
	}
	return nil
}

// MarkSentTx records in tx that the email with key went out — to the
// log only, when logged. A row that says so already stays as it is; sent
// reports whether this call marked it.
func MarkSentTx(tx *gorm.DB, key string, now time.Time, logged bool) (sent bool, err error) {
	res := tx.Model(&models.OutboundEmail{}).Where("key = ? AND status = ?", key, models.EmailPending).
		Updates(map[string]any{"status": models.EmailSent, "sent_at": now.UTC(), "last_error": "", "logged": logged})
	return res.RowsAffected == 1, res.Error
}

// LogMailer writes emails to the log instead of sending them (no SMTP_URL).
type LogMailer struct{ Log *slog.Logger }

// Send implements Mailer. The body is not logged: it is customer data.
func (l LogMailer) Send(ctx context.Context, m Message) error {
	l.Log.InfoContext(ctx, "email not sent: SMTP_URL is unset", "message_id", m.MessageID, "subject", m.Subject)
	return nil
}
