// Package k6smoke runs Sekali's k6 scripts (loadtest/k6) without k6, for
// tests: it proves a script's logic, signing and checks against a real
// server, not load. k6 cannot be installed here (its module is AGPL, and
// no binary can be downloaded), so the runner bundles a script with
// esbuild, runs it in goja (the engine k6's own runtime is forked from)
// and implements, on net/http, the part of k6's API the scripts use.
//
// A run is k6's at smoke scale: the script's options are read (scenarios,
// thresholds, batch sizes), setup() runs once, each scenario's function
// runs a few iterations on a few VUs — goroutines, each with its own goja
// runtime and connection pool — then teardown() and handleSummary(). It
// fails on any failed check, exception, crossed threshold or
// exec.test.fail/abort, and a script that reaches for a part of k6 the
// runner does not implement fails with that part's name (k6/http.file,
// options.stages, the ramping-vus executor), so the runner grows with the
// scripts. Time-based executors are cut to a number of iterations and run
// unpaced; sleep() is scaled (Config.SleepScale). QA runs real k6 for load.
package k6smoke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// Config is one run of one script.
type Config struct {
	// Script is the path of the k6 script.
	Script string
	// Env is the script's __ENV (k6 run -e NAME=value), and nothing else:
	// the process's own environment does not leak in.
	Env map[string]string
	// MaxVUs caps the VUs of a shared-iterations or constant-arrival-rate
	// scenario (default 4). A per-vu-iterations scenario runs the VUs it
	// names: its counts depend on them, so scale it through Env.
	MaxVUs int
	// MaxIterations is what a time-based scenario (constant-arrival-rate,
	// constant-vus) is cut to, at most (default 24).
	MaxIterations int
	// SleepScale multiplies sleep()'s seconds (default 0: no sleep).
	SleepScale float64
	// SummaryDir receives the files handleSummary returns; empty, they
	// are checked (a .json file must parse) and dropped.
	SummaryDir string
	// Log receives console output, handleSummary's stdout and the run's
	// own report (default io.Discard).
	Log io.Writer
	// Now is the clock of the script's Date (default time.Now); the
	// signing tests fix it.
	Now func() time.Time
}

// Result is what a run found.
type Result struct {
	// Failures say why the run failed, in the order found; none: it
	// passed.
	Failures []string
	// Checks counts each check's passes and fails, by name.
	Checks map[string][2]int
	// Thresholds is each threshold's outcome, "metric: expr" → ok.
	Thresholds map[string]bool
	// Requests is how many HTTP requests the script made.
	Requests int
	// Iterations is how many iterations of the scenarios completed.
	Iterations int
	// Summary is handleSummary's stdout, if the script has one.
	Summary string
}

// Passed reports whether the run found nothing wrong.
func (r *Result) Passed() bool { return len(r.Failures) == 0 }

// Err is the run's failures as one error, nil when it passed.
func (r *Result) Err() error {
	if r.Passed() {
		return nil
	}
	return errors.New(strings.Join(r.Failures, "\n"))
}

// Run runs the script of cfg. The error is for a script that could not be
// bundled; everything that goes wrong while it runs is a failure in the
// Result. Cancelling ctx interrupts the script.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.MaxVUs <= 0 {
		cfg.MaxVUs = 4
	}
	if cfg.MaxIterations <= 0 {
		cfg.MaxIterations = 24
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	prog, err := bundle(cfg.Script)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &run{cfg: cfg, prog: prog, ctx: ctx, cancel: cancel, metrics: newRegistry(),
		checks: map[string]*checkCount{}, started: time.Now()}
	r.scenarios, r.abort = context.WithCancel(ctx)
	defer r.abort()
	r.execute()
	return r.result(), nil
}

// run is the state one test run shares across its VUs.
type run struct {
	cfg    Config
	prog   *goja.Program
	ctx    context.Context
	cancel context.CancelFunc
	// scenarios is cancelled by exec.test.abort: it stops the scenarios'
	// VUs, and leaves the runtime of setup, teardown and handleSummary
	// able to run handleSummary.
	scenarios context.Context
	abort     context.CancelFunc
	started   time.Time
	opts      options
	metrics   *registry

	mu         sync.Mutex
	failures   []string
	checks     map[string]*checkCount
	checkOrder []string
	requests   int
	iterations int
	summary    string
	thresholds map[string]bool
	nextVU     int // VUs are numbered across scenarios, from 1 as in k6
}

type checkCount struct{ passes, fails int }

// fail records why the run failed.
func (r *run) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// logf writes one line of the run's own report.
func (r *run) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.cfg.Log, format+"\n", args...)
}

// errorText is an exception as k6 prints it: the message and where.
func errorText(err error) string {
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return strings.TrimSpace(ex.String())
	}
	return err.Error()
}

// execute is k6's life cycle: init, setup, the scenarios, teardown, the
// thresholds, handleSummary.
func (r *run) execute() {
	name := filepath.Base(r.cfg.Script)
	main, err := r.newVU(0)
	if err != nil {
		r.fail("%s: init: %s", name, errorText(err))
		return
	}
	r.opts, err = parseOptions(main)
	if err != nil {
		r.fail("%s: options: %v", name, err)
		return
	}
	if err := r.metrics.checkThresholds(r.opts.thresholds); err != nil {
		r.fail("%s: thresholds: %v", name, err)
		return
	}

	var data goja.Value = goja.Undefined()
	var dataJSON string
	if fn, ok := main.function("setup"); ok {
		main.stage = stageSetup
		v, err := main.call(fn, "setup")
		if err != nil {
			r.fail("%s: setup: %s", name, errorText(err))
			return // k6 stops when setup throws
		}
		data = v
		if dataJSON, err = main.stringify(v); err != nil {
			r.fail("%s: setup's data: %v", name, err)
			return
		}
	}

	var wg sync.WaitGroup
	for _, sc := range r.opts.scenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.runScenario(sc, dataJSON)
		}()
	}
	wg.Wait()

	if fn, ok := main.function("teardown"); ok && r.scenarios.Err() == nil {
		main.stage = stageTeardown
		if _, err := main.call(fn, "teardown", data); err != nil {
			r.fail("%s: teardown: %s", name, errorText(err))
		}
	}

	duration := time.Since(r.started)
	r.thresholds = r.metrics.evaluate(r.opts.thresholds, duration)
	r.report(name)

	if fn, ok := main.function("handleSummary"); ok && r.ctx.Err() == nil {
		main.stage = stageSummary
		summary, err := main.parse(r.metrics.summaryData(r.opts, r.thresholds, r.checkList(), duration))
		if err != nil {
			r.fail("%s: summary data: %v", name, err)
			return
		}
		out, err := main.call(fn, "handleSummary", summary)
		if err != nil {
			r.fail("%s: handleSummary: %s", name, errorText(err))
			return
		}
		r.writeSummary(name, main, out)
	}
}

// report writes the thresholds and failed checks to the log, and fails the
// run on either.
func (r *run) report(name string) {
	keys := make([]string, 0, len(r.thresholds))
	for k := range r.thresholds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if r.thresholds[k] {
			r.logf("  ok   threshold %s", k)
		} else {
			r.logf("  FAIL threshold %s", k)
			r.fail("%s: threshold crossed: %s (%s)", name, k, r.metrics.describe(k, time.Since(r.started)))
		}
	}
	for _, c := range r.checkList() {
		if c.fails > 0 {
			r.fail("%s: check failed %d of %d times: %s", name, c.fails, c.passes+c.fails, c.name)
		}
	}
}

type namedCheck struct {
	name          string
	passes, fails int
}

func (r *run) checkList() []namedCheck {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]namedCheck, 0, len(r.checkOrder))
	for _, n := range r.checkOrder {
		c := r.checks[n]
		out = append(out, namedCheck{n, c.passes, c.fails})
	}
	return out
}

// writeSummary takes handleSummary's answer: stdout and stderr to the log,
// every other key a file, written under SummaryDir (never into the
// checkout) or dropped; a .json file must parse.
func (r *run) writeSummary(name string, v *vu, out goja.Value) {
	if goja.IsUndefined(out) || goja.IsNull(out) {
		return
	}
	obj := out.ToObject(v.rt)
	for _, key := range obj.Keys() {
		val := obj.Get(key)
		var content []byte
		if ab, ok := val.Export().(goja.ArrayBuffer); ok {
			content = ab.Bytes()
		} else if s, ok := val.Export().(string); ok {
			content = []byte(s)
		} else {
			r.fail("%s: handleSummary: %q is a %T, want a string or an ArrayBuffer", name, key, val.Export())
			continue
		}
		switch key {
		case "stdout", "stderr":
			r.mu.Lock()
			r.summary += string(content)
			fmt.Fprintf(r.cfg.Log, "%s\n", content)
			r.mu.Unlock()
			continue
		}
		if strings.HasSuffix(key, ".json") && !jsonValid(content) {
			r.fail("%s: handleSummary: %s is not valid JSON", name, key)
		}
		if r.cfg.SummaryDir == "" {
			continue
		}
		path := filepath.Join(r.cfg.SummaryDir, filepath.Clean("/"+key))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			r.fail("%s: handleSummary: %v", name, err)
			continue
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			r.fail("%s: handleSummary: %v", name, err)
		}
	}
}

func (r *run) result() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &Result{Failures: slices.Clone(r.failures), Checks: map[string][2]int{}, Thresholds: r.thresholds,
		Requests: r.requests, Iterations: r.iterations, Summary: r.summary}
	for n, c := range r.checks {
		res.Checks[n] = [2]int{c.passes, c.fails}
	}
	return res
}
