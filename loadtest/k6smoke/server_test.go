package k6smoke

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/loadtest/internal/serveproc"
)

// The secrets of the servers the tests start, one per gateway format the
// scripts speak; the same values go to the scripts' __ENV.
const (
	adminToken    = "k6-smoke-admin-token"
	midtransKey   = "SB-Mid-server-K6SMOKE0123456789"
	xenditToken   = "xnd-callback-token-k6-smoke-0123"
	xenditKey     = "xnd_development_k6smoke"
	stripeSecret  = "whsec_k6smoke_0123456789abcdef"
	sandboxSecret = testenv.SandboxSecret
)

// target is a Sekali the scripts run against, and the __ENV they run with.
type target struct {
	URL string
	Env map[string]string // ADMIN_API_TOKEN and each gateway's secret
}

// env is the __ENV of a script run against tg in provider's format.
func (tg target) env(provider string, extra map[string]string) map[string]string {
	env := map[string]string{"BASE_URL": tg.URL, "PROVIDER": provider}
	for k, v := range tg.Env {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// sekaliBinary builds the app's cmd/sekali once per test binary, in the
// app's module (with its go.mod, as make build does): the server the
// scripts run against, and `sekali sign`.
func sekaliBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "k6smoke-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "sekali")
		binErr = serveproc.Build("../..", binPath) // the app's module
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// oneServer holds a place while a server of this package runs.
var oneServer = make(chan struct{}, 1)

// startServer starts `sekali serve` on a fresh database and its own Redis,
// with every gateway's secret, the sandbox gateway on (it stands in for
// Midtrans's status API and Xendit's invoice API) and no cap on one
// client's open orders; or, when
// K6_SMOKE_TARGET is set, returns that server, whose admin token and
// secrets come from this process's environment (ADMIN_API_TOKEN,
// SANDBOX_WEBHOOK_SECRET, MIDTRANS_SERVER_KEY, XENDIT_CALLBACK_TOKEN,
// STRIPE_WEBHOOK_SECRET).
func startServer(t *testing.T) target {
	t.Helper()
	// One server of this package at a time: make test runs this package
	// beside the QA module's other end-to-end tests (the replay, chaos),
	// and the machine's PostgreSQL has 100 connections for all of them
	// (docs/testing.md). The wait
	// counts in the test's time, not in its budget's.
	select {
	case oneServer <- struct{}{}:
	case <-t.Context().Done():
		t.Fatal("waited for another test's server until the test's end")
	}
	t.Cleanup(func() { <-oneServer })
	if u := os.Getenv("K6_SMOKE_TARGET"); u != "" {
		env := map[string]string{}
		for _, k := range []string{"ADMIN_API_TOKEN", "SANDBOX_WEBHOOK_SECRET", "MIDTRANS_SERVER_KEY", "XENDIT_CALLBACK_TOKEN", "STRIPE_WEBHOOK_SECRET"} {
			if v := os.Getenv(k); v != "" {
				env[k] = v
			}
		}
		if env["ADMIN_API_TOKEN"] == "" {
			t.Fatal("K6_SMOKE_TARGET needs ADMIN_API_TOKEN: the server's admin token")
		}
		return target{URL: strings.TrimRight(u, "/"), Env: env}
	}
	bin := sekaliBinary(t)
	// Its own address, known before it starts: Xendit's API URL, never
	// defaulted, names the sandbox gateway's emulation on it, which the
	// scripts tell of each Xendit payment before its callback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the server listens there next
	secrets := map[string]string{
		"ADMIN_API_TOKEN":        adminToken,
		"SANDBOX_WEBHOOK_SECRET": sandboxSecret,
		"MIDTRANS_SERVER_KEY":    midtransKey,
		"XENDIT_CALLBACK_TOKEN":  xenditToken,
		"STRIPE_WEBHOOK_SECRET":  stripeSecret,
	}
	env := []string{
		"HTTP_ADDR=" + addr,
		"XENDIT_SECRET_KEY=" + xenditKey, // the callback token needs it: paid callbacks are confirmed
		"XENDIT_API_URL=http://" + addr + "/sandbox/xendit",
		"DATABASE_URL=" + testenv.NewDatabaseURL(t),
		"REDIS_URL=" + testenv.StartRedis(t).URL(),
		"ORDER_TOKEN_SECRET=" + testenv.OrderTokenSecret,
		"SANDBOX_GATEWAY=on",
		"OPEN_ORDERS_PER_CLIENT=0", // every order comes from 127.0.0.1
		"DB_MAX_CONNS=10",          // the connection budget of end-to-end apps (docs/testing.md)
		"LOG_LEVEL=warn",           // what went wrong, into the test's log
	}
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	return target{URL: serveproc.Start(t, bin, env, testWriter{t, "sekali: "}), Env: secrets}
}

// auditOK asks the server's integrity audit for its verdict.
func auditOK(t *testing.T, tg target) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Budget(t))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tg.URL+"/api/audit?drain_timeout=60s", nil)
	req.Header.Set("Authorization", "Bearer "+tg.Env["ADMIN_API_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /api/audit: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var report struct {
		OK         bool              `json:"ok"`
		Drained    bool              `json:"drained"`
		Violations []json.RawMessage `json:"violations"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &report) != nil || !report.OK || !report.Drained {
		t.Fatalf("GET /api/audit: %d %s", resp.StatusCode, body)
	}
}
