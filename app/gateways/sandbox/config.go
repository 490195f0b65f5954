package sandbox

import (
	"strings"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// Configure builds the sandbox's parts: its provider with
// SANDBOX_WEBHOOK_SECRET (or the development secret, when the sandbox
// gateway runs), and its status client when the sandbox gateway is on and
// this process knows where it answers (sandboxURL).
func Configure(cfg config.Config, sandboxURL string) (payments.Gateway, error) {
	var g payments.Gateway
	if len(cfg.SandboxKeys) > 0 {
		g.Provider = NewProvider(cfg.SandboxKeys)
		g.Sender = NewSender(cfg.SandboxKeys[0])
	}
	if cfg.SandboxGateway && sandboxURL != "" && len(cfg.SandboxKeys) > 0 {
		g.Status = NewStatusClient(strings.TrimSuffix(sandboxURL, "/"), cfg.SandboxKeys[0])
	}
	return g, nil
}
