// Package gatewaytest holds what the gateway packages' tests check the
// same way, so that a gateway's tests live in its package and go with
// it: how Parse refuses or ignores a notification (Refused), which parts
// a gateway's constructor builds from which settings (Configure), that
// its sender writes what its adapter reads (SenderRoundTrip,
// SenderRefundStates), that its notifications apply once through the
// payments pipeline (Pipeline, AppliesOnce), and what its page opener
// and refunder must do against its emulation of its API (Emulate,
// EmulateSending, Pages, Refunds) and answer to a gateway that
// misbehaves (PageAnswers, PageNoAnswer, PageRefusedBeforeSending), and
// that an answer of another amount or currency than asked — a refund's,
// a page's, a status answer's — changes no money (AnswersChecked,
// StatusChecked).
package gatewaytest

import (
	"bytes"
	"cmp"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Ignored is the outcome of a notification Parse must ignore (answered
// 200, nothing done), where the others are error codes.
const Ignored = "ignored"

// Refused fails tb unless Parse's err is want: an error wrapping
// payments.ErrIgnored for Ignored, else an error of code want.
func Refused(tb testing.TB, ev payments.Event, err error, want string) {
	tb.Helper()
	switch {
	case err == nil:
		tb.Fatalf("parsed %+v, want %s", ev, want)
	case want == Ignored && !errors.Is(err, payments.ErrIgnored):
		tb.Fatalf("%v, want ignored", err)
	case want != Ignored && (errors.Is(err, payments.ErrIgnored) || models.ErrorCode(err) != want):
		tb.Fatalf("%v (%s), want %s", err, models.ErrorCode(err), want)
	}
}

// Setting is one configuration of a gateway — its variables, and the
// gateway PAYMENT_GATEWAY names ("" for the sandbox) — and what its
// constructor builds from it: the receiving side (provider and sender),
// the calling side (status client, page opener and refunder, with the
// emulation of those calls that the sandbox gateway serves), or an
// error naming WrongVariable.
type Setting struct {
	Name          string
	Vars          map[string]string
	Pays          string // PAYMENT_GATEWAY
	Receives      bool
	Asks          bool
	WrongVariable string
}

// Configure checks the constructor newGateway against each setting; an
// error must name its variable and repeat none of secrets, and the log
// line of its settings must repeat none either, whatever is set.
func Configure(tb testing.TB, newGateway func(config.Env) (payments.Gateway, error), settings []Setting, secrets ...string) {
	tb.Helper()
	for _, s := range settings {
		env := config.Env{Getenv: func(k string) string { return s.Vars[k] }}
		env.PaymentGateway = cmp.Or(s.Pays, config.DefaultPaymentGateway)
		g, err := newGateway(env)
		var line bytes.Buffer
		slog.New(slog.NewJSONHandler(&line, nil)).Info("gateways", "settings", slog.GroupValue(g.Settings...))
		for _, secret := range secrets {
			if strings.Contains(line.String(), secret) {
				tb.Errorf("%s: the log line %s repeats a secret", s.Name, line.String())
			}
		}
		if s.WrongVariable == "" {
			asks := g.Status != nil
			if err != nil || (g.Provider != nil) != s.Receives || (g.Sender != nil) != s.Receives ||
				asks != s.Asks || (g.Pages != nil) != asks || (g.Refunder != nil) != asks || (g.Emulator != nil) != asks {
				tb.Errorf("%s: %+v, %v", s.Name, g, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), s.WrongVariable) {
			tb.Errorf("%s: %v, want an error naming %s", s.Name, err, s.WrongVariable)
			continue
		}
		for _, secret := range secrets {
			if strings.Contains(err.Error(), secret) {
				tb.Errorf("%s: the error %q repeats a secret", s.Name, err)
			}
		}
	}
}
