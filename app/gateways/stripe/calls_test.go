package stripe_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
)

// Stripe's Checkout Session opener and refunder against its emulation
// (the Emulator the sandbox gateway serves): what every gateway's must
// do (gatewaytest.Pages, gatewaytest.Refunds). Both send the request's
// key as the Idempotency-Key: the same key again is Stripe's first
// answer, replayed. Stripe may fail a refund it answered pending
// (refund.failed).
func TestStripeCallsAgainstItsEmulation(t *testing.T) {
	t.Parallel()
	x := gatewaytest.Emulate(t, stripe.NewEmulator(emulatorKey))
	o, err := stripe.NewPageOpener(emulatorKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	f, err := stripe.NewRefunder(emulatorKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("pages", func(t *testing.T) { gatewaytest.Pages(t, gatewaytest.PageCase{Emulation: x, Opener: o}) })
	t.Run("refunds", func(t *testing.T) {
		gatewaytest.Refunds(t, gatewaytest.RefundCase{Emulation: x, Refunder: f, FailsLater: true})
	})
}
