package midtrans

import (
	"fmt"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// Configure builds Midtrans's parts when MIDTRANS_SERVER_KEY is set: the
// provider, the sender and the status client, which asks
// MIDTRANS_API_URL (by default the API of the key's environment).
func Configure(cfg config.Config, _ string) (payments.Gateway, error) {
	if cfg.MidtransServerKey == "" {
		return payments.Gateway{}, nil
	}
	p, err := NewProvider(cfg.MidtransServerKey)
	if err != nil {
		return payments.Gateway{}, fmt.Errorf("MIDTRANS_SERVER_KEY: %w", err)
	}
	status, err := NewStatusClient(cfg.MidtransServerKey, cfg.MidtransAPIURL)
	if err != nil {
		return payments.Gateway{}, fmt.Errorf("MIDTRANS_SERVER_KEY: %w", err)
	}
	return payments.Gateway{Provider: p, Status: status, Sender: Sender{serverKey: cfg.MidtransServerKey}}, nil
}
