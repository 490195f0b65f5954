package xendit_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Every callback the Sender writes is one the Provider, with the same
// token, authenticates and reads back as the fact it was written from,
// keyed by its webhook-id; another token is refused.
func TestXenditSenderWritesWhatTheProviderReads(t *testing.T) {
	t.Parallel()
	gatewaytest.SenderRoundTrip(t, gatewaytest.SenderCase{
		Sender: mustSender(t, token), Forger: mustSender(t, "xnd-callback-token-NOT-OURS"), Receiver: provider(t),
		Key: func(f payments.Fact) string { return f.EventID },
	})
}

// Xendit's refund callbacks tell a refund's state: one that failed after
// Xendit accepted it reads back failed, with its failure_code.
func TestXenditSenderWritesRefundStates(t *testing.T) {
	t.Parallel()
	gatewaytest.SenderRefundStates(t, mustSender(t, token), provider(t),
		models.RefundSucceeded, models.RefundFailed, models.RefundCanceled)
}

func mustSender(t *testing.T, token string) payments.Sender {
	t.Helper()
	s, err := xendit.NewSender(token)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
