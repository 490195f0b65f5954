package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/store"
)

// usageFormat is the help text; %s is the registry's gateways.
const usageFormat = `usage: sekali <command> [flags]

commands:
  serve     run Sekali: every role (web, worker, relay, scheduler) in one process, or --roles=… for some
  migrate   up | down | status: apply the embedded SQL migrations
  seed      create the demo products and the admin user (idempotent)
  verify    run the integrity audit; exit status 1 on any violation
  catch-up  [--since 72h]: ask the gateways what Sekali missed (an outage longer than their retries) and apply it, once
  admin     invite EMAIL --role viewer|operator|owner: print a one-time link to become an admin
  sign      sign a callback body as its gateway does (--provider %s), for curl

Configuration comes from the environment; see README.md. QA's replayer
is a binary of its own in the QA module: go -C loadtest run ./cmd/sekali-replay -h.
`

// usage is the help text, naming the gateways of the registry.
func usage() string { return fmt.Sprintf(usageFormat, strings.Join(gateways.Names(), "|")) }

// exitError carries a process exit status other than 1.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// run is the whole program, with its environment passed in so that tests
// can run it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprint(stderr, usage())
		return &exitError{code: 2, msg: "no command given"}
	}
	cmd, rest := args[1], args[2:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return migrate(ctx, rest, getenv, stdout, stderr)
	case "seed":
		return seed(ctx, rest, getenv, stdout, stderr)
	case "verify":
		return verify(ctx, rest, getenv, stdout, stderr)
	case "catch-up":
		return catchUp(ctx, rest, getenv, stdout, stderr)
	case "admin":
		return admin(ctx, rest, getenv, stdout, stderr)
	case "sign":
		return sign(rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return nil
	}
	fmt.Fprint(stderr, usage())
	return &exitError{code: 2, msg: fmt.Sprintf("unknown command %q", cmd)}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "sekali:", ee.msg)
		}
		return ee.code
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(os.Stderr, "sekali:", err)
	return 1
}

// loadConfig reads the configuration; a bad variable stops the command
// with a message that names it.
func loadConfig(getenv func(string) string) (config.Config, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return cfg, fmt.Errorf("configuration:\n  %s", strings.ReplaceAll(err.Error(), "\n", "\n  "))
	}
	return cfg, nil
}

// openDatabase loads the configuration and opens a small pool, for the
// one-shot commands (seed, verify).
func openDatabase(ctx context.Context, getenv func(string) string) (config.Config, *gorm.DB, error) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return cfg, nil, err
	}
	db, err := store.Open(ctx, cfg.PoolURL(), 2, nil)
	return cfg, db, err
}

// newLogger writes JSON lines to w at the configured level.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// parseFlags parses a command's flags. A flag it does not know, or a bad
// value, is a usage error: exit status 2, as for an unknown command (the
// flag package has printed what was wrong and the usage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &exitError{code: 2}
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sekali "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
