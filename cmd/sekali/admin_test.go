package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
)

// `sekali admin invite EMAIL --role R` prints a one-time link under
// PUBLIC_URL, keeps only its hash, and refuses a role that is not one or
// an email given twice.
func TestAdminInvitePrintsAOneTimeLink(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": testenv.NewDatabaseURL(t), "PUBLIC_URL": "https://shop.example.com/"}
	getenv := func(k string) string { return env[k] }
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"sekali", "admin", "invite", "Ops@Example.com", "--role", "operator"}, getenv, &stdout, &stderr)
	if err != nil {
		t.Fatalf("admin invite: %v\n%s", err, stderr.String())
	}
	link := regexp.MustCompile(`https://shop\.example\.com/admin/invite/([A-Za-z0-9_-]{43})\n`).FindStringSubmatch(stdout.String())
	if link == nil || !strings.Contains(stdout.String(), "ops@example.com as operator") {
		t.Fatalf("output %q has no invitation link", stdout.String())
	}
	db := testenv.OpenDB(t, env["DATABASE_URL"])
	var kept int64
	db.Raw("SELECT count(*) FROM admin_invitations WHERE email = 'ops@example.com' AND role = 'operator' AND token_hash = sha256(?::bytea)", link[1]).Scan(&kept)
	if kept != 1 {
		t.Errorf("%d invitations kept under the link's hash, want 1", kept)
	}
	for _, args := range [][]string{
		{"sekali", "admin", "invite", "a@example.com", "--role", "king"},
		{"sekali", "admin", "invite"},
		{"sekali", "admin", "remove", "a@example.com"},
	} {
		stdout.Reset()
		if err := run(context.Background(), args, getenv, &stdout, &stderr); exitCode(err) != 2 {
			t.Errorf("%q: exit %d, want 2", args, exitCode(err))
		}
	}
}
