// Package mail sends Sekali's emails. An outbound_emails row is the
// intent to send (one per key: {template}:{order_id}, and for a refund
// {template}:{order_id}:{refund_id}), made only while what it tells is
// true (templates.go); its Message-ID is derived from the key, so if the
// process dies after the SMTP server took the message but before the row
// says "sent", the retry sends the same message again, which receivers
// can recognise: at most one distinct message per key, delivered at
// least once.
package mail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/models"
)

// Key is the key of one email: {template}:{order_id}. The email's row,
// its Message-ID and its job's idempotency key all derive from it.
func Key(template, orderID string) string { return template + ":" + orderID }

// RefundKey is the key of the email of template about refund refundID of
// orderID: one email per refund and template.
func RefundKey(template, orderID string, refundID int64) string {
	return Key(template, orderID) + ":" + strconv.FormatInt(refundID, 10)
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

// Deliver sends e through s unless it was sent, outside any transaction:
// a slow mail server holds no row lock and no pooled connection. Each try
// is counted on the row before it is made, and a failure's message kept.
// If the process dies after the server took the message and before
// MarkSentTx commits, the retry sends it again with the same Message-ID.
// An email whose news stopped being true is not tried (countTry): Deliver
// sends nothing and returns nil.
func Deliver(ctx context.Context, db *gorm.DB, s Mailer, from string, e *models.OutboundEmail) error {
	if e.Status == models.EmailSent {
		return nil
	}
	db = db.WithContext(ctx)
	try, err := countTry(db, e)
	if err != nil || !try {
		return err
	}
	err = s.Send(ctx, Message{MessageID: e.MessageID, From: from, To: e.To, Subject: e.Subject, Body: e.Body})
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

// countTry counts a try of e and reports whether to make it. The email
// of a refund that succeeded is tried only while the refund still has,
// decided under a share lock of the refund's row: the news of its
// failure, which must update that row, then commits either before the
// count — and the email is never tried — or after it, and then the
// failure's own email finds the try counted and waits to learn how it
// went (RefundFailedIntent). The lock is held for two statements, never
// across the network.
func countTry(db *gorm.DB, e *models.OutboundEmail) (bool, error) {
	count := func(tx *gorm.DB) error { return tx.Model(e).Update("attempts", gorm.Expr("attempts + 1")).Error }
	refundID, ok := refundOf(e.Key, RefundSucceeded)
	if !ok {
		return true, count(db)
	}
	try := false
	err := db.Transaction(func(tx *gorm.DB) error {
		var ids []int64
		err := tx.Raw("SELECT id FROM refunds WHERE id = ? AND status = ? FOR SHARE", refundID, models.RefundSucceeded).Scan(&ids).Error
		if err != nil || len(ids) == 0 {
			return err
		}
		try = true
		return count(tx)
	})
	return try, err
}

// refundOf is the refund id at the end of key when key is of template
// (RefundKey), and whether it is.
func refundOf(key, template string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, template+":")
	i := strings.LastIndexByte(rest, ':')
	if !ok || i < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(rest[i+1:], 10, 64)
	return id, err == nil
}

// MarkSentTx records in tx that the email with key went out — to the
// log only, when logged. A row that says so already stays as it is, and
// so does a row no try was counted for: it was never handed to a mail
// server (its news stopped being true first). A row tried and then not
// tried again, its news no longer true, is marked: that try may have
// reached the customer. sent reports whether this call marked it.
func MarkSentTx(tx *gorm.DB, key string, now time.Time, logged bool) (sent bool, err error) {
	res := tx.Model(&models.OutboundEmail{}).Where("key = ? AND status = ? AND attempts > 0", key, models.EmailPending).
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
