package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/loadtest"
)

// replay is `sekali replay`: QA's scenarios against a running server,
// ending with its integrity audit. Exit status 0 only when every answer
// was the expected one and the audit is green.
func replay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", stderr)
	d := loadtest.Defaults
	var names []string
	for _, s := range loadtest.Scenarios {
		names = append(names, s.Name)
	}
	scenario := fs.String("scenario", "all", "scenario to run: all, "+strings.Join(names, ", "))
	target := fs.String("target", localURL(getenv("HTTP_ADDR")), "base URL of the server (default: this machine at HTTP_ADDR)")
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
		fmt.Fprintln(stderr, "usage: sekali replay [flags]\n\nscenarios:")
		for _, s := range loadtest.Scenarios {
			fmt.Fprintf(stderr, "  %-16s %s\n", s.Name, s.About)
		}
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" {
		if *secret = defaultSecret(*provider, getenv); *secret == "" {
			return &exitError{code: 2, msg: fmt.Sprintf("replay needs -secret or %s for %s", secretVariable(*provider), *provider)}
		}
	}
	if *token == "" {
		return &exitError{code: 2, msg: "replay needs the server's admin token: -token or ADMIN_API_TOKEN"}
	}
	if *events < 1 || *copies < 1 || *concurrency < 1 || *rate < 1 {
		return &exitError{code: 2, msg: "-events, -copies, -concurrency and -rate must be at least 1"}
	}
	reports, err := loadtest.Run(ctx, loadtest.Config{
		Target: *target, Provider: *provider, Secret: *secret, Token: *token,
		Events: *events, Copies: *copies, Concurrency: *concurrency,
		Duration: *duration, Rate: *rate, DrainTimeout: *drain,
		Progress: stderr, TTY: isTerminal(stderr),
	}, *scenario)
	if err != nil && len(reports) == 0 {
		return err
	}
	loadtest.PrintSummary(stdout, reports)
	if *jsonPath != "" {
		if err := loadtest.WriteJSON(*jsonPath, reports); err != nil {
			return err
		}
	}
	for _, r := range reports {
		if !r.OK {
			return &exitError{code: 1, msg: "replay: " + r.Scenario + " failed"}
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

// firstSecret is the first SANDBOX_WEBHOOK_SECRET, or the development one.
func firstSecret(getenv func(string) string) string {
	if s := strings.TrimSpace(strings.Split(getenv("SANDBOX_WEBHOOK_SECRET"), ",")[0]); s != "" {
		return s
	}
	return config.DevSandboxSecret
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
