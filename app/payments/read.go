package payments

import (
	"context"
	"fmt"
	"gorm.io/gorm"
	"slices"
	"time"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// The console's read queries of payment_callbacks and callback_deliveries:
// newest first, keyset-paginated (store.Keyset, store.WindowKeyset).

// Callback result filters beyond the stored results: "rejected" matches
// every rejection reason, "conflict" every callback that had a conflicting
// delivery.
const (
	FilterRejected = "rejected"
	FilterConflict = "conflict"
)

// CallbackFilter selects callbacks.
type CallbackFilter struct {
	Provider  string
	Result    string // processed, stale, rejected, conflict, or a rejection reason
	OrderID   string
	KeyPrefix string
	// Transaction is the gateway's transaction id or reference, exactly.
	Transaction string
	// Email is the customer email of the callback's order, exactly.
	Email    string
	From, To time.Time // first_received_at window; zero: open
	Before   int64     // keyset cursor: ids below it
	Limit    int
}

// ListCallbacks returns the newest callbacks matching f and the cursor of
// the next page (0 on the last).
func (s *Service) ListCallbacks(ctx context.Context, f CallbackFilter) ([]models.PaymentCallback, int64, error) {
	q := s.db.WithContext(ctx).Model(&models.PaymentCallback{})
	if f.Provider != "" {
		q = q.Where("provider = ?", f.Provider)
	}
	switch f.Result {
	case "":
	case FilterRejected:
		q = q.Where("status = ?", models.CallbackRejected)
	case FilterConflict:
		q = q.Where("conflict_count > 0")
	default:
		q = q.Where("result = ?", f.Result)
	}
	if f.OrderID != "" {
		q = q.Where("order_id = ?", f.OrderID)
	}
	if f.KeyPrefix != "" {
		q = q.Where("idempotency_key LIKE ?", store.LikePrefix(f.KeyPrefix))
	}
	if f.Transaction != "" {
		q = q.Where("transaction_id = ?", f.Transaction)
	}
	if f.Email != "" {
		q = q.Where("order_id IN (SELECT id FROM orders WHERE customer_email = ?)", f.Email)
	}
	var rows []models.PaymentCallback
	next, err := store.WindowKeyset(q, "payment_callbacks", "first_received_at", f.From, f.To, f.Before, f.Limit, &rows,
		func(c models.PaymentCallback) int64 { return c.ID })
	if err != nil {
		return nil, 0, fmt.Errorf("payments.ListCallbacks: %w", err)
	}
	return rows, next, nil
}

// Delivery outcome groups for the deliveries filter.
const (
	// FilterRefused matches every delivery refused before its event was
	// known: bad size, type, signature or payload.
	FilterRefused = "refused"
)

// RefusedOutcomes are the outcomes of deliveries refused before their
// event was known.
var RefusedOutcomes = []string{
	models.OutcomeInvalidSignature, models.OutcomeInvalidPayload, models.OutcomeMissingField,
	models.OutcomeTooLarge, models.OutcomeUnsupportedMediaType,
}

// DeliveryFilter selects deliveries.
type DeliveryFilter struct {
	Provider   string
	Outcome    string // an outcome, or "refused"
	CallbackID int64
	RemoteAddr string
	RequestID  string // the request id Sekali gave the delivery, exactly
	// Transaction is the gateway's transaction id or reference of the
	// delivery's callback, exactly.
	Transaction string
	From, To    time.Time // received_at window; zero: open
	Before      int64
	Limit       int
}

// ListDeliveries returns the newest deliveries matching f and the cursor
// of the next page (0 on the last).
func (s *Service) ListDeliveries(ctx context.Context, f DeliveryFilter) ([]models.CallbackDelivery, int64, error) {
	q := s.db.WithContext(ctx).Model(&models.CallbackDelivery{}).Omit(KeptColumns...) // a page of bodies would be megabytes
	switch f.Outcome {
	case "":
	case FilterRefused:
		q = q.Where("outcome IN ?", RefusedOutcomes)
	default:
		q = q.Where("outcome = ?", f.Outcome)
	}
	q = deliveryWhere(q, f)
	var rows []models.CallbackDelivery
	next, err := store.WindowKeyset(q, "callback_deliveries", "received_at", f.From, f.To, f.Before, f.Limit, &rows,
		func(d models.CallbackDelivery) int64 { return d.ID })
	if err != nil {
		return nil, 0, fmt.Errorf("payments.ListDeliveries: %w", err)
	}
	return rows, next, nil
}

// deliveryWhere adds f's conditions but its outcome and window to q.
func deliveryWhere(q *gorm.DB, f DeliveryFilter) *gorm.DB {
	if f.Provider != "" {
		q = q.Where("provider = ?", f.Provider)
	}
	if f.CallbackID > 0 {
		q = q.Where("callback_id = ?", f.CallbackID)
	}
	if f.RemoteAddr != "" {
		q = q.Where("remote_addr = ?", f.RemoteAddr)
	}
	if f.RequestID != "" {
		q = q.Where("request_id = ?", f.RequestID)
	}
	if f.Transaction != "" {
		q = q.Where("callback_id IN (SELECT id FROM payment_callbacks WHERE transaction_id = ?)", f.Transaction)
	}
	return q
}

// Providers lists the configured providers' names, sorted.
func (s *Service) Providers() []string {
	names := make([]string, 0, len(s.providers))
	for name := range s.providers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
