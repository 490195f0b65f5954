package loadtest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// The replayer's default target is this machine at HTTP_ADDR, as `sekali
// serve` listens.
func TestTargetFollowsHTTPAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"":               "http://localhost:8080",
		":9000":          "http://localhost:9000",
		"0.0.0.0:9001":   "http://localhost:9001",
		"127.0.0.1:9002": "http://127.0.0.1:9002",
		"[::1]:9003":     "http://[::1]:9003",
	} {
		if got := localURL(addr); got != want {
			t.Errorf("HTTP_ADDR=%q: target %q, want %q", addr, got, want)
		}
	}
}

// A command line the replayer cannot run is a usage error (exit status 2),
// before any request is sent.
func TestCommandLineMistakes(t *testing.T) {
	t.Parallel()
	env := func(k string) string { return map[string]string{"ADMIN_API_TOKEN": "tok"}[k] }
	for _, args := range [][]string{
		{"-events", "0"},
		{"-provider", "paypal"},
		{"-no-such-flag"},
		{"extra"},
	} {
		var out, errs bytes.Buffer
		err := Command(context.Background(), append([]string{"-target", "http://127.0.0.1:1"}, args...), env, &out, &errs)
		var usage UsageError
		if !errors.As(err, &usage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	var out, errs bytes.Buffer
	err := Command(context.Background(), []string{"-target", "http://127.0.0.1:1"}, func(string) string { return "" }, &out, &errs)
	var usage UsageError
	if !errors.As(err, &usage) || usage.Msg != "replay needs the server's admin token: -token or ADMIN_API_TOKEN" {
		t.Errorf("without a token: %v", err)
	}
}

// -h names each flag's default once: the flag package writes it, and a
// usage text that says it too ("(default: …)") printed two.
func TestHelpNamesEachDefaultOnce(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	Command(context.Background(), []string{"-h"}, func(string) string { return "" }, &out, &errs)
	help := errs.String()
	if !strings.Contains(help, "-target") {
		t.Fatalf("-h printed no -target:\n%s", help)
	}
	for _, line := range strings.Split(help, "\n") {
		if n := strings.Count(line, "(default"); n > 1 {
			t.Errorf("a line of -h names %d defaults: %q", n, line)
		}
	}
}
