package loadtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/sandbox"
)

// UsageError is a command line the replayer cannot run: exit status 2.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// ErrFailed is a replay that ran and failed a check: exit status 1.
var ErrFailed = errors.New("replay failed")

// Command is the replayer's command line (loadtest/cmd/sekali-replay): QA's
// scenarios against a running server, ending with its integrity audit.
// It returns nil only when every answer was the expected one and the
// audit is green; getenv reads the defaults (HTTP_ADDR, ADMIN_API_TOKEN,
// the gateways' secrets).
func Command(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sekali-replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := Defaults
	var names []string
	for _, s := range Scenarios {
		names = append(names, s.Name)
	}
	scenario := fs.String("scenario", "all", "scenario to run: all, "+strings.Join(names, ", "))
	target := fs.String("target", localURL(getenv("HTTP_ADDR")), "base URL of the server; the default is this machine at HTTP_ADDR")
	metricsURL := fs.String("metrics", "", "the server's /metrics, where the delivery rows it dropped are counted (a scenario in which rows were dropped fails); the default is -target's /metrics")
	events := fs.Int("events", d.Events, "events (orders) per scenario")
	copies := fs.Int("copies", d.Copies, "deliveries of each event")
	concurrency := fs.Int("concurrency", d.Concurrency, "requests in flight at once")
	duration := fs.Duration("duration", d.Duration, "length of the steady scenario")
	rate := fs.Int("rate", d.Rate, "requests per second of the steady scenario")
	drain := fs.Duration("drain-timeout", d.DrainTimeout, "how long the audit may wait for the jobs to finish")
	provider := fs.String("provider", sandbox.Name, "the gateway whose callbacks are replayed: "+strings.Join(gateways.Names(), ", "))
	secret := fs.String("secret", "", "the secret the server checks that gateway's callbacks with; default its variable (SANDBOX_WEBHOOK_SECRET, MIDTRANS_SERVER_KEY, XENDIT_CALLBACK_TOKEN, STRIPE_WEBHOOK_SECRET) or, for sandbox, the development secret")
	token := fs.String("token", getenv("ADMIN_API_TOKEN"), "the server's ADMIN_API_TOKEN; default the variable")
	jsonPath := fs.String("json", "", "also write the reports to this file as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sekali-replay [flags]\n\nscenarios:")
		for _, s := range Scenarios {
			fmt.Fprintf(stderr, "  %-16s %s\n", s.Name, s.About)
		}
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return UsageError{fmt.Sprintf("unexpected arguments: %v", fs.Args())}
	}
	gateway, ok := gateways.Find(*provider)
	if !ok {
		return UsageError{fmt.Sprintf("-provider must be one of %s", strings.Join(gateways.Names(), ", "))}
	}
	if *secret == "" {
		if *secret = gateways.DefaultSecret(*provider, getenv); *secret == "" {
			return UsageError{fmt.Sprintf("replay needs -secret or %s for %s", gateway.SecretVariable, *provider)}
		}
	}
	if *token == "" {
		return UsageError{"replay needs the server's admin token: -token or ADMIN_API_TOKEN"}
	}
	if *events < 1 || *copies < 1 || *concurrency < 1 || *rate < 1 {
		return UsageError{"-events, -copies, -concurrency and -rate must be at least 1"}
	}
	reports, err := Run(ctx, Config{
		Target: *target, MetricsURL: *metricsURL, Provider: *provider, Secret: *secret, Token: *token,
		Events: *events, Copies: *copies, Concurrency: *concurrency,
		Duration: *duration, Rate: *rate, DrainTimeout: *drain,
		Progress: stderr, TTY: isTerminal(stderr),
	}, *scenario)
	if err != nil && len(reports) == 0 {
		return err
	}
	PrintSummary(stdout, reports)
	if *jsonPath != "" {
		if err := WriteJSON(*jsonPath, reports); err != nil {
			return err
		}
	}
	for _, r := range reports {
		if !r.OK {
			return fmt.Errorf("%w: %s", ErrFailed, r.Scenario)
		}
	}
	return err
}

// localURL is the URL of a server on this machine listening on addr
// (HTTP_ADDR; ":8080" when unset).
func localURL(addr string) string {
	if addr == "" {
		addr = config.DefaultHTTPAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://localhost:8080"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
