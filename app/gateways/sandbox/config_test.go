package sandbox_test

import (
	"testing"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways/sandbox"
)

// The sandbox receives with its keys (app/config's SANDBOX_WEBHOOK_SECRET)
// and is polled only where the sandbox gateway runs and answers.
func TestSandboxNew(t *testing.T) {
	t.Parallel()
	keys := [][]byte{[]byte("sandbox-key")}
	for _, tc := range []struct {
		name           string
		keys           [][]byte
		gateway        bool
		url            string
		receives, asks bool
	}{
		{"no keys", nil, true, "http://127.0.0.1:8080", false, false},
		{"keys", keys, false, "", true, false},
		{"keys and the gateway", keys, true, "http://127.0.0.1:8080", true, true},
		{"the gateway, nowhere known", keys, true, "", true, false},
	} {
		env := config.Env{SandboxURL: tc.url}
		env.SandboxKeys, env.SandboxGateway = tc.keys, tc.gateway
		g, err := sandbox.New(env)
		if err != nil || (g.Provider != nil) != tc.receives || (g.Sender != nil) != tc.receives || (g.Status != nil) != tc.asks ||
			g.Pages != nil || g.Refunder != nil {
			t.Errorf("%s: %+v, %v", tc.name, g, err)
		}
	}
}
