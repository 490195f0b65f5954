// Command sekali-replay replays QA's duplicate and concurrent callback
// scenarios against a running Sekali server and ends with its integrity
// audit (loadtest.Command; loadtest/README.md). It is a binary of its own
// so that the server's binary carries no load generator.
//
//	go -C loadtest run ./cmd/sekali-replay -target http://localhost:8080 -scenario all
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sekali/sekali/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := loadtest.Command(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	var usage loadtest.UsageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "sekali-replay:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sekali-replay:", err)
		os.Exit(1)
	}
}
