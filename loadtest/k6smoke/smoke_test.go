package k6smoke

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/testenv"
)

// smokeEnv scales every script down to a few events: the same knobs QA
// turns up (loadtest/README.md), so the thresholds the scripts derive from
// them stay exact. The latency bounds are lifted: they are sanity limits
// for a real run, and the smoke run proves logic, not speed, on a machine
// other tests share.
var smokeEnv = map[string]string{
	"EVENTS": "3", "COPIES": "3", "ROUNDS": "2", "VUS": "3", "STOCK": "2",
	"RATE": "16", "DURATION": "1s", "MAX_VUS": "4", "RETRY_SCHEDULE": "0,0",
	"P95_MS": "60000", "P99_MS": "60000", "AUDIT_DRAIN_TIMEOUT": "60s",
}

// scripts are the k6 scripts of loadtest/k6, every one of them.
func scripts(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("../k6/*.js")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no k6 scripts in ../k6: %v", err)
	}
	return paths
}

// providers are the gateway formats the scripts speak against tg: all
// four against the server the test starts; against K6_SMOKE_TARGET, the
// sandbox and those whose secret is set.
func providers(tg target) []string {
	out := []string{"sandbox"}
	for p, k := range map[string]string{"midtrans": "MIDTRANS_SERVER_KEY", "xendit": "XENDIT_CALLBACK_TOKEN", "stripe": "STRIPE_WEBHOOK_SECRET"} {
		if tg.Env[k] != "" {
			out = append(out, p)
		}
	}
	return out
}

// runScript runs one script and returns what it found, its log in the
// test's.
func runScript(t *testing.T, script string, env map[string]string, summaryDir string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Budget(t))
	defer cancel()
	res, err := Run(ctx, Config{Script: script, Env: env, SummaryDir: summaryDir, Log: testWriter{t, ""}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestScripts runs every script of loadtest/k6 at smoke scale, in every
// gateway format it speaks, against a real server on a fresh database (or
// K6_SMOKE_TARGET): each must pass its own checks and thresholds — its
// teardown asks the integrity audit — and hand handleSummary's verdict
// PASS and a JSON report. The audit is green at the end. The scripts run
// one at a time, on one server (startServer), as the audit judges the
// whole database.
func TestScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every k6 script in every gateway format: make test runs it")
	}
	t.Parallel()
	tg := startServer(t)
	runAll(t, tg, providers(tg))
	auditOK(t, tg)
}

func runAll(t *testing.T, tg target, providers []string) {
	for _, provider := range providers {
		for _, script := range scripts(t) {
			name := strings.TrimSuffix(filepath.Base(script), ".js")
			t.Run(provider+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				start := time.Now()
				res := runScript(t, script, tg.env(provider, smokeEnv), dir)
				if err := res.Err(); err != nil {
					t.Fatalf("%s (PROVIDER=%s) failed:\n%v", name, provider, err)
				}
				if res.Requests == 0 || res.Iterations == 0 || len(res.Checks) == 0 {
					t.Fatalf("%s ran %d iterations, %d requests, %d checks: a run that did nothing proves nothing",
						name, res.Iterations, res.Requests, len(res.Checks))
				}
				if !strings.Contains(res.Summary, "Sekali k6 "+name+": PASS") {
					t.Errorf("handleSummary's verdict is not PASS:\n%s", res.Summary)
				}
				checkReport(t, dir, name)
				t.Logf("%s (PROVIDER=%s): %d iterations, %d requests, %d checks in %s",
					name, provider, res.Iterations, res.Requests, len(res.Checks), time.Since(start).Round(time.Millisecond))
			})
		}
	}
}

// checkReport reads the JSON report handleSummary wrote into dir (in
// RESULTS_DIR, default results/): the scenario's, passed.
func checkReport(t *testing.T, dir, scenario string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "results", scenario+"-*.json"))
	if len(files) != 1 {
		t.Fatalf("handleSummary wrote %v into results/, want one %s-<time>.json", files, scenario)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Sekali struct {
			Scenario string `json:"scenario"`
			Passed   bool   `json:"passed"`
		} `json:"sekali"`
		Metrics map[string]json.RawMessage `json:"metrics"`
	}
	if err := json.Unmarshal(b, &report); err != nil || report.Sekali.Scenario != scenario || !report.Sekali.Passed || report.Metrics["checks"] == nil {
		t.Fatalf("report %s: %v\n%.2000s", files[0], err, b)
	}
}
