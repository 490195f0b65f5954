package payments

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/models"
)

// connectionRetries is how many times apply runs again after a broken
// connection: running it again is safe, because the event's unique key
// turns a second application into a duplicate.
const connectionRetries = 3

// apply reserves the event's idempotency key and applies its effect in one
// transaction, trying again on a fresh connection when the one it got was
// dead (as after a database restart).
func (s *Service) apply(ctx context.Context, provider string, ev Event, d Delivery) (out Outcome, err error) {
	for attempt := 0; ; attempt++ {
		out, err = s.applyOnce(ctx, provider, ev, d)
		if err == nil || attempt == connectionRetries || !store.IsConnectionError(err) || ctx.Err() != nil {
			return out, err
		}
	}
}

// applyOnce is one try of apply. A key that this process has seen
// processed is answered from memory, without the database.
func (s *Service) applyOnce(ctx context.Context, provider string, ev Event, d Delivery) (Outcome, error) {
	// The cache keeps fingerprints only: a fact on either side from a
	// status poll is compared field by field, in the database.
	if e, ok := s.seen.get(provider, ev.Key); ok && !strings.HasPrefix(e.hash, polledPrefix) && !strings.HasPrefix(ev.Fingerprint, polledPrefix) {
		return repeat(&models.PaymentCallback{ID: e.callbackID, PayloadHash: e.hash, Status: models.CallbackProcessed}, ev), nil
	}
	var out Outcome
	var seen *models.PaymentCallback
	txCtx, span := tracing.Start(ctx, "payments.apply", attribute.String("sekali.provider", provider),
		attribute.String("sekali.order_id", ev.OrderID))
	err := store.Pipelined(txCtx, s.db, func(tx *store.Tx) error {
		var done *pgx.Batch
		var err error
		if out, seen, done, err = s.applyTx(txCtx, tx, provider, ev, d); err != nil {
			return err
		}
		return tx.Commit(done)
	})
	if span.IsRecording() {
		span.SetAttributes(attribute.String("sekali.result", out.Word()))
	}
	tracing.End(span, err)
	switch {
	case err != nil:
	case seen != nil && seen.Status == models.CallbackProcessed: // recorded before, by another delivery
		s.seen.add(provider, ev.Key, seenEvent{callbackID: seen.ID, hash: seen.PayloadHash})
	case out.recorded && out.Code() == "": // committed as processed (or stale) by this delivery
		s.seen.add(provider, ev.Key, seenEvent{callbackID: *out.callbackID, hash: ev.Fingerprint})
	}
	if err == nil && out.queued {
		s.relays.Wake() // after the commit: see outbox.Notifier
	}
	return out, err
}

// applyTx is the reserve-and-apply transaction:
//
//  1. record the event under its unique (provider, idempotency_key). A
//     concurrent delivery of the same event waits here, on the unique
//     index, until the first one commits, then finds the key taken and
//     answers duplicate (or conflict) without writing. A key whose
//     earlier delivery was rejected is taken over and evaluated again;
//  2. lock the order row (SELECT … FOR UPDATE), so all events of one
//     order apply one after the other;
//  3. decide what the event does (models.Decide), with the amount check;
//  4. apply the effect: order status, stock, payment row, outbox tasks;
//  5. complete the callback row and write this delivery's audit row.
//
// Steps 1 and 2 go to the database in one round trip. The statements of
// steps 4 and 5 — for a payment: the order's transition, the payment
// row, the outbox tasks, the callback's completion — are returned as
// done, for the caller to send in a second round trip with COMMIT (or,
// for a dry run, without); nil when this delivery does not own the
// event. The rarer effects (refunds, disputes, stock that moves) send
// their reads and writes through GORM before.
func (s *Service) applyTx(ctx context.Context, tx *store.Tx, provider string, ev Event, d Delivery) (Outcome, *models.PaymentCallback, *pgx.Batch, error) {
	now := s.now().UTC()
	cb := models.PaymentCallback{
		Provider: provider, IdempotencyKey: ev.Key, PayloadHash: ev.Fingerprint,
		OrderID: ev.OrderID, TransactionID: ev.TransactionID, EventStatus: ev.Status,
		Amount: ev.Amount, Currency: ev.Currency, Status: models.CallbackProcessed,
		Attempts: 1, FirstReceivedAt: now, LastReceivedAt: now,
	}
	// The order is locked even when the key turns out to be taken: that
	// costs a wait behind the order's other events, and saves a round
	// trip on every new one.
	var inserted bool
	var locked lockedOrder
	first := &pgx.Batch{}
	queueReserve(first, &cb, &inserted)
	queueLockOrder(first, provider, ev, &locked)
	if err := tx.Send(first); err != nil {
		return Outcome{}, nil, nil, err
	}
	if !inserted {
		owned, seen, err := s.takeOver(tx.DB(), &cb)
		if err != nil {
			return Outcome{}, nil, nil, err
		}
		if !owned {
			return repeat(seen, ev), seen, nil, nil
		}
	}

	o, charge := locked.order, locked.charge
	var refunds refundPlan
	if ev.Status == models.EventRefunded && charge != nil && charge.OrderID == ev.OrderID {
		var err error
		if refunds, err = planRefunds(tx.DB(), provider, ev, charge); err != nil {
			return Outcome{}, nil, nil, err
		}
	}
	dec := decide(ev, o, charge, refunds)
	out := Outcome{Result: dec.result, OrderStatus: dec.statusBefore, statusBefore: dec.statusBefore, callbackID: &cb.ID}
	result := callbackResult{status: models.CallbackProcessed, result: string(dec.result), processedAt: &now}
	done := &pgx.Batch{}
	var err error
	switch {
	case dec.reason != "":
		out.Result, out.Reason = models.ResultRejected, dec.reason
		out.Detail = rejectionDetail(dec.reason, ev, o, charge)
		result = callbackResult{status: models.CallbackRejected, result: dec.reason}
	case dec.action.Refunds():
		out.OrderStatus, out.queued, out.refundsFailed, err = s.refund(tx.DB(), o, charge, refunds, dec.action, cb.ID, d.RequestID)
	case dec.action == models.ActionDispute:
		err = s.dispute(tx.DB(), charge, ev)
	case dec.action != models.ActionStale:
		out.OrderStatus, out.queued, err = s.effect(ctx, tx, done, provider, ev, o, dec.action, cb.ID, d.RequestID)
	}
	if err != nil {
		return Outcome{}, nil, nil, err
	}
	out.recorded = true
	var note string
	if out.Result == models.ResultRejected {
		// Why it changed nothing, with both sides' values: the console
		// shows it on the delivery, whether a notification, a status
		// poll's answer or a refund's answer was rejected.
		note = models.Truncate("rejected: "+out.Detail, maxNoteLength)
	}
	completeStatement(cb.ID, result, s.keep(d, models.CallbackDelivery{
		CallbackID: &cb.ID, Provider: provider, ReceivedAt: now, Outcome: out.Word(),
		ResponseCode: out.Status(), DurationMS: int(s.now().Sub(now).Milliseconds()),
		RemoteAddr: d.RemoteAddr, RequestID: d.RequestID, TraceID: d.TraceID, Note: note,
	})).Queue(done)
	return out, nil, done, nil
}

// callbackResult is what the applying delivery records on the callback row.
type callbackResult struct {
	status      models.CallbackStatus
	result      string
	processedAt *time.Time
}

// decision is what an event will do, decided under the order lock.
type decision struct {
	action       models.Action
	result       Result // processed or stale
	reason       string // non-empty: the event is rejected
	statusBefore models.OrderStatus
}

// decide decides, under the order's lock, what the event does to order o
// given what is known of its charge, and for a refund what it adds.
func decide(ev Event, o *models.Order, charge *models.Payment, refunds refundPlan) decision {
	if o == nil {
		return decision{reason: models.ReasonUnknownOrder}
	}
	dec := decision{statusBefore: o.Status}
	if charge != nil && charge.OrderID != o.ID {
		dec.reason = models.ReasonReferenceMismatch
		return dec
	}
	// A charge that was taken — and perhaps refunded since — has been
	// applied before: a paid event about it again is stale.
	var chargeStatus models.PaymentStatus // "" when the charge is unknown
	if charge != nil {
		chargeStatus = charge.Status
	}
	chargeKnown := chargeStatus == models.PaymentSucceeded || chargeStatus == models.PaymentRefundRequired ||
		chargeStatus == models.PaymentRefunded
	if _, dispute := models.DisputeOf(ev.Status); dispute {
		var current models.Dispute
		var held int64
		if charge != nil {
			current, held = charge.Dispute, charge.DisputedAmount
		}
		dec.action = models.DecideDispute(ev.Status, chargeStatus, current, held, ev.Amount)
		if dec.action == models.ActionDispute && ev.Currency != charge.Currency {
			// What it holds is counted in the charge's currency: a dispute
			// told in another holds nothing.
			dec.reason = models.ReasonCurrencyMismatch
			return dec
		}
	} else if ev.Status == models.EventRefunded {
		dec.action, dec.reason = decideRefund(ev, o, charge, refunds)
		if dec.reason != "" {
			return dec
		}
	} else {
		dec.action = models.Decide(o.Status, ev.Status, chargeKnown)
	}
	if dec.action.ChecksAmount() {
		switch {
		case ev.Currency != o.Currency:
			dec.reason = models.ReasonCurrencyMismatch
		case ev.Amount != o.TotalAmount:
			dec.reason = models.ReasonAmountMismatch
		}
	}
	dec.result = models.ResultProcessed
	if dec.action == models.ActionStale {
		dec.result = models.ResultStale
	}
	return dec
}

// takeOver is reserve's second half, for a key that was taken: it reports
// whether this delivery owns the event nevertheless — a key whose earlier
// delivery was rejected is evaluated again, for the same fact, or for any
// fact when the rejected one came from the gateway's API (the row stays
// locked until the transaction ends). Otherwise it returns the recorded
// row, which the delivery that owned it has committed.
func (s *Service) takeOver(tx *gorm.DB, cb *models.PaymentCallback) (owned bool, seen *models.PaymentCallback, err error) {
	// ON CONFLICT waited for the row's transaction to end, so the row is
	// committed and this statement sees it.
	if seen, err = s.find(tx, cb.Provider, cb.IdempotencyKey); err != nil || seen == nil {
		return false, nil, errors.Join(err, errors.New("payments: callback row vanished"))
	}
	same := sameFact(seen, Event{Fingerprint: cb.PayloadHash, OrderID: cb.OrderID,
		TransactionID: cb.TransactionID, Status: cb.EventStatus, Amount: cb.Amount, Currency: cb.Currency})
	// A rejected fact that came from the gateway's API holds its key
	// against nothing: the API may have answered wrongly, and what it or
	// the notification says now is evaluated afresh, under the same key.
	if seen.Status != models.CallbackRejected || !same && !strings.HasPrefix(seen.PayloadHash, polledPrefix) {
		return false, seen, nil
	}
	changes := map[string]any{"attempts": gorm.Expr("attempts + 1"), "last_received_at": cb.LastReceivedAt}
	if !same { // the row now records the new fact
		maps.Copy(changes, map[string]any{"payload_hash": cb.PayloadHash, "order_id": cb.OrderID, "transaction_id": cb.TransactionID,
			"event_status": cb.EventStatus, "amount": cb.Amount, "currency": cb.Currency})
	}
	res := tx.Model(&models.PaymentCallback{}).
		Where("id = ? AND status = ? AND payload_hash = ?", seen.ID, models.CallbackRejected, seen.PayloadHash).
		Updates(changes)
	if res.Error != nil {
		return false, nil, res.Error
	}
	if res.RowsAffected == 0 { // processed meanwhile by another delivery
		seen, err = s.find(tx, cb.Provider, cb.IdempotencyKey)
		return false, seen, err
	}
	cb.ID = seen.ID
	return true, nil, nil
}

// repeat answers a delivery of an event that is already recorded.
func repeat(seen *models.PaymentCallback, ev Event) Outcome {
	if !sameFact(seen, ev) {
		return Outcome{Result: models.ResultConflict, callbackID: &seen.ID,
			Detail: "this event id was delivered before with a different payload"}
	}
	if seen.Status == models.CallbackRejected { // rejected again meanwhile; answer as it was answered
		return Outcome{Result: models.ResultRejected, Reason: seen.Result, callbackID: &seen.ID,
			Detail: "the event was rejected: " + seen.Result}
	}
	return Outcome{Result: models.ResultDuplicate, callbackID: &seen.ID}
}

// polledPrefix starts the fingerprint of a fact learnt by asking the
// gateway (a status poll) rather than from its notification.
const polledPrefix = "poll:"

// sameFact reports whether ev says what the recorded callback said. Two
// deliveries of one notification carry one body, so their fingerprints
// are equal. A fact learnt by a status poll has no notification body: it
// is compared with the notification of the same key by what they say —
// order, charge, status, amount, currency — so a poll and a push of the
// same fact converge, whichever came first.
func sameFact(seen *models.PaymentCallback, ev Event) bool {
	if strings.HasPrefix(seen.PayloadHash, polledPrefix) || strings.HasPrefix(ev.Fingerprint, polledPrefix) {
		return seen.OrderID == ev.OrderID && seen.TransactionID == ev.TransactionID &&
			seen.EventStatus == ev.Status && seen.Amount == ev.Amount && seen.Currency == ev.Currency
	}
	return seen.PayloadHash == ev.Fingerprint
}

func (s *Service) find(db *gorm.DB, provider, key string) (*models.PaymentCallback, error) {
	var cb models.PaymentCallback
	err := db.Take(&cb, "provider = ? AND idempotency_key = ?", provider, key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &cb, nil
}

// effect applies a non-stale action other than a refund (refund.go) to
// the locked order and returns the order's status afterwards, and whether
// it writes tasks to the outbox (a payment's, or the email of an order
// that ends). The order's transition, the payment row and the tasks are
// queued in b; an order that ends (releasing its stock, writing its
// email) or takes its stock back reads and moves its items first.
func (s *Service) effect(ctx context.Context, tx *store.Tx, b *pgx.Batch, provider string, ev Event, o *models.Order, action models.Action, callbackID int64, requestID string) (_ models.OrderStatus, queued bool, err error) {
	now := s.now()
	cause := orders.Cause{What: models.CauseCallback, CallbackID: &callbackID}
	payStatus, _ := action.PaymentStatus()
	to := action.OrderStatusAfter(o.Status)
	if action == models.ActionRereserve { // a late payment takes the stock back, if it is still there
		if to, err = rereserve(tx.DB(), o); err != nil {
			return "", false, err
		}
		payStatus = models.PaymentSucceeded
		if to == models.OrderRefundRequired {
			payStatus = models.PaymentRefundRequired
		}
	}
	after := o.Status
	switch from := action.OrderFrom(); {
	case action.Releases():
		if err := orders.EndTx(tx.DB(), s.tasks, o, to, now, cause); err != nil {
			return "", false, err
		}
		after = o.Status
		queued = len(s.tasks.Ended(o.ID, to, now)) > 0 // the customer's email of an expiry
	case from != nil:
		// The statement fails unless the order moves (orders.NewMove).
		move := orders.NewMove(o, to, now, cause, from...)
		move.Statement.Queue(b).Exec(func(tag pgconn.CommandTag) error { return move.Done(tag.RowsAffected()) })
		after = to
	}
	paymentStatement(provider, ev, o.ID, payStatus, now).Queue(b)
	paid := action.OrderFrom() != nil && after == models.OrderPaid // this event pays the order
	if paid {
		outbox.Queue(ctx, b, s.tasks.Paid(o.ID, requestID, now)...)
	}
	return after, queued || paid, nil
}

// rereserve takes a late-paid order's stock back: paid when every item is
// still in stock, refund_required when any is short (nothing is taken then).
func rereserve(tx *gorm.DB, o *models.Order) (models.OrderStatus, error) {
	if err := orders.LoadItems(tx, o); err != nil {
		return "", err
	}
	done, err := orders.Reserve(tx, o.ID, o.Items, models.MovementRereserve)
	switch {
	case models.ErrorCode(err) == models.EInsufficientStock:
		return models.OrderRefundRequired, nil
	case err != nil:
		return "", err
	case !done:
		return "", fmt.Errorf("payments: order %s was re-reserved before but is %s", o.ID, o.Status)
	}
	return models.OrderPaid, nil
}

// reasonWords are the rejection reasons in words, for a delivery whose
// row kept no detail of its own.
var reasonWords = map[string]string{
	models.ReasonUnknownOrder:         "no such order",
	models.ReasonAmountMismatch:       "the amount paid does not match the order total",
	models.ReasonCurrencyMismatch:     "the currency does not match the order's",
	models.ReasonReferenceMismatch:    "its transaction belongs to another order",
	models.ReasonRefundExceedsPayment: "the refunds would exceed what the charge paid",
	models.ReasonRefundOfOtherCharge:  "it names a refund of another charge",
}

// ReasonWords says rejection reason in words ("" for one it does not
// know).
func ReasonWords(reason string) string { return reasonWords[reason] }

// rejectionDetail says why an event was rejected; for a mismatch, with
// what the event says and what it was compared with, both.
func rejectionDetail(reason string, ev Event, o *models.Order, charge *models.Payment) string {
	switch reason {
	case models.ReasonUnknownOrder:
		return fmt.Sprintf("no order %q", ev.OrderID)
	case models.ReasonAmountMismatch:
		return fmt.Sprintf("paid_amount %d %s does not match the order total %d %s", ev.Amount, ev.Currency, o.TotalAmount, o.Currency)
	case models.ReasonCurrencyMismatch:
		if charge != nil && ev.Status != models.EventPaid { // a refund or a dispute is compared with its payment
			return fmt.Sprintf("currency %s does not match the payment's currency %s (%s %d %s of a payment of %d %s)",
				ev.Currency, charge.Currency, ev.Status, ev.Amount, ev.Currency, charge.Amount, charge.Currency)
		}
		return fmt.Sprintf("currency %s does not match the order currency %s (paid %d %s, the order total %d %s)",
			ev.Currency, o.Currency, ev.Amount, ev.Currency, o.TotalAmount, o.Currency)
	case models.ReasonReferenceMismatch:
		return fmt.Sprintf("transaction_id %q belongs to another order", ev.TransactionID)
	case models.ReasonRefundExceedsPayment:
		return fmt.Sprintf("the refunds of %q would exceed what it paid", ev.TransactionID)
	case models.ReasonRefundOfOtherCharge:
		return fmt.Sprintf("it names a refund of another charge than %q", ev.TransactionID)
	}
	return reason
}
