// Command sekali is the one binary of Sekali: serve, migrate, seed,
// verify and the helpers around them. main only wires the process to run.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr))
	stop()
	os.Exit(code)
}
