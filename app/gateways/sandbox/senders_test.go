package sandbox_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
)

// Every notification the sandbox's Sender writes is one its Provider,
// with the same secret, authenticates and reads back as the fact it was
// written from, keyed by its webhook-id; another secret is refused
// (gatewaytest.SenderRoundTrip).
func TestSandboxSenderWritesWhatTheProviderReads(t *testing.T) {
	t.Parallel()
	sender, err := sandbox.NewSenderFromSecret(testenv.SandboxSecret)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := sandbox.NewSenderFromSecret("whsec_d3Jvbmcgc2VjcmV0IG9mIHRoZSB0ZXN0")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.SenderRoundTrip(t, gatewaytest.SenderCase{
		Sender: sender, Forger: forger, Receiver: sandbox.NewProvider([][]byte{testenv.SandboxKey}),
		Key: func(f payments.Fact) string { return f.EventID },
	})
}
