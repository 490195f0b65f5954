package midtrans_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
)

// Midtrans's Snap opener, refunder and status client against its
// emulation (the Emulator the sandbox gateway serves): what every
// gateway's must do (gatewaytest.Pages, gatewaytest.Refunds). A Snap
// order_id is single-use and Midtrans never replays an answer: the same
// key again is a spent key, and a page is opened again under a new one.
// A refund_key is single-use too: the repeat's 406 is found in the
// status API's list of the transaction's refunds — which answers with
// the notifications the sandbox gateway sent, so the emulation is told
// of each as Midtrans's sender writes it (gatewaytest.EmulateSending).
// Midtrans does not fail a refund it approved. Every answer that states
// an amount is checked for it and its currency (gatewaytest.
// AnswersChecked, StatusChecked): a refund answered with another
// refund_amount or currency changes no money, and a transaction the
// status API tells of for another gross_amount or currency pays nothing.
// Snap's answer (a token and a URL) states no amount: its page is
// offered as answered, and what the customer pays is checked when its
// notification comes.
func TestMidtransCallsAgainstItsEmulation(t *testing.T) {
	t.Parallel()
	sender, err := midtrans.NewSender(midtransKey)
	if err != nil {
		t.Fatal(err)
	}
	e := midtrans.NewEmulator(midtransKey)
	x := gatewaytest.EmulateSending(t, e, sender)
	o, err := midtrans.NewPageOpener(midtransKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	f, err := midtrans.NewRefunder(midtransKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := midtrans.NewStatusClient(midtransKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("pages", func(t *testing.T) { gatewaytest.Pages(t, gatewaytest.PageCase{Emulation: x, Opener: o, KeyOnce: true}) })
	t.Run("refunds", func(t *testing.T) { gatewaytest.Refunds(t, gatewaytest.RefundCase{Emulation: x, Refunder: f}) })
	t.Run("answers", func(t *testing.T) {
		p := gatewaytest.NewPipeline(t)
		gatewaytest.AnswersChecked(t, p, gatewaytest.AnswerCase{Emulation: x, Opener: o, Refunder: f, Misstate: e.MisstateNext, PagesStateNone: true})
		gatewaytest.StatusChecked(t, p, c, x.Paid)
	})
}
