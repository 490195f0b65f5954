package midtrans

import (
	"cmp"
	"log/slog"
	"strings"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// New builds Midtrans's parts when MIDTRANS_SERVER_KEY is set: the
// provider, the sender, the status client, the Snap page opener, the
// refunder, and the emulation of Midtrans's API and Snap (Emulator)
// which the sandbox gateway serves at SandboxAPIPath to that key. The
// provider's confirmations, the status poll and refunds ask
// MIDTRANS_API_URL, and pages are opened at MIDTRANS_SNAP_URL; by
// default the hosts of the key's environment or, where the sandbox
// gateway runs (development and QA), that emulation, which knows the
// payments the sandbox gateway made.
func New(env config.Env) (payments.Gateway, error) {
	r := env.Reader()
	key := r.String("MIDTRANS_SERVER_KEY")
	apiURL, snapURL := strings.TrimSuffix(r.URL("MIDTRANS_API_URL"), "/"), strings.TrimSuffix(r.URL("MIDTRANS_SNAP_URL"), "/")
	g := payments.Gateway{Name: Name, Settings: []slog.Attr{
		config.IsSet("midtrans_server_key", key),
		slog.String("midtrans_api_url", apiURL),
		slog.String("midtrans_snap_url", snapURL),
	}}
	if key == "" {
		if env.PaymentGateway == Name {
			r.Fail("PAYMENT_GATEWAY", "midtrans needs MIDTRANS_SERVER_KEY")
		}
		return g, r.Err()
	}
	if err := CheckServerKey(key); err != nil {
		r.Fail("MIDTRANS_SERVER_KEY", "%v", err)
		return g, r.Err()
	}
	if env.SandboxGateway && env.SandboxURL != "" {
		emulation := strings.TrimSuffix(env.SandboxURL, "/") + SandboxAPIPath
		apiURL, snapURL = cmp.Or(apiURL, emulation), cmp.Or(snapURL, emulation)
	}
	var err error
	if g.Provider, err = NewProvider(key, apiURL); err != nil {
		return g, err
	}
	if g.Status, err = NewStatusClient(key, apiURL); err != nil {
		return g, err
	}
	if g.Pages, err = NewPageOpener(key, snapURL); err != nil {
		return g, err
	}
	if g.Refunder, err = NewRefunder(key, apiURL); err != nil {
		return g, err
	}
	g.Sender = Sender{serverKey: key}
	g.Emulator = NewEmulator(key) // the sandbox gateway answers as Midtrans's API and Snap to this key
	return g, r.Err()
}

// SandboxAPIPath is where the sandbox gateway answers as Midtrans's API
// and Snap (the Emulator): GET {SandboxAPIPath}/v2/{id}/status.
const SandboxAPIPath = "/sandbox/midtrans"
