// Package gatewaytest holds what the gateway packages' tests check the
// same way: how Parse refuses or ignores a notification, and which parts
// Configure builds from which settings.
package gatewaytest

import (
	"errors"
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

// Setting is one configuration of a gateway and what Configure builds
// from it: the receiving side (provider and sender), the status client,
// or an error naming WrongVariable.
type Setting struct {
	Name          string
	Config        config.Config
	Receives      bool
	Asks          bool
	WrongVariable string
}

// Configure checks configure against each setting; an error must name
// its variable and repeat none of secrets.
func Configure(tb testing.TB, configure func(config.Config, string) (payments.Gateway, error), settings []Setting, secrets ...string) {
	tb.Helper()
	for _, s := range settings {
		g, err := configure(s.Config, "")
		if s.WrongVariable == "" {
			if err != nil || (g.Provider != nil) != s.Receives || (g.Sender != nil) != s.Receives || (g.Status != nil) != s.Asks {
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
