package config

import (
	"errors"
	"log/slog"
)

// Env is what one gateway package (app/gateways/…) builds itself from:
// its own variables, read through Getenv, and the deployment's settings
// it depends on (PAYMENT_GATEWAY, the sandbox gateway's). This package
// names no gateway: each reads, checks and logs its own settings.
type Env struct {
	Config
	Getenv func(string) string
	// SandboxURL is where this deployment's sandbox gateway answers when
	// it runs (SANDBOX_GATEWAY=on), else "": a gateway whose API the
	// sandbox gateway emulates may default to it.
	SandboxURL string
}

// Reader reads a gateway's variables the way Load reads Sekali's: blank
// is unset, and a bad value is reported naming its variable, never
// repeating the value.
func (e Env) Reader() *Reader {
	getenv := e.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return &Reader{r: reader{getenv: getenv}}
}

// Reader collects one error per bad variable; Err joins them.
type Reader struct{ r reader }

// String is the variable name, trimmed; "" when unset.
func (r *Reader) String(name string) string { return r.r.str(name, "") }

// URL is the optional http(s) URL in name; "" when unset or bad.
func (r *Reader) URL(name string) string { return r.r.optionalURL(name, "http", "https") }

// Secret is the secret in name, checked by check (whose error must not
// repeat it); "" when unset or of the wrong form.
func (r *Reader) Secret(name string, check func(string) error) string {
	v := r.String(name)
	if v == "" {
		return ""
	}
	if err := check(v); err != nil {
		r.Fail(name, "%v", err)
		return ""
	}
	return v
}

// Needs reports, when PAYMENT_GATEWAY names gateway, that its pages need
// variable, which is unset (value "").
func (r *Reader) Needs(env Env, gateway, variable, value string) {
	if env.PaymentGateway == gateway && value == "" {
		r.Fail("PAYMENT_GATEWAY", "%s needs %s", gateway, variable)
	}
}

// Fail reports that name is wrong; format must not repeat a secret.
func (r *Reader) Fail(name, format string, args ...any) { r.r.fail(name, format, args...) }

// Err is every failure so far, or nil.
func (r *Reader) Err() error { return errors.Join(r.r.errs...) }

// IsSet is how a secret is logged: whether it is set, never its value.
func IsSet(name, v string) slog.Attr {
	if v == "" {
		return slog.String(name, "unset")
	}
	return slog.String(name, "set")
}
