package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/loadtest"
)

// TestReplayScenarios runs every QA scenario through the replayer's
// command line (loadtest/cmd/sekali-replay), small, against the real server: each must get only expected answers
// and end with a green audit.
func TestReplayScenarios(t *testing.T) {
	t.Parallel()
	const token = "replay-token"
	a := startApp(t, map[string]string{"ADMIN_API_TOKEN": token, "DB_MAX_CONNS": "15"})
	jsonPath := filepath.Join(t.TempDir(), "replay.json")
	var out bytes.Buffer
	err := loadtest.Command(context.Background(), []string{"-target", a.URL, "-scenario", "all",
		"-events", "15", "-copies", "6", "-concurrency", "30", "-duration", "2s", "-rate", "100",
		"-secret", testenv.SandboxSecret, "-token", token, "-json", jsonPath}, a.getenv, &out, logOutput(t))
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var reports []loadtest.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		t.Fatal(err)
	}
	if len(reports) != len(loadtest.Scenarios) {
		t.Fatalf("%d reports, want one per scenario (%d)", len(reports), len(loadtest.Scenarios))
	}
	for _, r := range reports {
		if !r.OK || r.Unexpected != 0 || r.Audit == nil || !r.Audit.OK || !r.Audit.Drained || r.Requests == 0 {
			t.Errorf("%s: %+v", r.Scenario, r)
		}
	}
	if !strings.Contains(out.String(), "duplicate-storm") || !strings.Contains(out.String(), "PASS") {
		t.Fatalf("summary:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}

// TestReplayFailsOnAWrongSecret: a replay whose deliveries the server
// refuses must not pass.
func TestReplayFailsOnAWrongSecret(t *testing.T) {
	t.Parallel()
	const token = "replay-token"
	a := startApp(t, map[string]string{"ADMIN_API_TOKEN": token})
	var out bytes.Buffer
	err := loadtest.Command(context.Background(), []string{"-target", a.URL, "-scenario", "duplicate-storm",
		"-events", "3", "-copies", "2", "-concurrency", "4", "-token", token,
		"-secret", "whsec_d3Jvbmcgc2VjcmV0IG9mIHRoZSB0ZXN0"}, a.getenv, &out, logOutput(t))
	if !errors.Is(err, loadtest.ErrFailed) || !strings.Contains(out.String(), "FAIL") {
		t.Fatalf("replay with the wrong secret: %v, want a failed replay\n%s", err, out.String())
	}
}

// TestReplayEachGatewayFormat: every scenario, in each paid gateway's
// own format, against a server configured with their secrets — only
// expected answers, and a green audit. The sandbox gateway is on: it
// stands in for the gateways' APIs, which some gateways' notifications
// are confirmed with, and the replayer tells it of each payment first.
func TestReplayEachGatewayFormat(t *testing.T) {
	t.Parallel()
	const token = "replay-token"
	addr := freeAddr(t)
	env := gateways.EmulatedEnv("http://" + addr)
	maps.Copy(env, map[string]string{"ADMIN_API_TOKEN": token, "DB_MAX_CONNS": "15", "SANDBOX_GATEWAY": "on", "HTTP_ADDR": addr})
	a := startApp(t, env)
	for _, provider := range gateways.Paid() {
		var out bytes.Buffer
		err := loadtest.Command(context.Background(), []string{"-target", a.URL, "-scenario", "all", "-provider", provider,
			"-events", "6", "-copies", "4", "-concurrency", "16", "-duration", "1s", "-rate", "50", "-token", token},
			func(k string) string { return env[k] }, &out, logOutput(t))
		if err != nil || !strings.Contains(out.String(), "PASS") {
			t.Errorf("replay -provider %s: %v\n%s", provider, err, out.String())
		}
	}
}
