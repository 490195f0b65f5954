package midtrans

import (
	"fmt"
	"strings"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// Configure builds Midtrans's parts when MIDTRANS_SERVER_KEY is set: the
// provider, the sender and the status client. Both the provider's
// confirmations and the status poll ask MIDTRANS_API_URL; by default the
// API of the key's environment, or, where the sandbox gateway runs
// (development and QA), its emulation of that API (SandboxAPIPath), which
// knows the payments it made.
func Configure(cfg config.Config, sandboxURL string) (payments.Gateway, error) {
	if cfg.MidtransServerKey == "" {
		return payments.Gateway{}, nil
	}
	apiURL := cfg.MidtransAPIURL
	if apiURL == "" && cfg.SandboxGateway && sandboxURL != "" {
		apiURL = strings.TrimSuffix(sandboxURL, "/") + SandboxAPIPath
	}
	p, err := NewProvider(cfg.MidtransServerKey, apiURL)
	if err != nil {
		return payments.Gateway{}, fmt.Errorf("MIDTRANS_SERVER_KEY: %w", err)
	}
	status, err := NewStatusClient(cfg.MidtransServerKey, apiURL)
	if err != nil {
		return payments.Gateway{}, fmt.Errorf("MIDTRANS_SERVER_KEY: %w", err)
	}
	return payments.Gateway{Provider: p, Status: status, Sender: Sender{serverKey: cfg.MidtransServerKey}}, nil
}

// SandboxAPIPath is where the sandbox gateway answers as Midtrans's API
// (web/sandboxgw): GET {SandboxAPIPath}/v2/{id}/status.
const SandboxAPIPath = "/sandbox/midtrans"
