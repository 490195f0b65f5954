package stripe_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Every event the Sender writes is one the Provider, with the same
// endpoint secret, authenticates and reads back as the fact it was
// written from, keyed by its event id; another secret is refused
// (gatewaytest.SenderRoundTrip).
func TestStripeSenderWritesWhatTheProviderReads(t *testing.T) {
	t.Parallel()
	gatewaytest.SenderRoundTrip(t, gatewaytest.SenderCase{
		Sender: mustSender(t, secret), Forger: mustSender(t, other), Receiver: mustProvider(t, secret),
		Key: func(f payments.Fact) string { return f.EventID },
	})
}

// Stripe's refund events tell a refund's state: what the Sender writes of
// a refund that failed after Stripe accepted it reads back failed, with
// Stripe's reason, and a pending refund reads back pending
// (gatewaytest.SenderRefundStates).
func TestStripeSenderWritesRefundStates(t *testing.T) {
	t.Parallel()
	gatewaytest.SenderRefundStates(t, mustSender(t, secret), mustProvider(t, secret),
		models.RefundPending, models.RefundSucceeded, models.RefundFailed, models.RefundCanceled)
}

func mustSender(t *testing.T, secret string) payments.Sender {
	t.Helper()
	s, err := stripe.NewSender(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustProvider(t *testing.T, secrets string) *stripe.Provider {
	t.Helper()
	p, err := stripe.NewProvider(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
