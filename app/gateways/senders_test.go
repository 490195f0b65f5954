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
					// A refund is named by its id where the gateway names
					// refunds (Stripe states the charge's total only).
					wantRefunds := []payments.Refund(nil)
					if status == models.EventRefunded && tc.provider != stripe.Name {
						wantRefunds = []payments.Refund{{Key: f.RefundID, Amount: f.Amount}}
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
