// Package alerts records operational events (a red audit, archived
// tasks, a conflict burst, …) and delivers them as signed Standard
// Webhooks to ALERT_WEBHOOK_URL. An occurrence is a row in alerts, written
// with its send task in the outbox in the transaction that causes it; its
// event id, derived from what caused it, is the webhook-id the receiver
// dedupes on, so raising it twice, or sending it twice, still tells the
// receiver once.
package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// The event types, as the webhook's payload names them.
const (
	AuditRed        = "audit.red"
	JobsArchived    = "jobs.archived"
	ConflictBurst   = "callbacks.conflict_burst"
	ReconcilerSent  = "reconciler.resent"
	RefundFailed    = "refund.failed"
	GatewayDown     = "gateway.unreachable"
	GatewayConflict = "gateway.conflict"
	maxEventIDBytes = 200 // as the column's check
)

// Types lists every event type, in the order the docs describe them.
var Types = []string{AuditRed, JobsArchived, ConflictBurst, ReconcilerSent, RefundFailed, GatewayConflict, GatewayDown}

// Window is the span a burst is counted over: a bursty event (conflicts,
// archived tasks, re-sent tasks, gateway errors) is raised at most once
// per window, keyed by the window's start.
const Window = 5 * time.Minute

// WindowKey is the key of the window t falls in: its start, in UTC.
func WindowKey(t time.Time) string {
	return t.UTC().Truncate(Window).Format("20060102T1504Z")
}

// Event is one occurrence. Key says which: the same type and key are the
// same occurrence, raised once.
type Event struct {
	Type string
	Key  string
	At   time.Time
	Data map[string]any
}

// ID is the event's webhook-id.
func (e Event) ID() string { return e.Type + ":" + e.Key }

// Payload is the body sent, in Standard Webhooks' recommended shape.
type Payload struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// Tasks makes the outbox row of the task that sends alert eventID; jobs
// implements it (jobs.Tasks).
type Tasks interface {
	Alert(eventID string, now time.Time) models.OutboxMessage
}

// Raise records e in tx with the task that sends it, unless e was raised
// before; it reports whether this call raised it.
func Raise(tx *gorm.DB, tasks Tasks, e Event) (bool, error) {
	if e.Key == "" || len(e.ID()) > maxEventIDBytes {
		return false, fmt.Errorf("alerts.Raise: %s: the key must be 1 to %d bytes", e.Type, maxEventIDBytes-len(e.Type)-1)
	}
	if e.Data == nil {
		e.Data = map[string]any{}
	}
	body, err := json.Marshal(Payload{Type: e.Type, Timestamp: e.At.UTC(), Data: e.Data})
	if err != nil {
		return false, fmt.Errorf("alerts.Raise: %w", err)
	}
	row := models.Alert{EventID: e.ID(), Type: e.Type, Payload: body, Status: models.AlertPending, CreatedAt: e.At.UTC()}
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return false, fmt.Errorf("alerts.Raise: %w", store.Classify(res.Error))
	}
	if res.RowsAffected == 0 {
		return false, nil // raised before: its task exists already
	}
	if err := outbox.Add(tx, tasks.Alert(row.EventID, e.At)); err != nil {
		return false, fmt.Errorf("alerts.Raise: %w", err)
	}
	return true, nil
}

// Recent returns the newest n alerts not acknowledged, for the dashboard.
func Recent(ctx context.Context, db *gorm.DB, n int) ([]models.Alert, error) {
	var rows []models.Alert
	err := db.WithContext(ctx).Where("acknowledged_at IS NULL").Order("created_at DESC, id DESC").Limit(n).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("alerts.Recent: %w", store.Classify(err))
	}
	return rows, nil
}
