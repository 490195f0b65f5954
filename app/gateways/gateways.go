// Package gateways is the list of the payment gateways Sekali speaks, one
// package each under it: sandbox, midtrans, xendit, stripe. Each package
// holds all of one gateway — it reads and checks its own settings, and
// its one constructor returns all it offers: its notifications' parser,
// its status client, its payment pages, its refunds, a sender of its
// notifications, the list of those it could not deliver (for catching
// up), its line in the start-up log — behind the small
// interfaces of app/payments and app/gatewaycalls. Nothing else names a
// gateway: adding one is its package and one line in All, deleting one
// is deleting both (docs/callbacks.md#adding-a-gateway).
package gateways

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gatewaycalls"
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
	// New reads its settings and builds its parts; none of them when its
	// settings are unset.
	New func(config.Env) (payments.Gateway, error)
	// Schedule is when the janitor asks it again about a call whose
	// outcome is unknown, and so how long such an outcome may last
	// before the audit reports it.
	Schedule gatewaycalls.Schedule
	// Emulated are the settings that point it at the sandbox gateway's
	// emulation of its API served at a base URL, with development
	// secrets: tests run every gateway of All alike with them.
	Emulated func(base string) map[string]string
	// RefundNotices is how many notifications it sends of one refund
	// made when asked.
	RefundNotices int
}

// All are the gateways, the sandbox first.
var All = []Entry{
	{sandbox.Name, "SANDBOX_WEBHOOK_SECRET", sandbox.NewSenderFromSecret, sandbox.New, sandbox.Schedule, sandbox.Emulated, sandbox.RefundNotices},
	{midtrans.Name, "MIDTRANS_SERVER_KEY", midtrans.NewSender, midtrans.New, midtrans.Schedule, midtrans.Emulated, midtrans.RefundNotices},
	{xendit.Name, "XENDIT_CALLBACK_TOKEN", xendit.NewSender, xendit.New, xendit.Schedule, xendit.Emulated, xendit.RefundNotices},
	{stripe.Name, "STRIPE_WEBHOOK_SECRET", stripe.NewSender, stripe.New, stripe.Schedule, stripe.Emulated, stripe.RefundNotices},
}

// Schedules are every gateway's schedule of asks about unknown
// outcomes, by name: the janitor's and the audit's.
func Schedules() gatewaycalls.Schedules {
	s := gatewaycalls.Schedules{}
	for _, e := range All {
		s[e.Name] = e.Schedule
	}
	return s
}

// Names are the gateways' names, in the order of All.
func Names() []string {
	names := make([]string, len(All))
	for i, e := range All {
		names[i] = e.Name
	}
	return names
}

// Paid are the names of the gateways other than the sandbox: those a
// shop is paid through, in the order of All.
func Paid() []string {
	return slices.DeleteFunc(Names(), func(n string) bool { return n == sandbox.Name })
}

// EmulatedEnv is the settings of every gateway of All at once, each
// pointed at the sandbox gateway's emulation of its API served at base.
func EmulatedEnv(base string) map[string]string {
	env := map[string]string{}
	for _, e := range All {
		maps.Copy(env, e.Emulated(base))
	}
	return env
}

// SecretVariables are the variables each gateway's notifications are
// checked with, in the order of All.
func SecretVariables() []string {
	vars := make([]string, len(All))
	for i, e := range All {
		vars[i] = e.SecretVariable
	}
	return vars
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
type Set struct {
	gateways []payments.Gateway // those with a part built
	pages    gatewaycalls.PageOpener
	settings []slog.Attr
}

// Configure builds every gateway from its settings (env.Getenv), and
// checks PAYMENT_GATEWAY: a gateway of All, with what its pages need. A
// setting of the wrong form stops start-up with a message that names its
// variable (never its value); all of them at once.
func Configure(env config.Env) (Set, error) {
	var set Set
	var problems []string
	if _, ok := Find(env.PaymentGateway); !ok {
		problems = append(problems, fmt.Sprintf("PAYMENT_GATEWAY: %q is not one of %s", env.PaymentGateway, strings.Join(Names(), ", ")))
	}
	for _, e := range All {
		g, err := e.New(env)
		if err != nil {
			problems = append(problems, strings.ReplaceAll(err.Error(), "\n", "\n  "))
			continue
		}
		if len(g.Settings) > 0 {
			set.settings = append(set.settings, slog.Attr{Key: e.Name, Value: slog.GroupValue(g.Settings...)})
		}
		if e.Name == env.PaymentGateway {
			set.pages = g.Pages
		}
		if g.Provider != nil || g.Status != nil || g.Pages != nil || g.Refunder != nil || g.Emulator != nil || g.Missed != nil {
			g.Name = e.Name
			set.gateways = append(set.gateways, g)
		}
	}
	if len(problems) > 0 {
		return Set{}, errors.New("configuration:\n  " + strings.Join(problems, "\n  "))
	}
	return set, nil
}

// LogValue is every gateway's settings, secrets only as set or unset.
func (s Set) LogValue() slog.Value { return slog.GroupValue(s.settings...) }

// PageOpener opens the hosted payment pages of the gateway new payments
// go to (PAYMENT_GATEWAY); nil for the sandbox, whose pages the sandbox
// gateway serves itself.
func (s Set) PageOpener() gatewaycalls.PageOpener { return s.pages }

// PageOpeners are the page openers of every gateway whose API key is
// set, PAYMENT_GATEWAY's or not: the janitor looks up the pages of
// orders asked under an earlier setting too.
func (s Set) PageOpeners() []gatewaycalls.PageOpener {
	return parts(s, func(g payments.Gateway) gatewaycalls.PageOpener { return g.Pages })
}

// Refunders are the gateways Sekali can ask for refunds.
func (s Set) Refunders() []gatewaycalls.Refunder {
	return parts(s, func(g payments.Gateway) gatewaycalls.Refunder { return g.Refunder })
}

// Providers are the gateways that receive notifications.
func (s Set) Providers() []payments.Provider {
	return parts(s, func(g payments.Gateway) payments.Provider { return g.Provider })
}

// StatusClients are the gateways the status poll asks.
func (s Set) StatusClients() []payments.StatusClient {
	return parts(s, func(g payments.Gateway) payments.StatusClient { return g.Status })
}

// Listers are the gateways whose API lists the notifications they
// could not deliver, for catching up.
func (s Set) Listers() []payments.MissedLister {
	return parts(s, func(g payments.Gateway) payments.MissedLister { return g.Missed })
}

// Senders are the notification writers of the gateways that receive
// notifications: the formats the sandbox page can speak.
func (s Set) Senders() []payments.Sender {
	return parts(s, func(g payments.Gateway) payments.Sender {
		if g.Provider == nil {
			return nil
		}
		return g.Sender
	})
}

// Emulators are the emulations of the gateways' APIs that the sandbox
// gateway serves, where it runs.
func (s Set) Emulators() []payments.Emulator {
	return parts(s, func(g payments.Gateway) payments.Emulator { return g.Emulator })
}

// parts is one part of each configured gateway that has it.
func parts[T comparable](s Set, part func(payments.Gateway) T) []T {
	var none T
	var out []T
	for _, g := range s.gateways {
		if p := part(g); p != none {
			out = append(out, p)
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
