package xendit

import (
	"log/slog"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// New builds Xendit's parts: the status client, the invoice opener and
// the refunder when XENDIT_SECRET_KEY is set, all at XENDIT_API_URL
// (Xendit's API by default), and the emulation of that API which the
// sandbox gateway serves at {sandbox}/sandbox/xendit (EmulatorPath) to
// that key; the provider and the sender when XENDIT_CALLBACK_TOKEN is
// set too. The token alone is refused: its callbacks are confirmed with
// that API (Provider.Confirm), and a static token unchecked would let
// whoever learns it pay any order. Xendit's host is the same for test
// and live keys, so a key says nothing of where to go: unlike Midtrans
// it never defaults to the emulation.
func New(env config.Env) (payments.Gateway, error) {
	r := env.Reader()
	token := r.Secret("XENDIT_CALLBACK_TOKEN", CheckToken)
	key, apiURL := r.Secret("XENDIT_SECRET_KEY", CheckSecretKey), r.URL("XENDIT_API_URL")
	r.Needs(env, Name, "XENDIT_SECRET_KEY", r.String("XENDIT_SECRET_KEY"))
	if token != "" && r.String("XENDIT_SECRET_KEY") == "" {
		r.Fail("XENDIT_CALLBACK_TOKEN", "needs XENDIT_SECRET_KEY: every paid Xendit callback is confirmed with Xendit's invoice API")
	}
	g := payments.Gateway{Name: Name, Settings: []slog.Attr{
		config.IsSet("xendit_callback_token", r.String("XENDIT_CALLBACK_TOKEN")),
		config.IsSet("xendit_secret_key", r.String("XENDIT_SECRET_KEY")),
		slog.String("xendit_api_url", apiURL),
	}}
	if key == "" {
		return g, r.Err()
	}
	if err := payments.CallsWith(&g, key, apiURL, NewStatusClient, NewPageOpener, NewRefunder); err != nil {
		r.Fail("XENDIT_SECRET_KEY", "%v", err)
	}
	// The sandbox gateway answers as Xendit's API to this key, and learns
	// an invoice from a callback with this token (Emulator).
	g.Emulator = NewEmulator(key, token)
	if token != "" {
		p, err := NewProvider(token, key, apiURL)
		if err != nil {
			r.Fail("XENDIT_SECRET_KEY", "%v", err)
			return g, r.Err()
		}
		g.Provider, g.Sender = p, Sender{token: token}
	}
	return g, r.Err()
}
