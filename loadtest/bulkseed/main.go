// Bulkseed makes a database the size the admin console must stay fast on
// (`go -C loadtest run ./bulkseed -orders=200000`: about 1,000,000
// deliveries), with data that the integrity audit finds consistent: every
// row a real run of the app would have written for those orders, written
// through the app's GORM models. `make bench` seeds its admin database
// with it; it is not part of the sekali binary.
//
// Go decides, per order, what happened to it (its id from its creation
// time, status, event times, how often the gateway redelivered), a chunk
// of orders at a time, and writes the rows that follow from it with
// batched INSERTs, each table in time order so that ids grow with time,
// in one transaction: a seed that fails leaves nothing behind. Running it
// again adds another batch the same way: order ids and callback keys are
// new, invoice numbers continue the year's counter, stock is adjusted by
// the batch's own movements, and the delivery rollup is recounted.
//
// It reads DATABASE_URL (and ORDER_TTL, the orders' time to pay) as
// sekali does; the database must be migrated (sekali migrate up).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// errUsage is a command line that cannot run; the flag set said why.
var errUsage = errors.New("usage")

// run is the whole program, with its environment passed in so that tests
// can run it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bulkseed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bulkseed -orders=N  (DATABASE_URL: a migrated database; each run adds a batch)")
		fs.PrintDefaults()
	}
	orders := fs.Int("orders", 0, "generate this many orders with their callbacks, deliveries, payments, invoices, emails and jobs, spread over the last 30 days")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if *orders < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "bulkseed: -orders must be a number of orders (1 or more), and nothing follows it")
		fs.Usage()
		return errUsage
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return fmt.Errorf("bulkseed: configuration: %w", err)
	}
	db, err := store.Open(ctx, cfg.PoolURL(), 2, nil)
	if err != nil {
		return fmt.Errorf("bulkseed: %w", err)
	}
	defer store.Close(db)
	_, err = seed(ctx, db, batch{n: *orders, chunk: defaultChunk, ttl: cfg.OrderTTL, keptKey: payments.KeptBodyKey(cfg.OrderTokenKey)}, stdout)
	return err
}
