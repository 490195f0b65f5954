package sandbox

import (
	"strings"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
)

// New builds the sandbox's parts: its provider and sender with
// SANDBOX_WEBHOOK_SECRET (or the development secret, when the sandbox
// gateway runs), and its status client when the sandbox gateway runs and
// this process knows where it answers (env.SandboxURL). Its secret stays
// in app/config: the sandbox gateway (web/sandboxgw) signs with the same
// key, and whether the public development secret may stand in depends on
// SANDBOX_GATEWAY. Its pages and refunds are the sandbox gateway's own.
func New(env config.Env) (payments.Gateway, error) {
	g := payments.Gateway{Name: Name}
	if len(env.SandboxKeys) == 0 {
		return g, nil
	}
	g.Provider = NewProvider(env.SandboxKeys)
	g.Sender = NewSender(env.SandboxKeys[0])
	if env.SandboxGateway && env.SandboxURL != "" {
		g.Status = NewStatusClient(strings.TrimSuffix(env.SandboxURL, "/"), env.SandboxKeys[0])
	}
	return g, nil
}
