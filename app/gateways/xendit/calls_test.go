package xendit_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/xendit"
)

// Xendit's invoice opener and refunder against its emulation (the
// Emulator the sandbox gateway serves): what every gateway's must do
// (gatewaytest.Pages, gatewaytest.Refunds). An invoice takes no key, so
// the opener looks before it creates: the same key again finds the
// invoice. A refund's key is single-use at Xendit: the repeat finds the
// refund by its reference_id. Xendit may fail a refund it answered
// PENDING.
func TestXenditCallsAgainstItsEmulation(t *testing.T) {
	t.Parallel()
	x := gatewaytest.Emulate(t, xendit.NewEmulator(apiKey, token))
	o, err := xendit.NewPageOpener(apiKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	f, err := xendit.NewRefunder(apiKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("pages", func(t *testing.T) { gatewaytest.Pages(t, gatewaytest.PageCase{Emulation: x, Opener: o}) })
	t.Run("refunds", func(t *testing.T) {
		gatewaytest.Refunds(t, gatewaytest.RefundCase{Emulation: x, Refunder: f, FailsLater: true})
	})
}
