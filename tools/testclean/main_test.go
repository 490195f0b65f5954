package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sekali/sekali/app/testenv"
)

// testenv builds its template under the name templateName computes, or
// make test-clean would miss it (and keep dropping nothing).
func TestTemplateNameMatchesTestenv(t *testing.T) {
	t.Parallel()
	testenv.NewDatabaseURL(t) // builds the template if it is missing
	conn := connect(t, testenv.AdminURL())
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", templateName()).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		t.Fatalf("no database %s after testenv.NewDatabaseURL: testclean's name for the template no longer matches app/testenv's", templateName())
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
