package gateways_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// Every notification a Sender of the registry writes is one the receiving
// adapter of the same gateway, with the same secret, authenticates and
// reads back as the fact it was written from — under the gateway's key
// rule. A wrong secret is refused (gatewaytest.SenderRoundTrip). A
// gateway whose package runs the check itself (Xendit's) is not listed
// here.
func TestSendersWriteWhatTheAdaptersRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider, secret, other string
		receiver                payments.Provider
		key                     func(f payments.Fact) string
	}{
		{sandbox.Name, testenv.SandboxSecret, "whsec_d3Jvbmcgc2VjcmV0IG9mIHRoZSB0ZXN0",
			sandbox.NewProvider([][]byte{testenv.SandboxKey}), func(f payments.Fact) string { return f.EventID }},
		{stripe.Name, stripeSecret, "whsec_not_ours_0123456789", must(stripe.NewProvider(stripeSecret)),
			func(f payments.Fact) string { return f.EventID }},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			gatewaytest.SenderRoundTrip(t, gatewaytest.SenderCase{
				Sender: must(gateways.NewSender(tc.provider, tc.secret)), Forger: must(gateways.NewSender(tc.provider, tc.other)),
				Receiver: tc.receiver, Key: tc.key,
			})
		})
	}
}

// Stripe's refund events tell a refund's state: what a sender writes of a
// refund that failed after the gateway accepted it reads back failed,
// with the gateway's reason, and a pending refund reads back pending
// (gatewaytest.SenderRefundStates; Xendit's package checks its own).
func TestSendersWriteRefundStates(t *testing.T) {
	t.Parallel()
	gatewaytest.SenderRefundStates(t, must(gateways.NewSender(stripe.Name, stripeSecret)), must(stripe.NewProvider(stripeSecret)),
		models.RefundPending, models.RefundSucceeded, models.RefundFailed, models.RefundCanceled)
}

// The test secrets of the gateways named here.
const (
	stripeSecret = "whsec_test_0123456789abcdef"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
