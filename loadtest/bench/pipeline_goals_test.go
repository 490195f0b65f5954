package main

import (
	"math"
	"testing"
)

// The lines BenchmarkGuardVersusBare prints, as `go test -bench` prints them.
const guardOutput = `goos: linux
pkg: github.com/sekali/sekali/jobs
BenchmarkGuardVersusBare-2   	       3	   3037204 ns/op	       225.7 bare-jobs/s	       901.9 bare-cpu-µs/job	       497.6 bare-allocs/job	     36192 bare-B/job	       566.7 bare-pg-cpu-µs/job	       149.5 bare-redis-cpu-µs/job	       278.9 guarded-jobs/s	      1657 guarded-cpu-µs/job	      1055 guarded-allocs/job	     83392 guarded-B/job	      1467 guarded-pg-cpu-µs/job	       216.1 guarded-redis-cpu-µs/job	         1.837 cpu-guarded/bare	         2.120 allocs-guarded/bare
PASS
`

func TestParseGuardBench(t *testing.T) {
	g, err := parseGuardBench([]byte(guardOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := guardRun{Rounds: 3,
		Bare:    guardArm{WorkerCPUUS: 901.9, Allocs: 497.6, Bytes: 36192, PostgresUS: 566.7, RedisUS: 149.5, JobsPerS: 225.7},
		Guarded: guardArm{WorkerCPUUS: 1657, Allocs: 1055, Bytes: 83392, PostgresUS: 1467, RedisUS: 216.1, JobsPerS: 278.9}}
	if *g != want {
		t.Fatalf("parsed %+v, want %+v", *g, want)
	}
	if _, err := parseGuardBench([]byte("PASS\n")); err == nil {
		t.Fatal("an output without the benchmark's lines parsed")
	}
}

func TestPipelineGoals(t *testing.T) {
	r := &results{Runs: map[string]*measurement{"new_event": {Throughput: 900}},
		E2E:   &e2eResult{MaxRate: 180, Burst: &measurement{Throughput: 600}},
		Guard: &guardRun{Bare: guardArm{WorkerCPUUS: 900}, Guarded: guardArm{WorkerCPUUS: 1620}}}
	goals := pipelineGoals(r)
	if len(goals) != 2 {
		t.Fatalf("%d goals, want 2", len(goals))
	}
	keepsUp, guard := goals[0], goals[1]
	if math.Abs(keepsUp.Value-0.2) > 1e-9 || keepsUp.Met {
		t.Errorf("keeps up: %+v, want 0.20 against the new-event run, not met", keepsUp)
	}
	if math.Abs(guard.Value-1.8) > 1e-9 || math.Abs(guard.Ratio-0.9) > 1e-9 || !guard.Met {
		t.Errorf("guard: %+v, want 1.80 (ratio 0.90), met", guard)
	}

	// Without a new-event run: against the pipeline's burst; without the
	// guard's figures: not met.
	r.Runs, r.Guard = map[string]*measurement{}, nil
	goals = pipelineGoals(r)
	if math.Abs(goals[0].Value-0.3) > 1e-9 || goals[0].Met {
		t.Errorf("keeps up against the burst: %+v, want 0.30, not met", goals[0])
	}
	if goals[1].Met || goals[1].Value != 0 {
		t.Errorf("unmeasured guard: %+v, want not met", goals[1])
	}
}
