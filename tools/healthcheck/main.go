// Command healthcheck is the container image's health probe: it GETs one
// URL and exits 0 when the answer is 2xx, 1 otherwise (with the reason on
// stderr). The image is distroless, with no shell, curl or wget, and the
// sekali binary has no probe subcommand, so docker-compose.yml's
// healthchecks run this instead, in exec form:
//
//	["CMD", "/usr/local/bin/healthcheck", "http://127.0.0.1:8080/healthz"]
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: healthcheck [-timeout 3s] URL") }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	client := http.Client{Timeout: *timeout}
	resp, err := client.Get(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "healthcheck: %s answered %s\n", fs.Arg(0), resp.Status)
		return 1
	}
	return 0
}
