// Command chaos runs Sekali as a small cluster — two web, two worker, two
// relay processes and a scheduler, each a real `sekali serve` — on a world
// of its own (a fresh database behind an in-process TCP proxy, a private
// redis-server, and the gateway the processes call: the sandbox
// gateway's emulation of Stripe's API, served by this program), drives
// duplicate storms at the two web processes while customers press Pay
// (a Checkout Session at the gateway), pay, and are refunded by admins
// (refunds the workers ask the gateway for), and meanwhile breaks things
// at random moments: it SIGKILLs processes and restarts them, restarts
// Redis without its data, cuts PostgreSQL for a few seconds, and makes
// the gateway answer 500 before acting, or act and never answer. After
// each round it heals everything, finishes what customers and admins
// began, lets the work drain and asks `sekali verify` whether every
// effect happened exactly once, then holds what the gateway made against
// what Sekali recorded: one session per page recorded, one refund per
// refund recorded, of their amounts, nothing the gateway made unrecorded,
// no payment refunded above what it took. `make chaos` runs it.
//
// The replayer's own verdicts mean nothing under faults (a delivery cut
// by a kill is an error, not a bug) and are ignored: only the integrity
// audit and the comparison with the gateway judge.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	opts.Out = os.Stdout
	res, err := run(ctx, opts)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	case res.violations() > 0:
		fmt.Fprintf(os.Stderr, "chaos: %d violation(s)\n", res.violations())
		os.Exit(1)
	}
}

// options are one run's settings; the flags set them, the test too.
type options struct {
	Bin           string        // the sekali binary
	Rounds        int           // rounds to run
	Seed          uint64        // seeds the fault schedule
	RoundDuration time.Duration // length of each round's storm
	DrainTimeout  time.Duration // verify's --drain-timeout
	Keep          bool          // keep the database and the logs
	Verbose       bool          // print every fault, storm and process event

	// The storm, per web process: scenarios of the loadtest package, run
	// one after the other until the round's storm ends.
	Scenarios   []string
	Events      int
	Copies      int
	Concurrency int

	// The customers who press Pay (and are refunded), per second of the
	// storm, and the presses of each at once.
	PayRate int
	Presses int

	// Plans fixes each round's faults (the test's rounds); when nil every
	// round gets a random plan drawn from Seed.
	Plans []plan

	LogLevel string    // LOG_LEVEL of the sekali processes
	AdminURL string    // the PostgreSQL server's maintenance database
	Out      io.Writer // progress and the table
}

func defaultOptions() options {
	return options{
		Bin: "../bin/sekali", Rounds: 20, RoundDuration: 15 * time.Second,
		DrainTimeout: 150 * time.Second, Scenarios: []string{"duplicate-storm", "race"},
		Events: 25, Copies: 10, Concurrency: 16, PayRate: 2, Presses: 4, LogLevel: "error", AdminURL: adminURL(),
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Bin, "bin", o.Bin, "the sekali binary (make build)")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "rounds to run")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the fault schedule; 0: from the clock (it is printed at the start)")
	fs.DurationVar(&o.RoundDuration, "round-duration", o.RoundDuration, "length of each round's storm; faults fall inside it")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "how long verify may wait for the work of each round to finish; also how long the customers' and admins' unfinished work and the gateway's rows may take to settle")
	fs.BoolVar(&o.Keep, "keep", false, "keep the database and the process logs")
	fs.BoolVar(&o.Verbose, "v", false, "print every fault, storm and process event")
	scenarios := fs.String("scenarios", strings.Join(o.Scenarios, ","), "loadtest scenarios each web process is stormed with, in turn")
	fs.IntVar(&o.Events, "events", o.Events, "events (orders) per scenario run, per web process")
	fs.IntVar(&o.Copies, "copies", o.Copies, "deliveries of each event")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "requests in flight at once, per web process")
	fs.IntVar(&o.PayRate, "pay-rate", o.PayRate, "customers a second who press Pay, pay through the emulated Stripe and are refunded; 0 for none")
	fs.IntVar(&o.Presses, "presses", o.Presses, "presses of Pay at once per order, on both web processes")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "LOG_LEVEL of the sekali processes")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go -C loadtest run ./chaos [flags]\n\nRuns Sekali as seven processes under duplicate storms, Pay presses and\nrefunds while killing processes, restarting Redis without its data, cutting\nPostgreSQL and failing the calls to an emulated Stripe; the integrity audit\nand a comparison of the gateway with the database judge every round. Needs\nPostgreSQL (SEKALI_TEST_DATABASE_URL) and redis-server.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Scenarios = strings.Split(*scenarios, ",")
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Rounds < 1 || o.Events < 1 || o.Copies < 1 || o.Concurrency < 1 || o.Presses < 1 || o.PayRate < 0 || o.RoundDuration < 5*time.Second {
		err := fmt.Errorf("-rounds, -events, -copies, -concurrency and -presses must be at least 1, -pay-rate at least 0, -round-duration at least 5s")
		fmt.Fprintln(stderr, err)
		return o, err
	}
	return o, nil
}

// adminURL is the PostgreSQL server's maintenance database, as the tests
// find it.
func adminURL() string {
	if u := os.Getenv("SEKALI_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}
