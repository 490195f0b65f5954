package main

// Issue 30's pipeline goals: the pipeline keeps up with the callbacks,
// and the guard that makes each job run once costs at most twice a bare
// handler's CPU. The second is measured by jobs' BenchmarkGuardVersusBare,
// run here as `go test` and read from its output: the worker there is the
// test process, so its CPU per job is the worker's alone, with
// PostgreSQL's backends and the redis-server measured beside it.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// guardRun is BenchmarkGuardVersusBare's figures per job, for the bare
// handler and the guarded one.
type guardRun struct {
	Bare    guardArm `json:"bare"`
	Guarded guardArm `json:"guarded"`
	Rounds  int      `json:"rounds"` // of each, alternating, of 300 invoice jobs
}

// guardArm is one handler's cost per job.
type guardArm struct {
	WorkerCPUUS float64 `json:"worker_cpu_us"` // the test process: the worker
	Allocs      float64 `json:"allocs"`
	Bytes       float64 `json:"bytes"`
	PostgresUS  float64 `json:"postgres_cpu_us"` // the database's backends
	RedisUS     float64 `json:"redis_cpu_us"`
	JobsPerS    float64 `json:"jobs_per_s"` // wall time: the weaker figure on shared cores
}

// cpuRatio is the worker's CPU per guarded job ÷ per bare job.
func (g *guardRun) cpuRatio() float64 { return g.Guarded.WorkerCPUUS / g.Bare.WorkerCPUUS }

// guardBenchArgs runs the comparison: three rounds each, so that one
// round's fsync luck does not decide it.
var guardBenchArgs = []string{"test", "-run", "^$", "-bench", "GuardVersusBare", "-benchtime", "3x", "./jobs/"}

// runGuardBench runs BenchmarkGuardVersusBare and reads its figures.
func runGuardBench(ctx context.Context) (*guardRun, error) {
	cmd := exec.CommandContext(ctx, "go", guardBenchArgs...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(guardBenchArgs, " "), err, out)
	}
	g, err := parseGuardBench(out)
	if err != nil {
		return nil, err
	}
	fmt.Printf("  %-24s worker CPU %6.0f → %6.0f µs per job (%.2f×), allocations %4.0f → %4.0f, PostgreSQL %5.0f → %5.0f µs, Redis %4.0f → %4.0f µs, %3.0f → %3.0f jobs/s\n",
		"guarded ÷ bare job", g.Bare.WorkerCPUUS, g.Guarded.WorkerCPUUS, g.cpuRatio(), g.Bare.Allocs, g.Guarded.Allocs,
		g.Bare.PostgresUS, g.Guarded.PostgresUS, g.Bare.RedisUS, g.Guarded.RedisUS, g.Bare.JobsPerS, g.Guarded.JobsPerS)
	return g, nil
}

// parseGuardBench reads the benchmark's line of the output:
// "BenchmarkGuardVersusBare-2  3  2345 ns/op  901.9 bare-cpu-µs/job …",
// each handler's figures prefixed with its name.
func parseGuardBench(out []byte) (*guardRun, error) {
	g := &guardRun{}
	metrics := map[string]*float64{}
	for name, arm := range map[string]*guardArm{"bare-": &g.Bare, "guarded-": &g.Guarded} {
		for unit, into := range map[string]*float64{"cpu-µs/job": &arm.WorkerCPUUS, "allocs/job": &arm.Allocs, "B/job": &arm.Bytes,
			"pg-cpu-µs/job": &arm.PostgresUS, "redis-cpu-µs/job": &arm.RedisUS, "jobs/s": &arm.JobsPerS} {
			metrics[name+unit] = into
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkGuardVersusBare") {
			continue
		}
		g.Rounds, _ = strconv.Atoi(f[1])
		for i := 2; i+1 < len(f); i += 2 { // value, unit
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("guard benchmark: %q in %q", f[i], sc.Text())
			}
			if into, ok := metrics[f[i+1]]; ok {
				*into = v
			}
		}
	}
	if g.Bare.WorkerCPUUS == 0 || g.Guarded.WorkerCPUUS == 0 {
		return nil, fmt.Errorf("guard benchmark: no CPU per job for both handlers in its output:\n%s", out)
	}
	return g, nil
}

// pipelineGoals judges the pipeline's two goals: its sustained rate
// against the new-event callbacks of the same run (or, when the run
// measured none, the pipeline's own burst of callbacks), and the worker's
// CPU per guarded job against a bare handler's. A goal whose measurement
// is missing is not met.
func pipelineGoals(r *results) []goal {
	keepsUp := goal{Name: "pipeline sustained orders/s ÷ new-event callbacks/s", Goal: "≥ 0.50"}
	callbacks := 0.0
	if m := r.Runs["new_event"]; m != nil {
		callbacks = m.Throughput
	} else if r.E2E != nil && r.E2E.Burst != nil {
		keepsUp.Name = "pipeline sustained orders/s ÷ its burst's callbacks/s"
		callbacks = r.E2E.Burst.Throughput
	}
	if r.E2E != nil && callbacks > 0 {
		keepsUp.Value = r.E2E.MaxRate / callbacks
		keepsUp.Ratio, keepsUp.Met = keepsUp.Value, keepsUp.Value >= 0.5
	} else {
		keepsUp.Goal += " (not measured)"
	}
	guard := goal{Name: "worker CPU per guarded job ÷ bare job", Goal: "≤ 2"}
	if r.Guard != nil {
		guard.Value = r.Guard.cpuRatio()
		guard.Ratio, guard.Met = guard.Value/2, guard.Value <= 2
	} else {
		guard.Goal += " (not measured)"
	}
	return []goal{keepsUp, guard}
}
