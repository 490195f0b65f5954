// Package testenv gives tests real services cheaply: a fresh PostgreSQL
// database per test, cloned from a template migrated once per migration
// set, and fixtures for the things most tests need first.
//
// The server is found through SEKALI_TEST_DATABASE_URL (default: the
// local server's "postgres" database, user postgres, trust auth). Every
// database it creates is named with DBPrefix, so that two checkouts on one
// server keep apart.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
	prefix, err := DBPrefix()
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	name := prefix + "test_" + randomHex(8)
	admin := adminConn(tb)
	if _, err := admin.Exec(context.Background(),
		fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", ident(name), ident(templateName))); err != nil {
		tb.Fatalf("testenv: create database: %v", err)
	}
	// A commit need not wait for its WAL to reach the disk here: no test
	// survives the machine's crash, and none tests that PostgreSQL does.
	// What it changes is the time of every commit: the wait for the
	// disk, about 4 ms a commit on a small virtual machine's.
	if _, err := admin.Exec(context.Background(), fmt.Sprintf("ALTER DATABASE %s SET synchronous_commit = off", ident(name))); err != nil {
		tb.Fatalf("testenv: set up database: %v", err)
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

// DBPrefixVar names the environment variable that sets DBPrefix.
const DBPrefixVar = "SEKALI_TEST_DB_PREFIX"

var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,29}$`)

// DBPrefix is the start of the name of every database testenv creates:
// <prefix>test_<16 hex> for a test's, <prefix>tmpl_<hash of the
// migrations> for the template. It is $SEKALI_TEST_DB_PREFIX, or
// sekali_<8 hex of a SHA-256 of the checkout's directory>_, so that two
// checkouts testing against one server never clone or clean up each
// other's (tools/testclean drops only its own checkout's).
func DBPrefix() (string, error) {
	if p := os.Getenv(DBPrefixVar); p != "" {
		if !prefixPattern.MatchString(p) {
			return "", fmt.Errorf("%s=%q: use lower-case letters, digits and _, starting with a letter (at most 30)", DBPrefixVar, p)
		}
		return p, nil
	}
	root, err := checkoutRoot()
	if err != nil {
		return "", fmt.Errorf("the default %s: %w", DBPrefixVar, err)
	}
	sum := sha256.Sum256([]byte(root))
	return "sekali_" + hex.EncodeToString(sum[:4]) + "_", nil
}

// checkoutRoot is the directory of the go.mod above the working directory
// (a test runs in its package's directory), or, when that module is
// nested in another of the same checkout (the QA rig's, loadtest/, whose
// path extends the app's), the outer module's: both modules' tests share
// one prefix, so the app's testclean drops what either left.
func checkoutRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return "", err
	}
	root, module := "", ""
	for d := dir; ; d = filepath.Dir(d) {
		if m, ok := modulePath(filepath.Join(d, "go.mod")); ok {
			if root == "" || strings.HasPrefix(module, m+"/") {
				root, module = d, m
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if root == "" {
		return "", fmt.Errorf("no go.mod above %s", dir)
	}
	return root, nil
}

// modulePath is the module path of the go.mod at path, if there is one.
func modulePath(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), true
		}
	}
	return "", true
}

// TemplateName is the template testenv clones this checkout's test
// databases from: <prefix>tmpl_<hash of the migrations>.
func TemplateName() (string, error) {
	prefix, err := DBPrefix()
	if err != nil {
		return "", err
	}
	return prefix + "tmpl_" + migrations.Hash(), nil
}

// ensureTemplate builds the template (TemplateName) once per migration
// set; test binaries running at the same time share it. The build happens
// under a different name and is renamed when complete, so a clone never
// sees a half-migrated template. make test drops it when every binary is
// done, and make test-clean drops it after a go test of your own.
func ensureTemplate() (string, error) {
	// No deadline of its own: on a busy machine the binaries that wait
	// for the lock wait as long as the build takes; go test's -timeout
	// catches a hang.
	ctx := context.Background()
	name, err := TemplateName()
	if err != nil {
		return "", err
	}
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
	// A build that was interrupted.
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
