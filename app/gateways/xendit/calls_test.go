package xendit_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/xendit"
)

// Xendit's invoice opener, refunder and status client against its
// emulation (the Emulator the sandbox gateway serves): what every
// gateway's must do (gatewaytest.Pages, gatewaytest.Refunds). An invoice
// takes no key, so the opener looks before it creates: the same key
// again finds the invoice. A refund's key is single-use at Xendit: the
// repeat finds the refund by its reference_id. Xendit may fail a refund
// it answered PENDING. Every answer is checked for amount and currency
// (gatewaytest.AnswersChecked, StatusChecked): a refund whose amount or
// currency is not what was asked changes no money, an invoice whose
// amount or currency is not the order's is not offered, and an invoice
// the status poll finds PAID for another amount or currency pays
// nothing.
func TestXenditCallsAgainstItsEmulation(t *testing.T) {
	t.Parallel()
	e := xendit.NewEmulator(apiKey, token)
	x := gatewaytest.Emulate(t, e)
	o, err := xendit.NewPageOpener(apiKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	f, err := xendit.NewRefunder(apiKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := xendit.NewStatusClient(apiKey, x.URL)
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
