package payments

import (
	"context"
	"fmt"
	"slices"

	"github.com/sekali/sekali/models"
)

// needsConfirming reports whether a Confirmer's notification is asked
// about: every one that could change money or a payment, unless this
// process has seen its key processed (the delivery is then a duplicate
// or a conflict, answered without the API). A pending notification
// changes no money and is applied as it is.
func (s *Service) needsConfirming(provider string, ev Event) bool {
	if ev.Status == models.EventPending {
		return false
	}
	_, seen := s.seen.get(provider, ev.Key)
	return !seen
}

// SameEvent reports whether two events say the same: key, order, charge,
// status, amount, currency and refunds.
func SameEvent(a, b Event) bool {
	return a.Key == b.Key && a.OrderID == b.OrderID && a.TransactionID == b.TransactionID &&
		a.Status == b.Status && a.Amount == b.Amount && a.Currency == b.Currency && slices.Equal(a.Refunds, b.Refunds)
}

// unconfirmed answers a notification that the gateway's API does not
// confirm. It changes nothing of its own; what the API says (when it knows
// the transaction) is applied as a status poll's answer is, so a forged
// status can never be applied, and a genuine notification that arrives
// after its transaction moved on still brings the latest fact. Its
// delivery row says both.
func (s *Service) unconfirmed(ctx context.Context, provider string, ev, answer Event, found bool, d Delivery) Outcome {
	said := "the status API does not know the transaction"
	if found {
		said = "the status API says " + describe(answer)
	}
	note := models.Truncate(fmt.Sprintf("unconfirmed: the notification says %s; %s", describe(ev), said), maxNoteLength)
	out := Outcome{Result: models.ResultUnconfirmed, Detail: note, note: note}
	if found {
		applied := s.applyFact(ctx, provider, answer, Delivery{Provider: provider, RemoteAddr: "status API", RequestID: d.RequestID})
		if applied.Result == models.ResultError { // the API's fact is not written: have the gateway come back
			return Outcome{Result: models.ResultError, Detail: "the callback could not be recorded now; retry later"}
		}
		out.callbackID, out.OrderStatus, out.statusBefore = applied.callbackID, applied.OrderStatus, applied.statusBefore
	}
	s.log.WarnContext(ctx, "callback unconfirmed", "provider", provider, "idempotency_key", ev.Key, "order_id", ev.OrderID,
		"request_id", d.RequestID, "note", note)
	return out
}

// maxNoteLength bounds a delivery's note (callback_deliveries_note_bound).
const maxNoteLength = 1000

// describe is what an event says, in a few words.
func describe(ev Event) string {
	return fmt.Sprintf("%s of %s for order %s, %s %d", ev.Status, ev.TransactionID, ev.OrderID, ev.Currency, ev.Amount)
}
