package gateways_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// Every notification a Sender of the registry writes is one the receiving
// adapter of the same gateway, with the same secret, authenticates and
// reads back as the fact it was written from — under the gateway's key
// rule. A wrong secret is refused (gatewaytest.SenderRoundTrip). A
// gateway whose package runs the check itself (Xendit's, Stripe's) is
// not listed here.
func TestSendersWriteWhatTheAdaptersRead(t *testing.T) {
	t.Parallel()
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
	} {
		t.Run(tc.provider, func(t *testing.T) {
			gatewaytest.SenderRoundTrip(t, gatewaytest.SenderCase{
				Sender: must(gateways.NewSender(tc.provider, tc.secret)), Forger: must(gateways.NewSender(tc.provider, tc.other)),
				Receiver: tc.receiver, Key: tc.key,
			})
		})
	}
}

// The test secrets of the gateways named here.
const (
	midtransKey = "SB-Mid-server-TEST0123456789abcdef"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
