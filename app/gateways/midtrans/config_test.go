package midtrans_test

import (
	"testing"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
)

const testKey = "SB-Mid-server-CONF0123456789abcdef"

// New builds every part from MIDTRANS_SERVER_KEY, or none without it;
// PAYMENT_GATEWAY=midtrans needs it; a setting of the wrong form is
// named, never repeated, and no secret is logged.
func TestMidtransNew(t *testing.T) {
	t.Parallel()
	gatewaytest.Configure(t, midtrans.New, []gatewaytest.Setting{
		{Name: "nothing set"},
		{Name: "the server key", Vars: map[string]string{"MIDTRANS_SERVER_KEY": testKey}, Receives: true, Asks: true},
		{Name: "paying with its key", Vars: map[string]string{"MIDTRANS_SERVER_KEY": testKey, "MIDTRANS_SNAP_URL": "http://127.0.0.1:8080/sandbox/midtrans"},
			Pays: "midtrans", Receives: true, Asks: true},
		{Name: "paying without its key", Pays: "midtrans", WrongVariable: "PAYMENT_GATEWAY: midtrans needs MIDTRANS_SERVER_KEY"},
		{Name: "a key that is not a server key", Vars: map[string]string{"MIDTRANS_SERVER_KEY": "Mid-client-abc"}, WrongVariable: "MIDTRANS_SERVER_KEY"},
		{Name: "a Snap URL that is not one", Vars: map[string]string{"MIDTRANS_SERVER_KEY": testKey, "MIDTRANS_SNAP_URL": "ftp://snap"}, WrongVariable: "MIDTRANS_SNAP_URL"},
		{Name: "an API URL that is not one", Vars: map[string]string{"MIDTRANS_SERVER_KEY": testKey, "MIDTRANS_API_URL": "api.midtrans.com"}, WrongVariable: "MIDTRANS_API_URL"},
	}, testKey)
}

// Where the sandbox gateway runs, Midtrans's API and Snap default to its
// emulation (the one place that default lives); a URL that is set wins,
// and without the sandbox gateway they are the key's environment's.
func TestMidtransDefaultsToTheSandboxEmulation(t *testing.T) {
	t.Parallel()
	const sandboxURL = "http://127.0.0.1:8080/"
	for _, tc := range []struct {
		name      string
		vars      map[string]string
		sandbox   bool
		api, snap string
	}{
		{"the sandbox gateway runs", nil, true, "http://127.0.0.1:8080/sandbox/midtrans", "http://127.0.0.1:8080/sandbox/midtrans"},
		{"its URLs set", map[string]string{"MIDTRANS_API_URL": "https://api.example/", "MIDTRANS_SNAP_URL": "https://snap.example"}, true,
			"https://api.example", "https://snap.example"},
		{"no sandbox gateway", nil, false, midtrans.APIURL(testKey), midtrans.SnapURL(testKey)},
	} {
		vars := map[string]string{"MIDTRANS_SERVER_KEY": testKey}
		for k, v := range tc.vars {
			vars[k] = v
		}
		env := config.Env{Getenv: func(k string) string { return vars[k] }, SandboxURL: sandboxURL}
		env.SandboxGateway = tc.sandbox
		g, err := midtrans.New(env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		status, pages, refunder := g.Status.(*midtrans.StatusClient), g.Pages.(*midtrans.PageOpener), g.Refunder.(*midtrans.Refunder)
		if status.BaseURL != tc.api || refunder.BaseURL != tc.api || pages.BaseURL != tc.snap {
			t.Errorf("%s: status at %s, refunds at %s, pages at %s; want %s and %s", tc.name, status.BaseURL, refunder.BaseURL, pages.BaseURL, tc.api, tc.snap)
		}
	}
}
