package gatewaytest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// SenderCase is one gateway's sender and its receiving adapter: Sender
// writes with the secret Receiver checks, Forger with another one.
type SenderCase struct {
	Sender, Forger payments.Sender
	Receiver       payments.Provider
	// Key is the key Receiver reads the notification of a fact under:
	// the gateway's key rule.
	Key func(payments.Fact) string
}

// SenderRoundTrip checks that every notification c.Sender writes is one
// c.Receiver authenticates and reads back as the fact it was written
// from, under the gateway's key rule; that one signed with another secret
// is refused; and that at least six of the facts tried are expressible.
func SenderRoundTrip(t *testing.T, c SenderCase) {
	t.Helper()
	at := time.Now()
	expressed := 0
	for _, status := range []models.PaymentEvent{models.EventPaid, models.EventPending, models.EventDeclined, models.EventFailed, models.EventExpired, models.EventRefunded} {
		for _, money := range []struct {
			amount   int64
			currency string
		}{{150000, "IDR"}, {1999, "USD"}} {
			f := payments.Fact{EventID: "evt_" + string(status), OrderID: "ORD-SEND", TransactionID: "tx_send_1",
				Status: status, Amount: money.amount, Currency: money.currency, RefundID: "rf_send_1"}
			h, body, err := payments.Notification(c.Sender, f, at)
			if errors.Is(err, payments.ErrNotExpressible) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", status, err)
			}
			expressed++
			if err := c.Receiver.Verify(h, body, at); err != nil {
				t.Fatalf("%s: the adapter refuses the sender's notification: %v\n%s", status, err, body)
			}
			ev, err := c.Receiver.Parse(h, body)
			if err != nil {
				t.Fatalf("%s: %v\n%s", status, err, body)
			}
			// Only a payment and a refund move money: the amount of any
			// other notification is not read.
			moves := status == models.EventPaid || status == models.EventRefunded
			if ev.Key != c.Key(f) || ev.OrderID != f.OrderID || ev.TransactionID != f.TransactionID ||
				ev.Status != f.Status || ev.Currency != f.Currency || (moves && ev.Amount != f.Amount) {
				t.Errorf("%s %s: read back %+v from\n%s", status, money.currency, ev, body)
			}
			// A refund is named by its id, made (succeeded).
			wantRefunds := []payments.Refund(nil)
			if status == models.EventRefunded {
				wantRefunds = []payments.Refund{{Key: f.RefundID, Amount: f.Amount, Status: models.RefundSucceeded}}
			}
			if !slices.Equal(ev.Refunds, wantRefunds) {
				t.Errorf("%s %s: refunds %+v, want %+v", status, money.currency, ev.Refunds, wantRefunds)
			}
			fh, fbody, _ := payments.Notification(c.Forger, f, at)
			if c.Receiver.Verify(fh, fbody, at) == nil {
				t.Errorf("%s: a notification signed with another secret is accepted", status)
			}
		}
	}
	if expressed < 6 {
		t.Errorf("only %d facts expressible", expressed)
	}
}

// SenderRefundStates checks, for a gateway whose notifications tell a
// refund's state, that what sender writes of a refund in each of states
// reads back in that state, with the gateway's reason when the refund
// did not count (failed or canceled after the gateway accepted it).
func SenderRefundStates(t *testing.T, sender payments.Sender, receiver payments.Provider, states ...models.RefundStatus) {
	t.Helper()
	at := time.Now()
	for _, state := range states {
		f := payments.Fact{EventID: "evt_rf_" + string(state), OrderID: "ORD-SEND", TransactionID: "tx_send_2", Status: models.EventRefunded,
			Amount: 50000, Currency: "IDR", RefundID: "rf_send_2", RefundStatus: state, RefundReason: "insufficient_funds"}
		h, body, err := payments.Notification(sender, f, at)
		if err != nil {
			t.Fatalf("%s %s: %v", sender.Provider(), state, err)
		}
		ev, err := receiver.Parse(h, body)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", sender.Provider(), state, err, body)
		}
		want := payments.Refund{Key: "rf_send_2", Amount: 50000, Status: state}
		if !state.Counts() {
			want.Reason = "insufficient_funds"
		}
		if len(ev.Refunds) != 1 || ev.Refunds[0] != want || ev.OrderID != "ORD-SEND" || ev.TransactionID != "tx_send_2" {
			t.Errorf("%s %s: read back %+v, want the refund %+v\n%s", sender.Provider(), state, ev, want, body)
		}
	}
}
