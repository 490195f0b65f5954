package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sekali/sekali/app/store"
)

// migrate is `sekali migrate up|down|status`. up first creates the
// database when it does not exist. It connects to DATABASE_LISTEN_URL
// (default DATABASE_URL), the direct connection: goose's advisory lock
// is held by a session, which PgBouncer's transaction pooling would hand
// to someone else after each statement.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: sekali migrate up|down|status") }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return &exitError{code: 2, msg: "migrate needs one of up, down, status"}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	command := fs.Arg(0)
	if command == "up" {
		created, err := store.CreateDatabase(ctx, cfg.DatabaseListenURL)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintln(stdout, "migrate: created the database")
		}
	}
	return store.Migrate(ctx, cfg.DatabaseListenURL, command, stdout)
}
