package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

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
	Email string
	// Search is a gateway transaction id, a payment's reference or a
	// customer email, exactly: one box for the three.
	Search string
	// Body selects callbacks with a delivery whose kept body matches.
	Body     BodyField
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
	if f.Search != "" {
		// ARRAY(…) is computed once, first, so that each of the three is
		// an index lookup: an IN (subquery) under an OR would be a filter
		// on every callback.
		q = q.Where(`(transaction_id = ? OR order_id = ANY(ARRAY(
    SELECT order_id FROM payments WHERE provider_reference = ?
    UNION SELECT id FROM orders WHERE customer_email = ?)))`, f.Search, f.Search, f.Search)
	}
	if len(f.Body.Path) > 0 {
		cond, args := bodyCondition(f.Body)
		q = q.Where("id IN (SELECT callback_id FROM callback_deliveries WHERE "+cond+")", args...)
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
	models.OutcomeInvalidRequest, models.OutcomeTooLarge, models.OutcomeUnsupportedMediaType,
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
	// Body selects deliveries whose kept body matches.
	Body     BodyField
	From, To time.Time // received_at window; zero: open
	Before   int64
	Limit    int
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

// DeliveryCallbacks returns the callbacks of deliveries ds, by id: the
// deliveries list shows each one's order, and for a rejected one without
// a note of its own the reason its callback recorded.
func (s *Service) DeliveryCallbacks(ctx context.Context, ds []models.CallbackDelivery) (map[int64]models.PaymentCallback, error) {
	ids := make([]int64, 0, len(ds))
	for _, d := range ds {
		if d.CallbackID != nil {
			ids = append(ids, *d.CallbackID)
		}
	}
	out := make(map[int64]models.PaymentCallback, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var cbs []models.PaymentCallback
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Find(&cbs).Error; err != nil {
		return nil, fmt.Errorf("payments.DeliveryCallbacks: %w", store.Classify(err))
	}
	for _, cb := range cbs {
		out[cb.ID] = cb
	}
	return out, nil
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
	if len(f.Body.Path) > 0 {
		cond, args := bodyCondition(f.Body)
		q = q.Where(cond, args...)
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

// Bounds of a search by path = value (ParseBodyField), beyond the filter's
// length: how deep a path goes, and how long one of its keys is.
const (
	maxBodyPathDepth = 8
	maxBodyPathKey   = 64
)

// BodyField is a search of kept bodies by a JSON path = value: the
// deliveries whose body is a JSON object with Value at Path, a list of
// object keys, outermost first. A value that reads as a JSON number or as
// true or false also matches that number or boolean.
type BodyField struct {
	Path  []string
	Value string
}

// ParseBodyField reads a search by path = value written as
// "data.object.id=pi_123": dotted object keys, "=", the value (which may
// hold "=" itself). EInvalid if it has no "=", an empty key, or a path
// deeper than maxBodyPathDepth or with a key longer than maxBodyPathKey.
func ParseBodyField(s string) (BodyField, error) {
	path, value, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return BodyField{}, models.Errorf(models.EInvalid, "must be a path = value such as data.object.id=pi_123")
	}
	keys := strings.Split(path, ".")
	if len(keys) > maxBodyPathDepth {
		return BodyField{}, models.Errorf(models.EInvalid, "must have a path of at most %d keys", maxBodyPathDepth)
	}
	for _, k := range keys {
		if k == "" || len(k) > maxBodyPathKey {
			return BodyField{}, models.Errorf(models.EInvalid, "must have keys of 1 to %d characters between the dots", maxBodyPathKey)
		}
	}
	return BodyField{Path: keys, Value: value}, nil
}

// String is f as ParseBodyField reads it.
func (f BodyField) String() string {
	if len(f.Path) == 0 {
		return ""
	}
	return strings.Join(f.Path, ".") + "=" + f.Value
}

// documents are the JSON objects one of which a matching body contains:
// f's value as a string at f's path, and as a number or a boolean when it
// reads as one.
func (f BodyField) documents() []string {
	values := []any{f.Value}
	switch v := strings.TrimSpace(f.Value); {
	case v == "true" || v == "false":
		values = append(values, v == "true")
	case v != "" && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') && json.Valid([]byte(v)) && holdable(json.Number(v)):
		values = append(values, json.Number(v))
	}
	docs := make([]string, len(values))
	for i, v := range values {
		for _, k := range slices.Backward(f.Path) {
			v = map[string]any{k: v}
		}
		b, _ := json.Marshal(v) // strings, numbers and booleans: cannot fail
		docs[i] = string(b)
	}
	return docs
}

// bodyCondition is the SQL condition and its arguments of deliveries
// matching f: containment in body_json, through its GIN index
// (migrations/00025_body_search.sql), one per document of f.
func bodyCondition(f BodyField) (string, []any) {
	docs := f.documents()
	conds := make([]string, len(docs))
	args := make([]any, len(docs))
	for i, d := range docs {
		conds[i], args[i] = "body_json @> ?::jsonb", d
	}
	return "body_json IS NOT NULL AND (" + strings.Join(conds, " OR ") + ")", args
}
