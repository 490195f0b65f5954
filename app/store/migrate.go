package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/sekali/sekali/migrations"
)

// Migrate runs goose's command ("up", "down" or "status") against
// databaseURL with the embedded migrations, writing what it did to out. A
// session-level advisory lock lets several processes start at once.
func Migrate(ctx context.Context, databaseURL, command string, out io.Writer) error {
	dsn, err := withDefaultParams(databaseURL)
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return MigrateDB(ctx, db, command, out)
}

// MigrateDB is Migrate on an open database handle.
func MigrateDB(ctx context.Context, db *sql.DB, command string, out io.Writer) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var results []*goose.MigrationResult
	switch command {
	case "up":
		results, err = p.Up(ctx)
	case "down":
		var r *goose.MigrationResult
		r, err = p.Down(ctx)
		if r != nil {
			results = append(results, r)
		}
	case "status":
		st, err := p.Status(ctx)
		if err != nil {
			return fmt.Errorf("migrate status: %w", err)
		}
		for _, s := range st {
			applied := "pending"
			if !s.AppliedAt.IsZero() {
				applied = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(out, "%-40s %s\n", s.Source.Path, applied)
		}
		return nil
	default:
		return fmt.Errorf("migrate: unknown command %q (want up, down or status)", command)
	}
	for _, r := range results {
		fmt.Fprintf(out, "%s %s (%s)\n", r.Direction, r.Source.Path, r.Duration.Round(1e6))
	}
	if err != nil {
		return fmt.Errorf("migrate %s: %w", command, err)
	}
	if len(results) == 0 {
		fmt.Fprintln(out, "migrate: nothing to do")
	}
	return nil
}

// CreateDatabase creates the database named in databaseURL when it does not
// exist yet, connecting to the server's "postgres" database to do so.
func CreateDatabase(ctx context.Context, databaseURL string) (created bool, err error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return false, fmt.Errorf("create database: bad URL")
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return false, fmt.Errorf("create database: DATABASE_URL names no database")
	}
	admin := *u
	admin.Path = "/postgres"
	dsn, err := withDefaultParams(admin.String())
	if err != nil {
		return false, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false, fmt.Errorf("create database: %w", err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("create database: %w", err)
	}
	if exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		if pgCode(err) == "42P04" { // created by someone else meanwhile
			return false, nil
		}
		return false, fmt.Errorf("create database %s: %w", name, err)
	}
	return true, nil
}
