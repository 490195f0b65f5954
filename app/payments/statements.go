package payments

import (
	_ "embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// The statements of the applying transaction's hot path, each in its file
// under sql/. A new event sends them in two round trips (store.Tx):
// BEGIN, queueReserve's and queueLockOrder's; then the effect's
// statements, completeStatement's and COMMIT.

//go:embed sql/reserve.sql
var reserveSQL string

// queueReserve adds to b the statement that records cb under its unique
// (provider, idempotency_key). A concurrent delivery of the same event
// waits on the unique index until the first one's transaction ends.
// *inserted reports whether this one recorded it (cb.ID is then set);
// false means the key was taken.
func queueReserve(b *pgx.Batch, cb *models.PaymentCallback, inserted *bool) {
	st := store.Statement{SQL: reserveSQL, Args: []any{cb.Provider, cb.IdempotencyKey, cb.PayloadHash, cb.OrderID,
		cb.TransactionID, string(cb.EventStatus), cb.Amount, cb.Currency, string(cb.Status), cb.FirstReceivedAt}}
	st.Queue(b).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&cb.ID)
		*inserted = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

//go:embed sql/lock_order.sql
var lockOrderSQL string

// lockedOrder is what queueLockOrder read: the order (nil when there is no such
// order) and the charge the event names (nil when unknown). The order
// holds what deciding and applying an event read of it — its id, status,
// total and currency — and nothing else: lock_order.sql names the
// columns, so that the hot path neither sends nor decodes the rest.
type lockedOrder struct {
	order  *models.Order
	charge *models.Payment
}

// queueLockOrder adds to b the statement that locks the event's order with
// SELECT … FOR UPDATE, as orders.Lock does, and reads the charge the
// event names in the same statement: one statement instead of two on
// every new event. The charge's row is not locked: every change of it
// happens under its order's lock.
func queueLockOrder(b *pgx.Batch, provider string, ev Event, into *lockedOrder) {
	st := store.Statement{SQL: lockOrderSQL, Args: []any{provider, ev.TransactionID, ev.OrderID}}
	st.Queue(b).QueryRow(func(row pgx.Row) error {
		var o models.Order
		var c struct {
			id, amount, refunded, disputed *int64
			orderID, status, currency      *string
			dispute                        *string
		}
		err := row.Scan(&o.ID, &o.Status, &o.TotalAmount, &o.Currency,
			&c.id, &c.orderID, &c.status, &c.amount, &c.refunded, &c.currency, &c.dispute, &c.disputed)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		into.order = &o
		if c.id != nil {
			into.charge = &models.Payment{ID: *c.id, Provider: provider, ProviderReference: ev.TransactionID,
				OrderID: *c.orderID, Status: models.PaymentStatus(*c.status), Amount: *c.amount,
				RefundedAmount: *c.refunded, Currency: *c.currency, Dispute: models.Dispute(*c.dispute),
				DisputedAmount: *c.disputed}
		}
		return nil
	})
}

var (
	//go:embed sql/record_payment.sql
	recordPaymentSQL string
	//go:embed sql/move_payment.sql
	movePaymentSQL string
)

// paymentStatement records the charge (provider, reference) with status
// to. An existing row changes only along models.PaymentFrom, and a row of
// another order is never touched (decide rejected that case under the
// lock); a status no row moves to is written only for a new charge.
func paymentStatement(provider string, ev Event, orderID string, to models.PaymentStatus, now time.Time) store.Statement {
	args := []any{provider, ev.TransactionID, orderID, ev.Amount, ev.Currency, string(to), now.UTC()}
	from := models.PaymentFrom[to]
	if len(from) == 0 {
		return store.Statement{SQL: recordPaymentSQL, Args: args}
	}
	fromText := make([]string, len(from))
	for i, f := range from {
		fromText[i] = string(f)
	}
	return store.Statement{SQL: movePaymentSQL, Args: append(args, fromText)}
}

//go:embed sql/complete.sql
var completeSQL string

// completeStatement records the callback's result and the applying
// delivery's audit row in one statement.
func completeStatement(callbackID int64, r callbackResult, d models.CallbackDelivery) store.Statement {
	return store.Statement{SQL: completeSQL, Args: []any{
		string(r.status), r.result, d.ResponseCode, r.processedAt, callbackID,
		d.Provider, d.ReceivedAt, d.Outcome, d.DurationMS, d.RemoteAddr, d.RequestID, d.TraceID, d.Note,
		nullText(d.Headers), d.Body, nullText(d.BodyJSON), d.BodyHash}}
}
