// Package story reads what happened to one order, or because of one
// payment callback, across every table that keeps a trace of it: the
// callback deliveries and their outcomes, the order's status changes, its
// stock movements and payments, the outbox rows and job executions that
// followed, the invoice and the email. The admin console's detail pages
// tell that story, so that an admin can answer "what happened, and did it
// happen once?" without a SQL prompt. Like the audit, it reads across
// tables that other packages own; it writes nothing.
package story

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// timeFormat is how the timeline writes times in its details: as the
// console shows every time, UTC to the second.
const timeFormat = "2006-01-02 15:04:05"

// maxDeliveries bounds the deliveries a story reads per callback.
const maxDeliveries = 500

// Order is an order's whole story.
type Order struct {
	Order       models.Order // with items, payments and invoice
	Transitions []models.OrderTransition
	Movements   []models.StockMovement
	Callbacks   []models.PaymentCallback
	Deliveries  map[int64][]models.CallbackDelivery // by callback id, oldest first
	Outbox      []models.OutboxMessage
	Jobs        []models.JobExecution
	Emails      []models.OutboundEmail
	// GatewayRequests are the calls Sekali made to gateways for the
	// order (its hosted payment page, its refunds), oldest first.
	GatewayRequests []models.GatewayRequest
	// Refunds are the refunds of the order's charges at their gateways,
	// in their gateway's states, oldest first.
	Refunds []models.Refund
	// Corrections are the owners' corrections of its total (action-log
	// entries), oldest first.
	Corrections []models.AdminAction
	Timeline    []Event
}

// OwnRefund reports whether callback cb is the gateway telling of a
// refund Sekali itself asked of it, and had already recorded from the
// gateway's answer: a refunded event found stale, of the amount of one
// of the order's refund calls to that gateway that went out. Such a
// callback changes nothing because nothing was left to change — no
// fault.
func (s *Order) OwnRefund(cb models.PaymentCallback) bool { return ownRefund(cb, s.GatewayRequests) }

// Traces are the trace ids of the deliveries that applied the order's
// callbacks (processed or stale), oldest first: the trace of the paid
// callback runs on through its invoice and email jobs. None when tracing
// was off.
func (s *Order) Traces() []string {
	var ids []string
	for _, cb := range s.Callbacks {
		for _, d := range s.Deliveries[cb.ID] {
			applied := d.Outcome == models.OutcomeProcessed || d.Outcome == models.OutcomeStale
			if applied && d.TraceID != "" && !slices.Contains(ids, d.TraceID) {
				ids = append(ids, d.TraceID)
			}
		}
	}
	return ids
}

// ownRefund is OwnRefund against the calls reqs (those of cb's order).
func ownRefund(cb models.PaymentCallback, reqs []models.GatewayRequest) bool {
	if cb.EventStatus != models.EventRefunded || cb.Result != models.ResultStale {
		return false
	}
	for _, r := range reqs {
		if r.Kind == models.GatewayRefund && r.OrderID == cb.OrderID && r.Provider == cb.Provider &&
			r.Amount == cb.Amount && r.Currency == cb.Currency && r.Phase.WentOut() {
			return true
		}
	}
	return false
}

// approvalEvent is the line of an owner's answer to refund r, which
// waited for approval: who asked and who approved or declined it; none
// (false) when it needed no approval or still waits.
func approvalEvent(r models.GatewayRequest) (Event, bool) {
	asked := fmt.Sprintf("%d %s asked by %s: %s", r.Amount, r.Currency, r.RequestedBy, r.Reason)
	switch {
	case r.ApprovedAt != nil:
		return Event{At: *r.ApprovedAt, Tone: "ok", What: fmt.Sprintf("refund %s approved by %s", r.IdempotencyKey, r.ApprovedBy), Detail: asked}, true
	case r.DeclinedAt != nil:
		return Event{At: *r.DeclinedAt, Tone: "bad", What: fmt.Sprintf("refund %s declined by %s", r.IdempotencyKey, r.DeclinedBy), Detail: asked + "; never sent"}, true
	}
	return Event{}, false
}

// OwnRefunds says, for a page of callbacks of any orders, which tell of
// Sekali's own refund (OwnRefund), by callback id: one query, for the
// refund calls of the orders of the callbacks that could.
func (r *Reader) OwnRefunds(ctx context.Context, cbs []models.PaymentCallback) (map[int64]bool, error) {
	var orders []string
	for _, cb := range cbs {
		if cb.EventStatus == models.EventRefunded && cb.Result == models.ResultStale && cb.OrderID != "" {
			orders = append(orders, cb.OrderID)
		}
	}
	own := map[int64]bool{}
	if len(orders) == 0 {
		return own, nil
	}
	var reqs []models.GatewayRequest
	err := r.db.WithContext(ctx).Where("order_id IN ? AND kind = ?", orders, models.GatewayRefund).Find(&reqs).Error
	if err != nil {
		return nil, fmt.Errorf("story.OwnRefunds: %w", store.Classify(err))
	}
	for _, cb := range cbs {
		if ownRefund(cb, reqs) {
			own[cb.ID] = true
		}
	}
	return own, nil
}

// secondCharge reports whether callback cb recorded a second charge: a
// paid event, processed, that moved no order status (the order had had
// its charge: moved is false) and whose charge must go back
// (refund_required, or refunded from it). A late payment that took the
// stock back, or found none, moved the order: it is no second charge.
func secondCharge(cb models.PaymentCallback, moved bool, charge *models.Payment) bool {
	if cb.EventStatus != models.EventPaid || cb.Result != models.ResultProcessed || moved || charge == nil {
		return false
	}
	return charge.Status == models.PaymentRefundRequired || charge.RefundedFrom == models.PaymentRefundRequired
}

// SecondCharge reports whether callback cb of the order recorded a second
// charge (secondCharge): its charge among the order's payments, and its
// status changes among the order's.
func (s *Order) SecondCharge(cb models.PaymentCallback) bool {
	moved := slices.ContainsFunc(s.Transitions, func(t models.OrderTransition) bool {
		return t.CallbackID != nil && *t.CallbackID == cb.ID
	})
	for i, p := range s.Order.Payments {
		if p.Provider == cb.Provider && p.ProviderReference == cb.TransactionID {
			return secondCharge(cb, moved, &s.Order.Payments[i])
		}
	}
	return false
}

// SecondChargeResult is how a callback that recorded a second charge is
// shown, beside its result (processed): the charge is the customer's
// money to give back, not the order's payment.
const SecondChargeResult = "second charge"

// SecondCharges says, for a page of callbacks of any orders, which
// recorded a second charge (secondCharge), by callback id: one query.
func (r *Reader) SecondCharges(ctx context.Context, cbs []models.PaymentCallback) (map[int64]bool, error) {
	var ids []int64
	for _, cb := range cbs {
		if cb.EventStatus == models.EventPaid && cb.Result == models.ResultProcessed {
			ids = append(ids, cb.ID)
		}
	}
	second := map[int64]bool{}
	if len(ids) == 0 {
		return second, nil
	}
	var found []int64
	err := r.db.WithContext(ctx).Raw(`SELECT cb.id FROM payment_callbacks cb
JOIN payments p ON p.provider = cb.provider AND p.provider_reference = cb.transaction_id
WHERE cb.id IN ? AND (p.status = ? OR p.refunded_from = ?)
  AND NOT EXISTS (SELECT 1 FROM order_transitions t WHERE t.callback_id = cb.id)`,
		ids, models.PaymentRefundRequired, models.PaymentRefundRequired).Scan(&found).Error
	if err != nil {
		return nil, fmt.Errorf("story.SecondCharges: %w", store.Classify(err))
	}
	for _, id := range found {
		second[id] = true
	}
	return second, nil
}

// OwnRefundResult is how a callback that OwnRefund tells of is shown,
// beside its result (stale).
const OwnRefundResult = "told of our own refund"

// Callback is what one payment callback was and what it caused.
type Callback struct {
	Callback    models.PaymentCallback
	Deliveries  []models.CallbackDelivery // oldest first
	Transitions []models.OrderTransition  // the order status changes it made
	Movements   []models.StockMovement    // the stock those changes moved
	Payment     *models.Payment           // the charge it names, if recorded
	Outbox      []models.OutboxMessage    // the tasks its effect wrote
	Jobs        []models.JobExecution     // the runs of those tasks
	OwnRefund   bool                      // it tells of Sekali's own refund (Order.OwnRefund)
	// SecondCharge: it recorded a second charge of an order that had had
	// its own (Order.SecondCharge).
	SecondCharge bool
	// Accepted is the kept body of the first delivery that was not a
	// conflict: the payload the callback's fingerprint is of (nil when
	// none was kept). Conflicting are the kept bodies of the latest
	// conflicting deliveries, newest first, at most maxConflictsShown.
	Accepted    *models.CallbackDelivery
	Conflicting []models.CallbackDelivery
}

// maxConflictsShown bounds the conflicting bodies a callback's story reads.
const maxConflictsShown = 3

// Event is one line of an order's timeline. Ref names what it links to:
// callback:ID, job:KEY, outbox:TASK_ID, product:SKU (empty: nothing).
type Event struct {
	At     time.Time
	What   string
	Detail string
	Tone   string // ok, bad, warn, info or ""
	Ref    string
}

// Reader reads stories.
type Reader struct {
	db    *gorm.DB
	tasks Tasks
}

// Tasks makes the outbox rows of the business tasks an order can have
// (jobs.Tasks in the app): the story reads their ids, the only idempotency
// keys the order's outbox rows and job rows can carry.
type Tasks interface {
	Expire(orderID string, expiresAt time.Time) models.OutboxMessage
	Paid(orderID, requestID string, now time.Time) []models.OutboxMessage
	Refund(refundRequestID int64, orderID, requestID string, now time.Time) models.OutboxMessage
	RefundSucceeded(orderID string, refundID int64, requestID string, now time.Time) models.OutboxMessage
	RefundFailed(orderID string, refundID int64, requestID string, now time.Time) models.OutboxMessage
	Ended(orderID string, status models.OrderStatus, now time.Time) []models.OutboxMessage
}

// endedStatuses are the states a pending order ends in.
var endedStatuses = []models.OrderStatus{models.OrderCancelled, models.OrderExpired, models.OrderFailed}

// endedTaskIDs are the ids of the tasks orderID's ending in status causes.
func (r *Reader) endedTaskIDs(orderID string, status models.OrderStatus) []string {
	var ids []string
	for _, m := range r.tasks.Ended(orderID, status, time.Time{}) {
		ids = append(ids, m.TaskID)
	}
	return ids
}

// paidTaskIDs are the ids of the tasks a payment of orderID causes.
func (r *Reader) paidTaskIDs(orderID string) []string {
	var ids []string
	for _, m := range r.tasks.Paid(orderID, "", time.Time{}) {
		ids = append(ids, m.TaskID)
	}
	return ids
}

// taskIDs are the ids of every business task orderID can have, but
// those of its refunds.
func (r *Reader) taskIDs(orderID string) []string {
	ids := append(r.paidTaskIDs(orderID), r.tasks.Expire(orderID, time.Time{}).TaskID)
	for _, status := range endedStatuses {
		ids = append(ids, r.endedTaskIDs(orderID, status)...)
	}
	return ids
}

// New returns a reader.
func New(db *gorm.DB, tasks Tasks) *Reader { return &Reader{db: db, tasks: tasks} }

// Order reads the story of order id; ENotFound if there is no such order.
func (r *Reader) Order(ctx context.Context, id string) (*Order, error) {
	if !models.ValidOrderID(id) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	db := r.db.WithContext(ctx)
	s := &Order{Deliveries: map[int64][]models.CallbackDelivery{}}
	err := db.Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("sku") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).
		Preload("Invoice").Take(&s.Order, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("story.Order: %w", store.Classify(err))
	}
	// The calls to gateways first: each refund asked has its own job.
	if err := db.Where("order_id = ?", id).Order("id").Find(&s.GatewayRequests).Error; err != nil {
		return nil, fmt.Errorf("story.Order: gateway requests: %w", store.Classify(err))
	}
	keys := r.taskIDs(id)
	for _, g := range s.GatewayRequests {
		if g.Kind == models.GatewayRefund {
			keys = append(keys, r.tasks.Refund(g.ID, id, "", time.Time{}).TaskID)
		}
	}
	emailKeys := []string{mail.Key(mail.OrderPaid, id), mail.Key(mail.OrderCancelled, id), mail.Key(mail.OrderExpired, id)}
	// The refunds, then the emails each one's success and failure write.
	if err := db.Where("order_id = ?", id).Order("id").Find(&s.Refunds).Error; err != nil {
		return nil, fmt.Errorf("story.Order: refunds: %w", store.Classify(err))
	}
	for _, rf := range s.Refunds {
		keys = append(keys, r.tasks.RefundSucceeded(id, rf.ID, "", time.Time{}).TaskID, r.tasks.RefundFailed(id, rf.ID, "", time.Time{}).TaskID)
		emailKeys = append(emailKeys, mail.RefundKey(mail.RefundSucceeded, id, rf.ID), mail.RefundKey(mail.RefundFailed, id, rf.ID))
	}
	steps := []struct {
		what string
		q    *gorm.DB
	}{
		{"transitions", db.Where("order_id = ?", id).Order("id").Find(&s.Transitions)},
		{"movements", db.Where("order_id = ?", id).Order("id").Find(&s.Movements)},
		{"callbacks", db.Where("order_id = ?", id).Order("id").Limit(200).Find(&s.Callbacks)},
		{"outbox", db.Where("task_id IN ?", keys).Order("id").Find(&s.Outbox)},
		{"jobs", db.Where("idempotency_key IN ?", keys).Order("id").Find(&s.Jobs)},
		{"emails", db.Where("key IN ?", emailKeys).Order("id").Find(&s.Emails)},
		{"corrections", db.Where("action = ? AND target = ? AND result = ?", models.ActionCorrectTotal, orders.CorrectionTarget(id), models.ActionOK).
			Order("id").Find(&s.Corrections)},
	}
	for _, st := range steps {
		if st.q.Error != nil {
			return nil, fmt.Errorf("story.Order: %s: %w", st.what, store.Classify(st.q.Error))
		}
	}
	for _, cb := range s.Callbacks {
		ds, err := r.deliveries(ctx, cb.ID)
		if err != nil {
			return nil, err
		}
		s.Deliveries[cb.ID] = ds
	}
	s.Timeline = timeline(s)
	return s, nil
}

// Callback reads what callback id was and caused; ENotFound if there is
// no such callback.
func (r *Reader) Callback(ctx context.Context, id int64) (*Callback, error) {
	db := r.db.WithContext(ctx)
	s := &Callback{}
	err := db.Take(&s.Callback, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no callback %d", id)
	}
	if err != nil {
		return nil, fmt.Errorf("story.Callback: %w", store.Classify(err))
	}
	if s.Deliveries, err = r.deliveries(ctx, id); err != nil {
		return nil, err
	}
	if err := r.keptBodies(ctx, s); err != nil {
		return nil, err
	}
	own, err := r.OwnRefunds(ctx, []models.PaymentCallback{s.Callback})
	if err != nil {
		return nil, err
	}
	s.OwnRefund = own[id]
	if err := db.Where("callback_id = ?", id).Order("id").Find(&s.Transitions).Error; err != nil {
		return nil, fmt.Errorf("story.Callback: transitions: %w", store.Classify(err))
	}
	var payments []models.Payment
	err = db.Where("provider = ? AND provider_reference = ?", s.Callback.Provider, s.Callback.TransactionID).Limit(1).Find(&payments).Error
	if err != nil {
		return nil, fmt.Errorf("story.Callback: payment: %w", store.Classify(err))
	}
	if len(payments) == 1 {
		s.Payment = &payments[0]
	}
	s.SecondCharge = secondCharge(s.Callback, len(s.Transitions) > 0, s.Payment)
	// What the status changes caused: stock moved back on failure and
	// expiry, with the customer's email of an expiry; stock taken again
	// on a late payment; the invoice and email tasks when the order
	// became paid. Each happens once per order (unique indexes), so the
	// order's rows of that kind are this callback's.
	var kinds []models.MovementKind
	var keys []string
	orderID := s.Callback.OrderID
	for _, t := range s.Transitions {
		switch {
		case t.ToStatus == models.OrderFailed || t.ToStatus == models.OrderExpired:
			kinds = append(kinds, models.MovementRelease)
			keys = append(keys, r.endedTaskIDs(orderID, t.ToStatus)...)
		case t.ToStatus == models.OrderPaid && t.FromStatus != models.OrderPending:
			kinds = append(kinds, models.MovementRereserve)
			keys = append(keys, r.paidTaskIDs(orderID)...)
		case t.ToStatus == models.OrderPaid:
			keys = append(keys, r.paidTaskIDs(orderID)...)
		}
	}
	if len(kinds) > 0 {
		err := db.Where("order_id = ? AND kind IN ?", orderID, kinds).Order("id").Find(&s.Movements).Error
		if err != nil {
			return nil, fmt.Errorf("story.Callback: movements: %w", store.Classify(err))
		}
	}
	if len(keys) > 0 {
		if err := db.Where("task_id IN ?", keys).Order("id").Find(&s.Outbox).Error; err != nil {
			return nil, fmt.Errorf("story.Callback: outbox: %w", store.Classify(err))
		}
		if err := db.Where("idempotency_key IN ?", keys).Order("id").Find(&s.Jobs).Error; err != nil {
			return nil, fmt.Errorf("story.Callback: jobs: %w", store.Classify(err))
		}
	}
	return s, nil
}

// keptBodies reads the bodies a callback's page compares: the accepted
// one and the latest conflicting ones, each through the partial index of
// the rows that keep one.
func (r *Reader) keptBodies(ctx context.Context, s *Callback) error {
	db := r.db.WithContext(ctx)
	var accepted []models.CallbackDelivery
	err := db.Where("callback_id = ? AND outcome <> ? AND body IS NOT NULL", s.Callback.ID, models.OutcomeConflict).
		Order("id").Limit(1).Find(&accepted).Error
	if err != nil {
		return fmt.Errorf("story.Callback: kept body: %w", store.Classify(err))
	}
	if len(accepted) == 1 {
		s.Accepted = &accepted[0]
	}
	err = db.Where("callback_id = ? AND outcome = ? AND body IS NOT NULL", s.Callback.ID, models.OutcomeConflict).
		Order("id DESC").Limit(maxConflictsShown).Find(&s.Conflicting).Error
	if err != nil {
		return fmt.Errorf("story.Callback: conflicting bodies: %w", store.Classify(err))
	}
	return nil
}

func (r *Reader) deliveries(ctx context.Context, callbackID int64) ([]models.CallbackDelivery, error) {
	var ds []models.CallbackDelivery
	err := r.db.WithContext(ctx).Omit(payments.KeptColumns...).Where("callback_id = ?", callbackID).Order("id").Limit(maxDeliveries).Find(&ds).Error
	if err != nil {
		return nil, fmt.Errorf("story: deliveries of callback %d: %w", callbackID, store.Classify(err))
	}
	return ds, nil
}

// timeline puts the order's story in time order: creation, each callback
// (with its deliveries counted by outcome), each status change, the stock
// movements, the tasks and their runs, the invoice and the email.
func timeline(s *Order) []Event {
	o := s.Order
	var evs []Event
	add := func(e Event) { evs = append(evs, e) }
	add(Event{At: o.CreatedAt, What: "order created", Tone: "info",
		Detail: fmt.Sprintf("%d item(s), total %d %s, holds its stock until %s", len(o.Items), o.TotalAmount, o.Currency,
			o.ExpiresAt.UTC().Format(timeFormat))})
	for _, a := range s.Corrections {
		add(Event{At: a.CreatedAt, Tone: "warn", What: "total corrected by " + a.AdminEmail, Detail: a.Detail})
	}
	for _, cb := range s.Callbacks {
		counts := map[string]int{}
		for _, d := range s.Deliveries[cb.ID] {
			counts[d.Outcome]++
		}
		tone := "ok"
		switch {
		case cb.Status == models.CallbackRejected:
			tone = "bad"
		case cb.ConflictCount > 0:
			tone = "warn"
		case cb.Result == models.ResultStale:
			tone = ""
		}
		result := cb.Result
		switch {
		case s.OwnRefund(cb):
			result = OwnRefundResult + " (" + cb.Result + ")"
		case s.SecondCharge(cb):
			result = SecondChargeResult + " (" + cb.Result + "): to be refunded"
			tone = "warn"
		}
		add(Event{At: cb.FirstReceivedAt, Tone: tone, Ref: "callback:" + strconv.FormatInt(cb.ID, 10),
			What:   fmt.Sprintf("callback %s %q: %s", cb.Provider, cb.IdempotencyKey, result),
			Detail: fmt.Sprintf("%s, %s, %d %s; deliveries: %s", cb.EventStatus, cb.TransactionID, cb.Amount, cb.Currency, countsText(counts))})
	}
	for _, t := range s.Transitions {
		tone := "info"
		switch t.ToStatus {
		case models.OrderPaid:
			tone = "ok"
		case models.OrderFailed, models.OrderRefundRequired:
			tone = "bad"
		case models.OrderExpired, models.OrderCancelled:
			tone = "warn"
		}
		e := Event{At: t.CreatedAt, Tone: tone, What: fmt.Sprintf("status %s → %s", t.FromStatus, t.ToStatus), Detail: "by " + t.Cause}
		if t.CallbackID != nil {
			e.Ref = "callback:" + strconv.FormatInt(*t.CallbackID, 10)
		}
		add(e)
	}
	for _, m := range s.Movements {
		add(Event{At: m.CreatedAt, Ref: "product:" + m.SKU,
			What: fmt.Sprintf("stock %s: %s × %d", m.Kind, m.SKU, m.Qty)})
	}
	for _, m := range s.Outbox {
		d := fmt.Sprintf("queue %s, due %s", m.Queue, m.ProcessAt.UTC().Format(timeFormat))
		if m.DispatchedAt != nil {
			d += ", handed to the queue " + m.DispatchedAt.UTC().Format(timeFormat)
		}
		add(Event{At: m.CreatedAt, Ref: "outbox:" + m.TaskID, What: "task written: " + m.TaskID, Detail: d})
	}
	for _, j := range s.Jobs {
		tone := map[models.JobStatus]string{models.JobSucceeded: "ok", models.JobFailed: "bad", models.JobProcessing: "info"}[j.Status]
		d := fmt.Sprintf("attempt %d, fence %d, worker %s", j.Attempts, j.Fence, j.WorkerID)
		if j.LastError != "" {
			d += "; last error: " + j.LastError
		}
		at := j.StartedAt
		if j.FinishedAt != nil {
			at = *j.FinishedAt
		}
		add(Event{At: at, Tone: tone, Ref: "job:" + j.IdempotencyKey, What: fmt.Sprintf("job %s: %s", j.IdempotencyKey, j.Status), Detail: d})
	}
	for _, r := range s.GatewayRequests {
		tone := map[models.GatewayPhase]string{models.GatewayDone: "ok", models.GatewayFailed: "bad", models.GatewaySent: "warn",
			models.GatewayAwaitingApproval: "warn", models.GatewayDeclined: "bad", models.GatewayDiscarded: "bad", models.GatewayConflict: "bad"}[r.Phase]
		d := fmt.Sprintf("key %s, %d attempt(s)", r.IdempotencyKey, r.Attempts)
		if r.ProviderObjectID != "" {
			d += ", object " + r.ProviderObjectID
		}
		if r.LastError != "" {
			d += "; last error: " + r.LastError
		}
		what := fmt.Sprintf("asked %s: %s, %s", r.Provider, r.Kind, r.Phase)
		if r.Kind == models.GatewayRefund {
			what = fmt.Sprintf("refund of %d %s asked of %s: %s", r.Amount, r.Currency, r.Provider, r.Phase)
			d = fmt.Sprintf("by %s: %s; %s", r.RequestedBy, r.Reason, d)
			if e, ok := approvalEvent(r); ok {
				add(e)
			}
		}
		add(Event{At: r.UpdatedAt, Tone: tone, What: what, Detail: d})
	}
	for _, rf := range s.Refunds {
		add(refundEvent(rf))
	}
	if inv := o.Invoice; inv != nil {
		add(Event{At: inv.IssuedAt, Tone: "ok", What: "invoice " + inv.Number + " issued", Detail: fmt.Sprintf("%d %s", inv.Amount, inv.Currency)})
	}
	for _, e := range s.Emails {
		ev := Event{At: e.CreatedAt, What: fmt.Sprintf("email %s: %s", e.Key, e.Status), Tone: "info",
			Detail: fmt.Sprintf("to %s, Message-ID %s, %d attempt(s)", e.To, e.MessageID, e.Attempts)}
		if e.SentAt != nil {
			ev.At, ev.Tone = *e.SentAt, "ok"
		}
		add(ev)
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return a.At.Compare(b.At) })
	return evs
}

// countsText writes outcome counts as "1 processed, 4 duplicate".
func countsText(counts map[string]int) string {
	if len(counts) == 0 {
		return "none recorded yet"
	}
	order := []string{models.OutcomeProcessed, models.OutcomeStale, models.OutcomeDuplicate, models.OutcomeConflict,
		models.OutcomeRejected, models.OutcomeError}
	var out string
	for _, k := range order {
		if n := counts[k]; n > 0 {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%d %s", n, k)
		}
	}
	return out
}

// What became of an email, as the customer's order page shows it.
const (
	EmailSent   = "sent"   // handed to the mail server
	EmailLogged = "logged" // written to the log, sent to no one: SMTP_URL is unset
	// EmailDiscarded: an operator discarded its job for good; it will
	// not be sent.
	EmailDiscarded = "discarded"
)

// ConfirmationEmail is what became of the payment confirmation of order
// id: EmailSent, EmailLogged, EmailDiscarded, or "" while it has not gone
// out.
func (r *Reader) ConfirmationEmail(ctx context.Context, orderID string) (string, error) {
	var es []models.OutboundEmail
	err := r.db.WithContext(ctx).Where("key = ? AND status = ?", mail.Key(mail.OrderPaid, orderID), models.EmailSent).
		Limit(1).Find(&es).Error
	switch {
	case err != nil:
		return "", fmt.Errorf("story.ConfirmationEmail: %w", store.Classify(err))
	case len(es) == 0:
		return r.confirmationDiscarded(ctx, orderID)
	case es[0].Logged:
		return EmailLogged, nil
	}
	return EmailSent, nil
}

// confirmationDiscarded is EmailDiscarded when the job that sends order
// orderID's payment confirmation was discarded, "" otherwise (it is
// still to go out). The job's key is the one the audit reads too.
func (r *Reader) confirmationDiscarded(ctx context.Context, orderID string) (string, error) {
	var n int64
	err := r.db.WithContext(ctx).Model(&models.JobExecution{}).
		Where("idempotency_key = ? AND status = ?", "email:send:"+mail.Key(mail.OrderPaid, orderID), models.JobDiscarded).
		Count(&n).Error
	switch {
	case err != nil:
		return "", fmt.Errorf("story.ConfirmationEmail: %w", store.Classify(err))
	case n > 0:
		return EmailDiscarded, nil
	}
	return "", nil
}

// RefundsUndone are the refunds of order orderID its customer was told
// went through (their refund_succeeded email sent) that failed since,
// oldest first: the customer's order page says each did not go through,
// as their refund_failed email does. A refund that failed before its
// customer heard of it is not among them: nothing told them of it.
func (r *Reader) RefundsUndone(ctx context.Context, orderID string) ([]models.Refund, error) {
	db := r.db.WithContext(ctx)
	var failed []models.Refund
	err := db.Where("order_id = ? AND status IN ?", orderID, []models.RefundStatus{models.RefundFailed, models.RefundCanceled}).
		Order("id").Find(&failed).Error
	if err != nil {
		return nil, fmt.Errorf("story.RefundsUndone: %w", store.Classify(err))
	}
	if len(failed) == 0 {
		return nil, nil
	}
	keys := make([]string, len(failed))
	for i, rf := range failed {
		keys[i] = mail.RefundKey(mail.RefundSucceeded, orderID, rf.ID)
	}
	var told []string
	if err := db.Model(&models.OutboundEmail{}).Where("key IN ? AND status = ?", keys, models.EmailSent).Pluck("key", &told).Error; err != nil {
		return nil, fmt.Errorf("story.RefundsUndone: %w", store.Classify(err))
	}
	var undone []models.Refund
	for i, rf := range failed {
		if slices.Contains(told, keys[i]) {
			undone = append(undone, rf)
		}
	}
	return undone, nil
}

// refundEvent is a refund at its gateway as the timeline tells it: its
// amount and state, and for one that failed the gateway's reason. A
// charge total that the gateway has since named refund by refund is told
// as such.
func refundEvent(rf models.Refund) Event {
	tone := map[models.RefundStatus]string{models.RefundSucceeded: "ok", models.RefundPending: "info",
		models.RefundFailed: "bad", models.RefundCanceled: "bad"}[rf.Status]
	what := fmt.Sprintf("refund %s of %s at %s: %s", rf.RefundKey, models.Money(rf.Amount, rf.Currency), rf.Provider, rf.Status)
	detail := ""
	switch rf.Status {
	case models.RefundPending:
		detail = "accepted by the gateway, not final: it counts until the gateway says it failed"
	case models.RefundFailed, models.RefundCanceled:
		detail = "the money is the charge's again; the gateway says: " + rf.FailureReason
	case models.RefundSuperseded:
		detail = "a charge total the gateway has since named refund by refund: counted by those"
	}
	ref := ""
	if rf.CallbackID != nil {
		ref = "callback:" + strconv.FormatInt(*rf.CallbackID, 10)
	}
	return Event{At: rf.UpdatedAt, Tone: tone, What: what, Detail: detail, Ref: ref}
}
