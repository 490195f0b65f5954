package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sekali/sekali/app/testenv"
)

// The databases testenv creates, a test's and its template, are the ones
// testclean looks for with this checkout's prefix, and a prefix from the
// environment replaces the default.
func TestPatternsMatchTestenv(t *testing.T) {
	t.Parallel()
	prefix, err := testenv.DBPrefix()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testenv.NewDatabaseURL(t)) // builds the template if it is missing
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := testenv.TemplateName()
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, testenv.AdminURL())
	for _, tc := range []struct{ name, pattern string }{
		{strings.TrimPrefix(u.Path, "/"), likePrefix(prefix + "test_")},
		{tmpl, likePrefix(prefix + "tmpl_")},
	} {
		var exists bool
		if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datname LIKE $2)", tc.name, tc.pattern).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if !exists {
			t.Errorf("no database %s matching %s: testclean would not find what testenv creates", tc.name, tc.pattern)
		}
	}
	if got, want := likePrefix("a_b%"), `a\_b\%%`; got != want {
		t.Errorf("likePrefix(a_b%%) = %s, want %s", got, want)
	}
}

// Two checkouts get two prefixes; the environment's wins.
func TestPrefix(t *testing.T) {
	t.Setenv(testenv.DBPrefixVar, "")
	here, err := testenv.DBPrefix()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(here, "sekali_") || len(here) != len("sekali_")+9 {
		t.Errorf("default prefix %q, want sekali_<8 hex>_", here)
	}
	// The QA module (loadtest/go.mod, nested in the app's) shares the
	// app's prefix: make test's testclean drops what its tests left.
	t.Chdir("../../loadtest")
	if qa, err := testenv.DBPrefix(); err != nil || qa != here {
		t.Errorf("the QA module's prefix = %q (%v), want the app's %q", qa, err, here)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(other, "sub")
	if err := os.Mkdir(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nested, "go.mod"), []byte("module y/sub\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(nested) // a module whose path does not extend x's: a checkout of its own
	sub, err := testenv.DBPrefix()
	if err != nil || sub == here {
		t.Errorf("a module nested but unrelated: prefix %q (%v), want other than %q", sub, err, here)
	}
	t.Chdir(other)
	if there, err := testenv.DBPrefix(); err != nil || there == here || there == sub {
		t.Errorf("another checkout's prefix = %q (%v), want other than %q and %q", there, err, here, sub)
	}
	t.Setenv(testenv.DBPrefixVar, "ci_job7_")
	if p, err := testenv.DBPrefix(); p != "ci_job7_" || err != nil {
		t.Errorf("with %s=ci_job7_: %q, %v", testenv.DBPrefixVar, p, err)
	}
	t.Setenv(testenv.DBPrefixVar, "Robert'); DROP")
	if _, err := testenv.DBPrefix(); err == nil {
		t.Errorf("a prefix that is not a plain name was accepted")
	}
}

// Only databases nobody is connected to are dropped. The test works on
// databases of its own name, never on testenv's: other packages' tests
// run at the same time.
func TestDropsOnlyUnconnected(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := connect(t, testenv.AdminURL())
	prefix := "testclean_probe_" + randomHex(4) + "_"
	idle, busy := prefix+"idle", prefix+"busy"
	for _, name := range []string{idle, busy} {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		})
	}
	u, err := url.Parse(testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + busy
	connect(t, u.String()) // held until the test ends

	pattern := strings.ReplaceAll(prefix, "_", `\_`) + "%"
	// Just created: younger than an hour, so kept when the age is known.
	names, ageKnown, err := leftovers(ctx, admin, pattern, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ageKnown && len(names) != 0 {
		t.Errorf("leftovers younger than 1h = %v, want none", names)
	}
	names, _, err = leftovers(ctx, admin, pattern, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{idle}) {
		t.Fatalf("leftovers = %v, want [%s] (the unconnected one)", names, idle)
	}

	var out strings.Builder
	for _, name := range []string{idle, busy} {
		if err := dropIfIdle(ctx, admin, name, false, &out); err != nil {
			t.Fatal(err)
		}
	}
	var left []string
	rows, err := admin.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE $1 ORDER BY 1", pattern)
	if err == nil {
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{busy}) {
		t.Errorf("after dropping, databases = %v, want [%s]\n%s", left, busy, out.String())
	}
	if want := "dropped " + idle; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "kept "+busy) {
		t.Errorf("output = %q, want %q and kept %s", out.String(), want, busy)
	}
}

func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
