package models

import (
	"encoding/json"
	"time"
)

// AlertStatus is where an operational webhook's delivery stands.
type AlertStatus string

const (
	AlertPending AlertStatus = "pending" // not yet delivered; its job is on its way or retrying
	AlertSent    AlertStatus = "sent"    // the receiver answered 2xx
	AlertFailed  AlertStatus = "failed"  // the job gave up: every retry failed
	// AlertUnsent: no ALERT_WEBHOOK_URL was set when its job ran; the
	// occurrence is kept and shown, not sent.
	AlertUnsent AlertStatus = "unsent"
)

// Alert is one occurrence of an operational event. EventID is its
// webhook-id: stable for the occurrence, unique in the table.
type Alert struct {
	ID        int64
	EventID   string
	Type      string
	Payload   json.RawMessage `gorm:"type:jsonb"`
	Status    AlertStatus
	Attempts  int
	LastError string
	CreatedAt time.Time
	SentAt    *time.Time
	// AcknowledgedAt and AcknowledgedBy say which admin acknowledged it
	// on the dashboard, and when: it leaves the dashboard then. Nil and
	// "" while it is not.
	AcknowledgedAt *time.Time
	AcknowledgedBy string
}
