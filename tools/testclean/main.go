// Command testclean is `make test-clean`: it drops the test databases that
// runs of this checkout left behind, and nothing else. make test runs it
// when its tests are done, so a run leaves no template behind.
//
// app/testenv names every database it creates with the checkout's prefix
// (testenv.DBPrefix: $SEKALI_TEST_DB_PREFIX, or sekali_<8 hex of the
// checkout's path>_): a test's <prefix>test_<16 random hex>, the template
// it is cloned from <prefix>tmpl_<12 hex of a SHA-256 over the
// migrations>. So testclean drops:
//
//   - every template of this prefix (<prefix>tmpl_%: this migration set's,
//     earlier ones', a _building leftover) that nobody is connected to.
//     Test binaries share the template while they run, and testenv builds
//     it again when it is missing.
//   - every <prefix>test_% database that nobody is connected to and that is
//     older than -min-age (1h), its age read from the modification time of
//     its PG_VERSION file: a test creates its database before it connects,
//     so "no connection, not new" is the test for "left behind". When the
//     server does not let this role read files (pg_stat_file needs
//     superuser or pg_read_server_files) the age is unknown, and testclean
//     says so and drops the unconnected ones of any age.
//
// Nothing is dropped WITH (FORCE): a database someone connects to in the
// meantime makes its DROP fail, and testclean reports it and goes on. It
// takes testenv's advisory lock while it drops the templates, so a test
// binary that is about to build one waits. Still, do not run it while this
// checkout's tests are running: a running test binary may clone the
// template it just dropped.
//
// The server is the one tests use: SEKALI_TEST_DATABASE_URL, or the local
// default (testenv.AdminURL).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sekali/sekali/app/testenv"
)

// templateLock is testenv's advisory lock key for template builds.
const templateLock = 7_265_001

func main() {
	fs := flag.NewFlagSet("testclean", flag.ExitOnError)
	minAge := fs.Duration("min-age", time.Hour, "drop a test database only when it is at least this old (when its age can be read)")
	dryRun := fs.Bool("n", false, "only say what would be dropped")
	fs.Parse(os.Args[1:])
	prefix, err := testenv.DBPrefix()
	if err == nil {
		err = run(context.Background(), testenv.AdminURL(), prefix, *minAge, *dryRun, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-clean:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, adminURL, prefix string, minAge time.Duration, dryRun bool, out io.Writer) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
		return err
	}
	templates, _, err := leftovers(ctx, conn, likePrefix(prefix+"tmpl_"), -1)
	for _, name := range templates {
		if err == nil {
			err = dropIfIdle(ctx, conn, name, dryRun, out)
		}
	}
	if _, uerr := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", templateLock); err == nil {
		err = uerr
	}
	if err != nil {
		return err
	}

	pattern := likePrefix(prefix + "test_")
	names, ageKnown, err := leftovers(ctx, conn, pattern, minAge)
	if err != nil {
		return err
	}
	if !ageKnown {
		fmt.Fprintf(out, "test-clean: cannot read database ages on this server (pg_stat_file needs superuser or pg_read_server_files): dropping every unconnected %s database\n", pattern)
	}
	for _, name := range names {
		if err := dropIfIdle(ctx, conn, name, dryRun, out); err != nil {
			return err
		}
	}
	return nil
}

// likePrefix is the LIKE pattern of the names that start with prefix.
func likePrefix(prefix string) string {
	return strings.NewReplacer(`\`, `\\`, "_", `\_`, "%", `\%`).Replace(prefix) + "%"
}

// leftovers lists the databases matching the LIKE pattern that have no
// connection and, when the server lets us read their PG_VERSION file, are
// at least minAge old; a negative minAge lists them whatever their age.
// ageKnown is false when the age matters and cannot be read.
func leftovers(ctx context.Context, conn *pgx.Conn, pattern string, minAge time.Duration) (names []string, ageKnown bool, err error) {
	const idle = `SELECT d.datname FROM pg_database d
		WHERE d.datname LIKE $1
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datid = d.oid)`
	// A database in the default tablespace keeps its files in base/<oid>;
	// PG_VERSION is written when the database is created. Elsewhere the
	// file is missing (NULL): such a database counts as old.
	const aged = idle + `
		  AND coalesce((pg_stat_file('base/' || d.oid || '/PG_VERSION', true)).modification
		               < now() - make_interval(secs => $2), true)`
	list := func(query string, args ...any) ([]string, error) {
		rows, err := conn.Query(ctx, query+" ORDER BY 1", args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if minAge < 0 {
		names, err := list(idle, pattern)
		return names, true, err
	}
	names, err = list(aged, pattern, minAge.Seconds())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		names, err = list(idle, pattern)
		return names, false, err
	}
	return names, true, err
}

// dropIfIdle drops the database name when it exists and nobody is
// connected to it; a database in use is reported and kept.
func dropIfIdle(ctx context.Context, conn *pgx.Conn, name string, dryRun bool, out io.Writer) error {
	var exists bool
	var users int
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1),
		(SELECT count(*) FROM pg_stat_activity WHERE datname = $1)`, name).Scan(&exists, &users)
	switch {
	case err != nil:
		return err
	case !exists:
		return nil
	case users > 0:
		fmt.Fprintf(out, "kept %s: %d connection(s) (tests running?)\n", name, users)
		return nil
	case dryRun:
		fmt.Fprintf(out, "would drop %s\n", name)
		return nil
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use: someone connected meanwhile
			fmt.Fprintf(out, "kept %s: %s\n", name, pgErr.Message)
			return nil
		}
		return fmt.Errorf("drop %s: %w", name, err)
	}
	fmt.Fprintf(out, "dropped %s\n", name)
	return nil
}
