package models

import "time"

// EmailStatus is the state of an outbound email.
type EmailStatus string

const (
	EmailPending EmailStatus = "pending"
	EmailSent    EmailStatus = "sent"
)

// OutboundEmail is the intent to send one email, keyed {template}:{order_id}.
type OutboundEmail struct {
	ID        int64
	Key       string
	MessageID string
	To        string `gorm:"column:to"`
	Subject   string
	Body      string
	Status    EmailStatus
	Attempts  int
	LastError string
	SentAt    *time.Time
	// Logged: SMTP_URL was unset, so the email "sent" was written to the
	// log and reached no one.
	Logged    bool
	CreatedAt time.Time
}
