package xendit

import (
	"fmt"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// Configure builds Xendit's parts: the provider and the sender when
// XENDIT_CALLBACK_TOKEN is set, the status client when XENDIT_SECRET_KEY
// is.
func Configure(cfg config.Config, _ string) (payments.Gateway, error) {
	var g payments.Gateway
	if cfg.XenditCallbackToken != "" {
		p, err := NewProvider(cfg.XenditCallbackToken)
		if err != nil {
			return g, fmt.Errorf("XENDIT_CALLBACK_TOKEN: %w", err)
		}
		g.Provider, g.Sender = p, Sender{token: cfg.XenditCallbackToken}
	}
	if cfg.XenditSecretKey != "" {
		c, err := NewStatusClient(cfg.XenditSecretKey, cfg.XenditAPIURL)
		if err != nil {
			return g, fmt.Errorf("XENDIT_SECRET_KEY: %w", err)
		}
		g.Status = c
	}
	return g, nil
}
