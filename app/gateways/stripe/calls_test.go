package stripe_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
)

// Stripe's Checkout Session opener, refunder and status client against
// its emulation (the Emulator the sandbox gateway serves): what every
// gateway's must do (gatewaytest.Pages, gatewaytest.Refunds). Both send
// the request's key as the Idempotency-Key: the same key again is
// Stripe's first answer, replayed. Stripe may fail a refund it answered
// pending (refund.failed). Every answer is checked for amount and
// currency (gatewaytest.AnswersChecked, StatusChecked): a refund whose
// amount or currency is not what was asked changes no money, a Checkout
// Session whose amount_total or currency is not the order's is not
// offered, and a PaymentIntent the status poll finds for another amount
// or currency pays nothing. The emulation is told of payments as
// Stripe's sender writes them: its search finds their PaymentIntents.
func TestStripeCallsAgainstItsEmulation(t *testing.T) {
	t.Parallel()
	sender, err := stripe.NewSender(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	e := stripe.NewEmulator(emulatorKey)
	x := gatewaytest.EmulateSending(t, e, sender)
	o, err := stripe.NewPageOpener(emulatorKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	f, err := stripe.NewRefunder(emulatorKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := stripe.NewStatusClient(emulatorKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("pages", func(t *testing.T) { gatewaytest.Pages(t, gatewaytest.PageCase{Emulation: x, Opener: o}) })
	t.Run("refunds", func(t *testing.T) {
		gatewaytest.Refunds(t, gatewaytest.RefundCase{Emulation: x, Refunder: f, FailsLater: true})
	})
	t.Run("answers", func(t *testing.T) {
		p := gatewaytest.NewPipeline(t)
		gatewaytest.AnswersChecked(t, p, gatewaytest.AnswerCase{Emulation: x, Opener: o, Refunder: f, Misstate: e.MisstateNext})
		gatewaytest.StatusChecked(t, p, c, x.Paid)
	})
}
