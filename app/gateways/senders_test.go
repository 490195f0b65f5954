package gateways_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// Every notification a Sender writes is one the receiving adapter of the
// same gateway, with the same secret, authenticates and reads back as the
// fact it was written from — under the gateway's key rule. A wrong secret
// is refused.
func TestSendersWriteWhatTheAdaptersRead(t *testing.T) {
	t.Parallel()
	at := time.Now()
	for _, tc := range []struct {
		provider, secret, other string
		receiver                payments.Provider
		key                     func(f payments.Fact) string
	}{
		{sandbox.Name, testenv.SandboxSecret, "whsec_d3Jvbmcgc2VjcmV0IG9mIHRoZSB0ZXN0",
			sandbox.NewProvider([][]byte{testenv.SandboxKey}), func(f payments.Fact) string { return f.EventID }},
		{midtrans.Name, midtransKey, "SB-Mid-server-NOT-OURS", must(midtrans.NewProvider(midtransKey, "")),
			func(f payments.Fact) string {
				key := f.TransactionID + ":" + map[models.PaymentEvent]string{models.EventPaid: "settlement", models.EventPending: "pending",
					models.EventDeclined: "deny", models.EventFailed: "cancel", models.EventExpired: "expire", models.EventRefunded: "refund"}[f.Status]
				if f.Status == models.EventRefunded { // and the refunded total
					key += ":" + payments.MajorText(f.Amount, f.Currency, 2)
				}
				return key
			}},
		{xendit.Name, xenditToken, "xnd-callback-token-NOT-OURS", must(xendit.NewProvider(xenditToken)),
			func(f payments.Fact) string { return f.EventID }},
		{stripe.Name, stripeSecret, "whsec_not_ours_0123456789", must(stripe.NewProvider(stripeSecret)),
			func(f payments.Fact) string { return f.EventID }},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			sender, err := gateways.NewSender(tc.provider, tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			forger, err := gateways.NewSender(tc.provider, tc.other)
			if err != nil {
				t.Fatal(err)
			}
			expressed := 0
			for _, status := range []models.PaymentEvent{models.EventPaid, models.EventPending, models.EventDeclined, models.EventFailed, models.EventExpired, models.EventRefunded} {
				for _, money := range []struct {
					amount   int64
					currency string
				}{{150000, "IDR"}, {1999, "USD"}} {
					f := payments.Fact{EventID: "evt_" + string(status), OrderID: "ORD-SEND", TransactionID: "tx_send_1",
						Status: status, Amount: money.amount, Currency: money.currency, RefundID: "rf_send_1"}
					h, body, err := payments.Notification(sender, f, at)
					if errors.Is(err, payments.ErrNotExpressible) {
						continue
					}
					if err != nil {
						t.Fatalf("%s: %v", status, err)
					}
					expressed++
					if err := tc.receiver.Verify(h, body, at); err != nil {
						t.Fatalf("%s: the adapter refuses the sender's notification: %v\n%s", status, err, body)
					}
					ev, err := tc.receiver.Parse(h, body)
					if err != nil {
						t.Fatalf("%s: %v\n%s", status, err, body)
					}
					// Only a payment and a refund move money: the amount of
					// any other notification is not read.
					moves := status == models.EventPaid || status == models.EventRefunded
					if ev.Key != tc.key(f) || ev.OrderID != f.OrderID || ev.TransactionID != f.TransactionID ||
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
					fh, fbody, _ := payments.Notification(forger, f, at)
					if tc.receiver.Verify(fh, fbody, at) == nil {
						t.Errorf("%s: a notification signed with another secret is accepted", status)
					}
				}
			}
			if expressed < 6 {
				t.Errorf("only %d facts expressible", expressed)
			}
		})
	}
}

// Stripe's refund events and Xendit's refund callbacks tell a refund's
// state: what a sender writes of a refund that failed after the gateway
// accepted it reads back failed, with the gateway's reason, and (Stripe)
// a pending refund reads back pending.
func TestSendersWriteRefundStates(t *testing.T) {
	t.Parallel()
	at := time.Now()
	for _, tc := range []struct {
		provider, secret string
		receiver         payments.Provider
		states           []models.RefundStatus
	}{
		{stripe.Name, stripeSecret, must(stripe.NewProvider(stripeSecret)),
			[]models.RefundStatus{models.RefundPending, models.RefundSucceeded, models.RefundFailed, models.RefundCanceled}},
		{xendit.Name, xenditToken, must(xendit.NewProvider(xenditToken)),
			[]models.RefundStatus{models.RefundSucceeded, models.RefundFailed, models.RefundCanceled}},
	} {
		sender, err := gateways.NewSender(tc.provider, tc.secret)
		if err != nil {
			t.Fatal(err)
		}
		for _, state := range tc.states {
			f := payments.Fact{EventID: "evt_rf_" + string(state), OrderID: "ORD-SEND", TransactionID: "tx_send_2", Status: models.EventRefunded,
				Amount: 50000, Currency: "IDR", RefundID: "rf_send_2", RefundStatus: state, RefundReason: "insufficient_funds"}
			h, body, err := payments.Notification(sender, f, at)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.provider, state, err)
			}
			ev, err := tc.receiver.Parse(h, body)
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", tc.provider, state, err, body)
			}
			want := payments.Refund{Key: "rf_send_2", Amount: 50000, Status: state}
			if !state.Counts() {
				want.Reason = "insufficient_funds"
			}
			if len(ev.Refunds) != 1 || ev.Refunds[0] != want || ev.OrderID != "ORD-SEND" || ev.TransactionID != "tx_send_2" {
				t.Errorf("%s %s: read back %+v, want the refund %+v\n%s", tc.provider, state, ev, want, body)
			}
		}
	}
}

// The test secrets of the three gateways.
const (
	midtransKey  = "SB-Mid-server-TEST0123456789abcdef"
	xenditToken  = "xnd-callback-token-0123456789"
	stripeSecret = "whsec_test_0123456789abcdef"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
