package alerts

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// ConflictBurstAt is how many conflicting deliveries in one Window make a
// burst: one conflict is a gateway's bug or a replay worth a look on the
// dashboard; several in minutes is an attack or a broken integration.
const ConflictBurstAt = 5

// lookback bounds how far back failed refunds and answers in conflict
// are looked for: the watch runs every minute, so a day covers any
// outage of the worker.
const lookback = 24 * time.Hour

// Detect raises, in one transaction, the alerts that the database shows
// and no single transaction causes: a burst of conflicts, a gateway that
// did not answer, a refund the gateway refused, a payment page the
// gateway answered for another amount or currency. It looks at the window
// now is in and the one before (a window's last events may come after its
// last look); each occurrence's key makes a second look raise nothing.
func Detect(ctx context.Context, db *gorm.DB, tasks Tasks, now time.Time) (raised int, err error) {
	now = now.UTC()
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var events []Event
		for _, start := range []time.Time{now.Truncate(Window).Add(-Window), now.Truncate(Window)} {
			evs, err := windowEvents(tx, start, now)
			if err != nil {
				return err
			}
			events = append(events, evs...)
		}
		evs, err := lately(tx, now)
		if err != nil {
			return err
		}
		for _, e := range append(events, evs...) {
			ok, err := Raise(tx, tasks, e)
			if err != nil {
				return err
			}
			if ok {
				raised++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("alerts.Detect: %w", store.Classify(err))
	}
	return raised, nil
}

// windowEvents are the bursts of the window that starts at start.
func windowEvents(tx *gorm.DB, start, now time.Time) ([]Event, error) {
	end := start.Add(Window)
	key := WindowKey(start)
	span := map[string]any{"window_start": start, "window_end": end}
	var events []Event

	var conflicts int64
	err := tx.Model(&models.CallbackDelivery{}).
		Where("outcome = ? AND received_at >= ? AND received_at < ?", models.OutcomeConflict, start, end).
		Count(&conflicts).Error
	if err != nil {
		return nil, fmt.Errorf("conflicts: %w", err)
	}
	if conflicts >= ConflictBurstAt {
		events = append(events, Event{Type: ConflictBurst, Key: key, At: now,
			Data: with(span, "conflicts", conflicts, "threshold", ConflictBurstAt)})
	}

	// A call left sent with an error is one the gateway did not answer
	// (a timeout, a refused connection, a 5xx): it is tried again later.
	var unanswered []struct {
		Provider string
		Calls    int64
		Example  string // one of their errors
	}
	err = tx.Raw(`SELECT provider, count(*) AS calls, max(last_error) AS example FROM gateway_requests
WHERE phase = ? AND last_error <> '' AND updated_at >= ? AND updated_at < ? GROUP BY provider ORDER BY provider`,
		models.GatewaySent, start, end).Scan(&unanswered).Error
	if err != nil {
		return nil, fmt.Errorf("unanswered gateway calls: %w", err)
	}
	for _, u := range unanswered {
		events = append(events, Event{Type: GatewayDown, Key: u.Provider + ":" + key, At: now,
			Data: with(span, "provider", u.Provider, "calls", u.Calls, "error", u.Example)})
	}
	return events, nil
}

// lately are the gateway requests that ended lately in one of the
// phases that raise an alert of their own — a refund the gateway refused
// (refund.failed), a call it answered with another amount or currency
// than asked (gateway.conflict: a refund's is raised as it is recorded, a
// payment page's here) — one alert each.
func lately(tx *gorm.DB, now time.Time) ([]Event, error) {
	var rows []models.GatewayRequest
	err := tx.Where("(kind = ? AND phase = ? OR phase = ?) AND updated_at >= ?",
		models.GatewayRefund, models.GatewayFailed, models.GatewayConflict, now.Add(-lookback)).
		Order("id").Limit(200).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("failed refunds and answers in conflict: %w", err)
	}
	events := make([]Event, 0, len(rows))
	for _, r := range rows {
		if r.Phase == models.GatewayConflict {
			events = append(events, GatewayConflictEvent(r, now))
		} else {
			events = append(events, RefundFailedEvent(r, now))
		}
	}
	return events, nil
}

// GatewayConflictEvent is the alert of call r, whose answer stated another
// amount or currency than it asked (phase conflict): keyed by the call,
// so it is raised once wherever it is seen.
func GatewayConflictEvent(r models.GatewayRequest, now time.Time) Event {
	var answered any // null where the answer stated none
	if r.AnsweredAmount != nil {
		answered = *r.AnsweredAmount
	}
	return Event{Type: GatewayConflict, Key: strconv.FormatInt(r.ID, 10), At: now, Data: map[string]any{
		"gateway_request_id": r.ID, "kind": r.Kind, "order_id": r.OrderID, "provider": r.Provider,
		"amount": r.Amount, "currency": r.Currency, "answered_amount": answered, "answered_currency": r.AnsweredCurrency,
		"provider_object_id": r.ProviderObjectID, "error": r.LastError,
	}}
}

// RefundFailedEvent is the alert of refund record r, failed: keyed by the
// record, so it is raised once wherever the failure is seen.
func RefundFailedEvent(r models.GatewayRequest, now time.Time) Event {
	return Event{Type: RefundFailed, Key: strconv.FormatInt(r.ID, 10), At: now, Data: map[string]any{
		"refund_request_id": r.ID, "order_id": r.OrderID, "provider": r.Provider,
		"amount": r.Amount, "currency": r.Currency, "error": r.LastError,
	}}
}

// with is a copy of m with the pairs kv added.
func with(m map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(m)+len(kv)/2)
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}
