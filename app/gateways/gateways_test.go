package gateways_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways"
)

// PAYMENT_GATEWAY must name a gateway of the registry; the error says
// which there are, with every other gateway's problem at once.
func TestConfigureChecksThePaymentGateway(t *testing.T) {
	t.Parallel()
	env := config.Env{Getenv: func(string) string { return "" }}
	env.PaymentGateway = "paypal"
	_, err := gateways.Configure(env)
	if err == nil || !strings.Contains(err.Error(), `PAYMENT_GATEWAY: "paypal" is not one of `+strings.Join(gateways.Names(), ", ")) {
		t.Errorf("PAYMENT_GATEWAY=paypal: %v", err)
	}
	for _, name := range gateways.Names() {
		env.PaymentGateway = name
		if _, err := gateways.Configure(env); err != nil && !strings.HasPrefix(err.Error(), "configuration:\n  PAYMENT_GATEWAY: "+name+" needs ") {
			t.Errorf("PAYMENT_GATEWAY=%s with nothing set: %v, want none or what it needs", name, err)
		}
	}
}

// The start-up log line of the gateways' settings has each gateway's
// group (the sandbox's settings are app/config's), and no secret,
// whatever is set.
func TestSettingsLogHidesSecrets(t *testing.T) {
	t.Parallel()
	// Every gateway's settings, its secrets all set; its URLs are
	// settings the line shows.
	secrets := gateways.EmulatedEnv("http://127.0.0.1:1")
	urls := map[string]bool{}
	for k := range secrets {
		if strings.HasSuffix(k, "_URL") {
			urls[k] = true
		}
	}
	env := config.Env{Getenv: func(k string) string { return secrets[k] }}
	env.PaymentGateway = config.DefaultPaymentGateway
	set, err := gateways.Configure(env)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("gateways", "settings", set)
	line := buf.String()
	for _, e := range gateways.All[1:] {
		if !strings.Contains(line, `"`+e.Name+`":{`) {
			t.Errorf("the log line has no settings of %s: %s", e.Name, line)
		}
	}
	if !strings.Contains(line, `":"set"`) {
		t.Errorf("the log line shows no secret as set: %s", line)
	}
	for name, s := range secrets {
		if !urls[name] && strings.Contains(line, s) {
			t.Errorf("the log line shows %s: %s", name, line)
		}
	}
}

// Every gateway of the registry runs against the sandbox gateway's
// emulation with its Emulated settings alone: it reads notifications,
// opens pages and refunds, so tests can drive every gateway alike; and
// it states how many notifications it sends of one refund.
func TestEveryGatewayRunsEmulated(t *testing.T) {
	t.Parallel()
	for _, e := range gateways.All {
		vars := e.Emulated("http://127.0.0.1:1")
		env := config.Env{Getenv: func(k string) string { return vars[k] }}
		env.PaymentGateway = e.Name
		env.SandboxGateway, env.SandboxKeys = true, [][]byte{[]byte("emulated-sandbox-key-0123456789ab")}
		g, err := e.New(env)
		if err != nil {
			t.Errorf("%s with its Emulated settings: %v", e.Name, err)
			continue
		}
		if e.RefundNotices < 1 {
			t.Errorf("%s: RefundNotices %d, want at least one", e.Name, e.RefundNotices)
		}
		if slices.Contains(gateways.Paid(), e.Name) && (g.Provider == nil || g.Pages == nil || g.Refunder == nil || g.Emulator == nil) {
			t.Errorf("%s with its Emulated settings: %+v; want its provider, pages, refunder and emulation", e.Name, g)
		}
	}
}

// `sekali sign` and the replayer sign with the first of a gateway's
// secrets when its variable lists several (the newest, while the older
// is still accepted).
func TestDefaultSecretIsTheFirst(t *testing.T) {
	t.Parallel()
	for _, e := range gateways.All {
		getenv := func(k string) string {
			if k == e.SecretVariable {
				return "first-secret-0123456789, older-secret-0123456789"
			}
			return ""
		}
		if got := gateways.DefaultSecret(e.Name, getenv); got != "first-secret-0123456789" {
			t.Errorf("%s: DefaultSecret %q, want the first of the list", e.Name, got)
		}
	}
}

// Every gateway states its schedule of asks about unknown outcomes, and
// each is a schedule the janitor can keep: waits at least the first
// ask's minute (a call's lease is 20 s; asking sooner would find it
// still held), never shorter than the wait before (an outcome unknown
// longer is asked less often), and an end past a day — a gateway's
// own retries of its notifications run for hours at least, and the audit
// must not call an outcome overdue that a notification may still tell.
func TestEveryGatewayHasASchedule(t *testing.T) {
	t.Parallel()
	all := gateways.Schedules()
	for _, e := range gateways.All {
		s := all[e.Name]
		if len(s) == 0 {
			t.Errorf("%s states no schedule", e.Name)
			continue
		}
		for i, w := range s {
			if w < gatewaycalls.FirstAsk || (i > 0 && w < s[i-1]) {
				t.Errorf("%s: wait %d is %v in %v: less than a minute, or shorter than the one before", e.Name, i+1, w, s)
			}
		}
		if e.Name != "sandbox" && s.End() < 24*time.Hour {
			t.Errorf("%s's schedule (%s) ends after %v: before a day", e.Name, s, s.End())
		}
	}
}

// docs/gateway-calls.md's table of the schedules says what each
// gateway's Schedule is: its asks and the end the audit holds it to.
func TestSchedulesTableIsTrue(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/gateway-calls.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 {
			rows[strings.ToLower(strings.TrimSpace(cells[1]))] = line
		}
	}
	for _, e := range gateways.All {
		row, ok := rows[e.Name]
		if !ok {
			t.Errorf("docs/gateway-calls.md has no row of %s's schedule", e.Name)
			continue
		}
		end := e.Schedule.End()
		days, hours, minutes := int(end/(24*time.Hour)), int(end%(24*time.Hour)/time.Hour), int(end%time.Hour/time.Minute)
		endText := fmt.Sprintf("%d h %d m", hours, minutes)
		if days > 0 {
			endText = fmt.Sprintf("%d d %s", days, endText)
		} else if hours == 0 {
			endText = fmt.Sprintf("%d m", minutes)
		}
		if !strings.Contains(row, "| "+e.Schedule.String()+" |") || !strings.HasSuffix(strings.TrimSpace(row), "| "+endText+" |") {
			t.Errorf("%s's row reads\n%s\nwant its asks %q and its end %q", e.Name, row, e.Schedule.String(), endText)
		}
	}
}
