package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUsageErrorsExitTwo: an unknown command, no command, or a flag a
// command does not know is a usage error (exit status 2) that says what
// was wrong; -h is not an error.
func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"sekali"}, 2, "usage: sekali"},
		{[]string{"sekali", "frobnicate"}, 2, "usage: sekali"},
		{[]string{"sekali", "seed", "--bulk-orders=5"}, 2, "flag provided but not defined: -bulk-orders"},
		{[]string{"sekali", "verify", "--drain-timeout=soon"}, 2, "invalid value"},
		{[]string{"sekali", "migrate", "-nope"}, 2, "flag provided but not defined"},
		{[]string{"sekali", "catch-up", "--since=lately"}, 2, "invalid value"},
		{[]string{"sekali", "catch-up", "-h"}, 0, "-since"},
		{[]string{"sekali", "serve", "-h"}, 0, "-roles"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), c.args, getenv, &stdout, &stderr)
		if got := exitCode(err); got != c.code || !strings.Contains(stdout.String()+stderr.String(), c.says) {
			t.Errorf("%q: exit %d, output %q; want exit %d saying %q", c.args, got, stdout.String()+stderr.String(), c.code, c.says)
		}
	}
}

// The web role derives orders' access tokens from ORDER_TOKEN_SECRET: it
// does not start without one (but with SANDBOX_GATEWAY=on, where the
// development secret stands in), and the error names the variable.
func TestWebRoleNeedsTheOrderTokenSecret(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"sekali", "serve", "--roles=web"}, func(string) string { return "" }, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "ORDER_TOKEN_SECRET: unset") {
		t.Errorf("serve --roles=web without ORDER_TOKEN_SECRET: %v, want an error naming it", err)
	}
}
