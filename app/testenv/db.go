// Package testenv gives tests real services cheaply: a fresh PostgreSQL
// database per test, cloned from a template migrated once per migration
// set, and fixtures for the things most tests need first.
//
// The server is found through SEKALI_TEST_DATABASE_URL (default: the
// local server's "postgres" database, user postgres, trust auth).
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/migrations"
)

const defaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// templateLock is the advisory lock key that serialises template builds
// across test binaries running at the same time.
const templateLock = 7_265_001

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// NewDB returns a connection pool to a new, migrated, empty database that
// is dropped when the test ends.
func NewDB(tb testing.TB) *gorm.DB {
	tb.Helper()
	return OpenDB(tb, NewDatabaseURL(tb))
}

// OpenDB opens a pool to databaseURL and closes it when the test ends.
func OpenDB(tb testing.TB, databaseURL string) *gorm.DB {
	tb.Helper()
	db, err := store.Open(context.Background(), databaseURL, 5, nil)
	if err != nil {
		tb.Fatalf("testenv: open %s: %v", databaseURL, err)
	}
	tb.Cleanup(func() { store.Close(db) })
	return db
}

// NewDatabaseURL creates a new migrated database and returns its URL, for
// tests that hand the database to a server or a subprocess. It is dropped
// (with any connection left to it) when the test ends.
func NewDatabaseURL(tb testing.TB) string {
	tb.Helper()
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate() })
	if templateErr != nil {
		tb.Fatalf("testenv: template database: %v", templateErr)
	}
	name := "sekali_test_" + randomHex(8)
	admin := adminConn(tb)
	if _, err := admin.Exec(context.Background(),
		fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", ident(name), ident(templateName))); err != nil {
		tb.Fatalf("testenv: create database: %v", err)
	}
	admin.Close(context.Background())
	tb.Cleanup(func() {
		admin := adminConn(tb)
		defer admin.Close(context.Background())
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			tb.Errorf("testenv: drop database %s: %v", name, err)
		}
	})
	return databaseURL(name)
}

// AdminURL is the URL of the server's maintenance database.
func AdminURL() string {
	if u := os.Getenv("SEKALI_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return defaultAdminURL
}

func databaseURL(name string) string {
	u, err := url.Parse(AdminURL())
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func adminConn(tb testing.TB) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		tb.Fatalf("testenv: connect to PostgreSQL at %s: %v", AdminURL(), err)
	}
	return conn
}

// ensureTemplate builds sekali_tmpl_<hash of the migrations> once per
// migration set. The build happens under a different name and is renamed
// when complete, so a clone never sees a half-migrated template.
func ensureTemplate() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := "sekali_tmpl_" + migrations.Hash()
	building := name + "_building"

	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLock)

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	// A build that was interrupted. Templates of other migration sets may
	// belong to another checkout's run: `make test-clean` drops them.
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(building)+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(building)); err != nil {
		return "", err
	}
	db, err := sql.Open("pgx", databaseURL(building))
	if err != nil {
		return "", err
	}
	err = store.MigrateDB(ctx, db, "up", io.Discard)
	db.Close()
	if err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", ident(building), ident(name))); err != nil {
		return "", err
	}
	return name, nil
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
