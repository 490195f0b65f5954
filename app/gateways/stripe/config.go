package stripe

import (
	"fmt"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// Configure builds Stripe's parts: the provider and the sender when
// STRIPE_WEBHOOK_SECRET is set, the status client when STRIPE_SECRET_KEY
// is.
func Configure(cfg config.Config, _ string) (payments.Gateway, error) {
	var g payments.Gateway
	if cfg.StripeWebhookSecret != "" {
		p, err := NewProvider(cfg.StripeWebhookSecret)
		if err != nil {
			return g, fmt.Errorf("STRIPE_WEBHOOK_SECRET: %w", err)
		}
		g.Provider, g.Sender = p, Sender{secret: p.secrets[0]}
	}
	if cfg.StripeSecretKey != "" {
		c, err := NewStatusClient(cfg.StripeSecretKey, cfg.StripeAPIURL)
		if err != nil {
			return g, fmt.Errorf("STRIPE_SECRET_KEY: %w", err)
		}
		g.Status = c
	}
	return g, nil
}
