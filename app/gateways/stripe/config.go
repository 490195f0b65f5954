package stripe

import (
	"log/slog"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// New builds Stripe's parts: the provider and the sender when
// STRIPE_WEBHOOK_SECRET is set; the status client, the Checkout opener
// and the refunder when STRIPE_SECRET_KEY is, all at STRIPE_API_URL
// (Stripe's API by default), and the emulation of that API which the
// sandbox gateway serves at {sandbox}/sandbox/stripe (EmulatorPath) to
// that key. Stripe's host is the same for test and live keys, so it
// never defaults to the emulation.
func New(env config.Env) (payments.Gateway, error) {
	r := env.Reader()
	var provider *Provider
	r.Secret("STRIPE_WEBHOOK_SECRET", func(s string) (err error) { provider, err = NewProvider(s); return err })
	key, apiURL := r.Secret("STRIPE_SECRET_KEY", CheckSecretKey), r.URL("STRIPE_API_URL")
	r.Needs(env, Name, "STRIPE_SECRET_KEY", r.String("STRIPE_SECRET_KEY"))
	g := payments.Gateway{Name: Name, Settings: []slog.Attr{
		config.IsSet("stripe_webhook_secret", r.String("STRIPE_WEBHOOK_SECRET")),
		config.IsSet("stripe_secret_key", r.String("STRIPE_SECRET_KEY")),
		slog.String("stripe_api_url", apiURL),
	}}
	if provider != nil {
		g.Provider, g.Sender = provider, Sender{secret: provider.secrets[0]}
	}
	if key != "" {
		if err := payments.CallsWith(&g, key, apiURL, NewStatusClient, NewPageOpener, NewRefunder); err != nil {
			r.Fail("STRIPE_SECRET_KEY", "%v", err)
		}
		if sc, ok := g.Status.(*StatusClient); ok && provider != nil { // its events are applied as the webhooks they were
			g.Missed = sc
		}
		g.Emulator = NewEmulator(key) // the sandbox gateway answers as Stripe's API to this key
	}
	return g, r.Err()
}
