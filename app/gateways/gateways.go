// Package gateways is the list of the payment gateways Sekali speaks, one
// package each under it: sandbox, midtrans, xendit, stripe. Each package
// holds all of one gateway — its notifications' parser, its status
// client, its amounts, a sender of its notifications, its docs comment —
// behind the small interfaces of app/payments. Adding a gateway is one
// package and one line in All (docs/callbacks.md#adding-a-gateway).
package gateways

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
)

// Entry is how one gateway is built.
type Entry struct {
	Name string
	// SecretVariable is the variable its notifications are checked with:
	// `sekali sign` and `sekali-replay` sign with it by default.
	SecretVariable string
	// NewSender writes its notifications, signed with that secret.
	NewSender func(secret string) (payments.Sender, error)
	// Configure builds its parts from the configuration; none of them
	// when its settings are unset. sandboxURL is where this deployment's
	// sandbox gateway answers, or "".
	Configure func(cfg config.Config, sandboxURL string) (payments.Gateway, error)
}

// All are the gateways, the sandbox first.
var All = []Entry{
	{sandbox.Name, "SANDBOX_WEBHOOK_SECRET", sandbox.NewSenderFromSecret, sandbox.Configure},
	{midtrans.Name, "MIDTRANS_SERVER_KEY", midtrans.NewSender, midtrans.Configure},
	{xendit.Name, "XENDIT_CALLBACK_TOKEN", xendit.NewSender, xendit.Configure},
	{stripe.Name, "STRIPE_WEBHOOK_SECRET", stripe.NewSender, stripe.Configure},
}

// Names are the gateways' names, in the order of All.
func Names() []string {
	names := make([]string, len(All))
	for i, e := range All {
		names[i] = e.Name
	}
	return names
}

// Find returns the entry of the gateway called name.
func Find(name string) (Entry, bool) {
	i := slices.IndexFunc(All, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return Entry{}, false
	}
	return All[i], true
}

// NewSender returns the sender of the gateway called name, signing with
// secret: the same secret the receiving side is configured with.
func NewSender(name, secret string) (payments.Sender, error) {
	e, ok := Find(name)
	if !ok {
		return nil, fmt.Errorf("unknown provider %q: one of %s", name, strings.Join(Names(), ", "))
	}
	return e.NewSender(secret)
}

// Set is the configured gateways.
type Set []payments.Gateway

// Configure builds every gateway whose settings are set. A setting of the
// wrong form stops start-up with a message that names its variable (never
// its value).
func Configure(cfg config.Config, sandboxURL string) (Set, error) {
	var set Set
	var problems []string
	for _, e := range All {
		g, err := e.Configure(cfg, sandboxURL)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if g.Provider != nil || g.Status != nil {
			g.Name = e.Name
			set = append(set, g)
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("configuration:\n  " + strings.Join(problems, "\n  "))
	}
	return set, nil
}

// Providers are the gateways that receive notifications.
func (s Set) Providers() []payments.Provider {
	var out []payments.Provider
	for _, g := range s {
		if g.Provider != nil {
			out = append(out, g.Provider)
		}
	}
	return out
}

// StatusClients are the gateways the status poll asks.
func (s Set) StatusClients() []payments.StatusClient {
	var out []payments.StatusClient
	for _, g := range s {
		if g.Status != nil {
			out = append(out, g.Status)
		}
	}
	return out
}

// Senders are the notification writers of the gateways that receive
// notifications: the formats the sandbox page can speak.
func (s Set) Senders() []payments.Sender {
	var out []payments.Sender
	for _, g := range s {
		if g.Provider != nil && g.Sender != nil {
			out = append(out, g.Sender)
		}
	}
	return out
}

// DefaultSecret is the secret `sekali sign` and the replayer sign a
// gateway's notifications with when none is given: the first one of the
// variable the server checks them with (getenv reads it); for the
// sandbox, the development secret when that variable is unset. "" for a
// gateway it does not know or whose variable is unset.
func DefaultSecret(name string, getenv func(string) string) string {
	e, ok := Find(name)
	if !ok {
		return ""
	}
	secret := strings.TrimSpace(strings.Split(getenv(e.SecretVariable), ",")[0])
	if secret == "" && name == sandbox.Name {
		return config.DevSandboxSecret
	}
	return secret
}
