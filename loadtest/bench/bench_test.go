package main

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// measured is a run of the callbacks section in which every goal of
// docs/performance.md is met, with round numbers.
func measured() *results {
	m := func(rps, p99 float64, cpu *cpuUse) *measurement {
		return &measurement{Requests: int(rps * 10), Throughput: rps, P50: p99 / 4, P99: p99, CPU: cpu}
	}
	return &results{
		Runs: map[string]*measurement{
			"healthz":   m(40000, 2, &cpuUse{ServerUS: 20, ClientUS: 20, OtherUS: 10}),
			"new_event": m(7000, 20, &cpuUse{ServerUS: 160, ClientUS: 25, OtherUS: 315}),
			"duplicate": m(30000, 4, &cpuUse{ServerUS: 26, ClientUS: 20, OtherUS: 16.5}),
		},
		At80: map[string]*measurement{
			"healthz":   m(32000, 2, nil),
			"new_event": m(5600, 40, nil),
			"duplicate": m(24000, 5, nil),
		},
		Pgbench: []pgbenchRun{
			{Clients: 8, TPS: 10000}, {Clients: 32, TPS: 8000}, {Clients: 8, Pipelined: true, TPS: 14000},
		},
		Ceiling:       pgbenchRun{Clients: 8, TPS: 10000},
		PipelinedBest: pgbenchRun{Clients: 8, Pipelined: true, TPS: 14000},
		E2E:           &e2eResult{EmailP50: 100, EmailP99: 900, Callbacks: m(5600, 40, nil), MaxRate: 3500},
		Guard:         &guardRun{Bare: guardArm{WorkerCPUUS: 500}, Guarded: guardArm{WorkerCPUUS: 1000}},
		WritesPerDup:  0.01,
		RSSMB:         map[string]float64{"web": 80, "web, pool 32": 120, "web+worker+relay": 95},
		Ratios:        map[string]float64{},
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// judge computes each ratio from the runs, and the goals from the ratios
// and bounds: a ratio goal is met at its minimum, a bound strictly below
// its limit.
func TestJudgeRatios(t *testing.T) {
	t.Parallel()
	r := measured()
	judge(r)
	for name, want := range map[string]float64{
		"new_event / pgbench ceiling":                    0.7,
		"new_event / pgbench pipelined ceiling":          0.5,
		"pgbench at 32 clients / ceiling":                0.8,
		"duplicate / healthz":                            0.75,
		"duplicate / new_event":                          30000.0 / 7000,
		"duplicate p99 at 80% / healthz p99 at 80%":      2.5,
		"shared-core bound: new_event / pgbench ceiling": 0.63, // PostgreSQL's 315 of the new event's 500 µs
		"shared-core bound: duplicate / healthz":         0.8,  // /healthz's 50 µs ÷ the duplicate's 62.5
		"server CPU: duplicate / healthz":                1.3,
		"server CPU: new_event / healthz":                8,
	} {
		if got, ok := r.Ratios[name]; !ok || !near(got, want) {
			t.Errorf("%s = %v (%v), want %v", name, got, ok, want)
		}
	}
	if r.PeakRSSMB != 120 {
		t.Errorf("PeakRSSMB %v, want the largest server's, 120", r.PeakRSSMB)
	}
	if !r.Met || len(r.Goals) != 8 {
		t.Fatalf("Met %v with %d goals: %+v", r.Met, len(r.Goals), r.Goals)
	}
	first := r.Goals[0] // the duplicate's CPU ÷ /healthz's, exactly at its 1.3
	if !near(first.Value, 1.3) || !near(first.Ratio, 1) || !first.Met || first.Goal != "≤ 1.3" {
		t.Errorf("the first goal: %+v", first)
	}
	rss := r.Goals[7]
	if rss.Value != 120 || rss.Unit != "MB" || !near(rss.Ratio, 0.8) || rss.Goal != "< 150 MB" {
		t.Errorf("the RSS goal: %+v", rss)
	}
}

// Without the CPU split of a run there is no shared-core bound.
func TestJudgeWithoutCPU(t *testing.T) {
	t.Parallel()
	r := measured()
	r.Runs["duplicate"].CPU = nil
	judge(r)
	for name := range r.Ratios {
		if strings.HasPrefix(name, "shared-core") {
			t.Errorf("%s computed without the duplicate's CPU", name)
		}
	}
}

// One goal missed, or an error in any run, and the run is not met.
func TestJudgeMisses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(r *results)
		missed string // the goals missed, |-separated; "" when every goal is met
	}{
		{"a duplicate a microsecond over 1.3 × /healthz", func(r *results) { r.Runs["duplicate"].CPU.ServerUS = 27 },
			"server CPU per duplicate ÷ per /healthz"},
		{"a new event over 8 × /healthz", func(r *results) { r.Runs["new_event"].CPU.ServerUS = 161 },
			"server CPU per new event ÷ per /healthz"},
		{"no CPU figure for /healthz", func(r *results) { r.Runs["healthz"].CPU = nil },
			"server CPU per duplicate ÷ per /healthz|server CPU per new event ÷ per /healthz"},
		{"the pipeline below half the callbacks", func(r *results) { r.E2E.MaxRate = 3499 },
			"pipeline sustained orders/s ÷ new-event callbacks/s"},
		{"a guarded job over twice a bare one's CPU", func(r *results) { r.Guard.Guarded.WorkerCPUUS = 1001 },
			"worker CPU per guarded job ÷ bare job"},
		{"a write transaction per 20 duplicates", func(r *results) { r.WritesPerDup = 0.05 }, "write transactions per duplicate"},
		{"the pipeline's p99 at a second", func(r *results) { r.E2E.EmailP99 = 1000 }, "paid → invoice → email p99 at 80% load"},
		{"a server over 150 MB", func(r *results) { r.RSSMB["web, pool 32"] = 151 }, "server peak RSS"},
		{"an error in a run", func(r *results) { r.Runs["healthz"].Errors = 1 }, ""},
		{"an error at 80%", func(r *results) { r.At80["new_event"].Errors = 3 }, ""},
	} {
		r := measured()
		tc.change(r)
		judge(r)
		if r.Met {
			t.Errorf("%s: met", tc.name)
		}
		for _, g := range r.Goals {
			if g.Met == slices.Contains(strings.Split(tc.missed, "|"), g.Name) {
				t.Errorf("%s: goal %q met: %v", tc.name, g.Name, g.Met)
			}
		}
	}
}

// The report says what the judge found: every goal met, how many of
// them, or that errors void a run whose goals are met.
func TestMarkdownVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(r *results)
		want   string
	}{
		{"every goal met", func(*results) {}, "**Every goal is met.**"},
		{"one goal missed", func(r *results) { r.WritesPerDup = 1 }, "**7 of 8 goals met.**"},
		{"every goal met, with errors", func(r *results) { r.Runs["duplicate"].Errors = 2 },
			"**Every goal is met, but a run had errors: it proves nothing.**"},
	} {
		r := measured()
		tc.change(r)
		judge(r)
		md := markdown(r, "bench.svg")
		if !strings.Contains(md, "\n"+tc.want+"\n") {
			t.Errorf("%s: the report lacks %q:\n%s", tc.name, tc.want, md)
		}
	}
	md := markdown(func() *results { r := measured(); judge(r); return r }(), "bench.svg")
	for _, want := range []string{
		"| server CPU per new event ÷ per /healthz | 8.00 | ≤ 8 | 1.00 | yes |",
		"Throughput, printed and not judged: new events ÷ best pgbench ceiling 0.70; duplicates ÷ /healthz 0.75;",
		"| server peak RSS | 120.00 MB | < 150 MB | 0.80 | yes |",
		"| 8 | 10000 **best** |", // the ceiling, in bold
		"| 32 | 8000 |",
		"![latency histograms](bench.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// A console page passes under the p95 goal without errors; its ratio is
// its p95 over /healthz's.
func TestJudgeAdmin(t *testing.T) {
	t.Parallel()
	page := func(name string, p95 float64, errors int) *pageResult {
		return &pageResult{Name: name, P95: p95, Errors: errors, Goal: true}
	}
	r := &adminResults{Healthz: &pageResult{P95: 0.5},
		API:  []*pageResult{page("orders", 20, 0), page("callbacks", adminGoalP95, 0)},
		HTML: []*pageResult{page("orders", 149.99, 0), page("jobs", 10, 1)}}
	judgeAdmin(r)
	for _, tc := range []struct {
		p     *pageResult
		ratio float64
		pass  bool
	}{{r.API[0], 40, true}, {r.API[1], 300, false}, {r.HTML[0], 299.98, true}, {r.HTML[1], 20, false}} {
		if !near(tc.p.Ratio, tc.ratio) || tc.p.Pass != tc.pass {
			t.Errorf("%s at p95 %v with %d errors: ratio %v pass %v, want %v %v", tc.p.Name, tc.p.P95, tc.p.Errors, tc.p.Ratio, tc.p.Pass, tc.ratio, tc.pass)
		}
	}
	if r.Passed {
		t.Error("passed with two pages failing")
	}
	r = &adminResults{Healthz: &pageResult{P95: 0}, API: []*pageResult{page("orders", 1, 0)}}
	judgeAdmin(r)
	if !r.Passed || r.API[0].Ratio != 1000 {
		t.Errorf("a /healthz p95 of 0: passed %v, ratio %v (want the 0.001 ms floor: 1000)", r.Passed, r.API[0].Ratio)
	}
}

// quantile is the nearest rank: the smallest value with at least q of
// the values at or below it.
func TestQuantile(t *testing.T) {
	t.Parallel()
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	twenty := make([]float64, 20)
	for i := range twenty {
		twenty[i] = float64(i + 1)
	}
	for _, tc := range []struct {
		values []float64
		q      float64
		want   float64
	}{
		{ten, 0.5, 5}, {ten, 0.51, 6}, {ten, 0.95, 10}, {ten, 0.99, 10}, {ten, 1, 10}, {ten, 0, 1}, {ten, 0.1, 1},
		{twenty, 0.95, 19}, {twenty, 0.99, 20}, {twenty, 0.5, 10},
		{[]float64{7}, 0.5, 7}, {[]float64{7}, 0.99, 7},
		{nil, 0.5, 0},
	} {
		if got := quantile(tc.values, tc.q); got != tc.want {
			t.Errorf("quantile(%d values, %v) = %v, want %v", len(tc.values), tc.q, got, tc.want)
		}
	}
}

// use splits the CPU ticks between two samples per request, in µs
// (a tick is 10 ms): the server's, this program's, and the rest of the
// machine's busy time.
func TestUse(t *testing.T) {
	t.Parallel()
	a := cpuSample{busy: 100, total: 400, server: 10, self: 20}
	b := cpuSample{busy: 300, total: 800, server: 110, self: 70}
	u := use(a, b, 1000)
	if u == nil || *u != (cpuUse{ServerUS: 1000, ClientUS: 500, OtherUS: 500, Idle: 0.5}) || u.total() != 2000 {
		t.Fatalf("use = %+v", u)
	}
	if got := u.String(); got != "  cpu/req µs: server 1000 client 500 other 500, idle 50%" {
		t.Errorf("String() = %q", got)
	}
	if cpuCells(u) != "1000 / 500 / 500" || idle(u) != "50%" {
		t.Errorf("cells %q, idle %q", cpuCells(u), idle(u))
	}
	// The two processes' ticks, read apart from the machine's, can add up
	// to more than its busy time: the rest is then none, not negative.
	b.busy = 200
	if u := use(a, b, 1000); u.OtherUS != 0 {
		t.Errorf("OtherUS %v, want 0", u.OtherUS)
	}
	if use(a, b, 0) != nil || use(a, a, 10) != nil {
		t.Error("a split of no requests, or of no time")
	}
	var none *cpuUse
	if none.String() != "" || cpuCells(none) != "" || idle(none) != "" {
		t.Error("a run without a CPU split prints something")
	}
}

// -clients and -pools are lists of positive numbers.
func TestInts(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]int{
		"4,8,16,32": {4, 8, 16, 32}, " 4 , 8 ": {4, 8}, "1": {1},
		"": nil, "0": nil, "-4": nil, "4,,8": nil, "4;8": nil, "four": nil, "4,": nil,
	} {
		got, err := ints(in)
		if (err == nil) != (want != nil) || !slices.Equal(got, want) {
			t.Errorf("ints(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// The best pgbench run, plain or pipelined; the plain run at a client
// count; each client count once, in the order measured.
func TestPgbenchRuns(t *testing.T) {
	t.Parallel()
	runs := []pgbenchRun{
		{Clients: 4, TPS: 100}, {Clients: 4, Pipelined: true, TPS: 600},
		{Clients: 8, TPS: 300}, {Clients: 8, Pipelined: true, TPS: 500},
		{Clients: 32, TPS: 250},
	}
	if b := best(runs, false); b != runs[2] {
		t.Errorf("best plain: %+v", b)
	}
	if b := best(runs, true); b != runs[1] {
		t.Errorf("best pipelined: %+v", b)
	}
	if b := best(nil, false); b != (pgbenchRun{}) {
		t.Errorf("best of none: %+v", b)
	}
	for clients, want := range map[int]float64{4: 100, 8: 300, 32: 250, 16: 0} {
		if got := tpsAt(runs, clients); got != want {
			t.Errorf("tpsAt(%d) = %v, want %v", clients, got, want)
		}
	}
	if got := clientCounts(runs); !slices.Equal(got, []int{4, 8, 32}) {
		t.Errorf("clientCounts = %v", got)
	}
}

// The admin database is seeded again when a migration it was seeded with
// has changed or gone; one added since is not a change of the seed's.
func TestChangedMigration(t *testing.T) {
	t.Parallel()
	seeded := map[string]string{"0001_init.sql": "a1", "0002_jobs.sql": "b2", "0003_outbox.sql": "c3"}
	for _, tc := range []struct {
		now  map[string]string
		want string
	}{
		{map[string]string{"0001_init.sql": "a1", "0002_jobs.sql": "b2", "0003_outbox.sql": "c3"}, ""},
		{map[string]string{"0001_init.sql": "a1", "0002_jobs.sql": "b2", "0003_outbox.sql": "c3", "0004_new.sql": "d4"}, ""},
		{map[string]string{"0001_init.sql": "a1", "0002_jobs.sql": "XX", "0003_outbox.sql": "c3"}, "0002_jobs.sql"},
		{map[string]string{"0001_init.sql": "a1", "0002_jobs.sql": "b2"}, "0003_outbox.sql"},
		{map[string]string{"0001_init.sql": "XX", "0002_jobs.sql": "XX", "0003_outbox.sql": "c3"}, "0001_init.sql"}, // the first, sorted
	} {
		if got := changedMigration(seeded, tc.now); got != tc.want {
			t.Errorf("changedMigration(%v) = %q, want %q", tc.now, got, tc.want)
		}
	}
	if hashes, err := migrationHashes(); err != nil || len(hashes) == 0 || changedMigration(hashes, hashes) != "" {
		t.Errorf("migrationHashes: %d, %v", len(hashes), err)
	}
}

// The little helpers of the server set-up and the admin table.
func TestHelpers(t *testing.T) {
	t.Parallel()
	env := []string{"A=1", "AB=2", "B=3", "A=4"}
	if got := withoutVar(env, "A"); !slices.Equal(got, []string{"AB=2", "B=3"}) || !slices.Equal(env, []string{"A=1", "AB=2", "B=3", "A=4"}) {
		t.Errorf("withoutVar = %v, env now %v", got, env)
	}
	if got := withDB("postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "sekali_bench_1"); got != "postgres://postgres@127.0.0.1:5432/sekali_bench_1?sslmode=disable" {
		t.Errorf("withDB = %s", got)
	}
	for path, want := range map[string]string{"/api/admin/orders": "json", "/admin/orders?status=pending": "html", "/healthz": ""} {
		if got := kind(path); got != want {
			t.Errorf("kind(%s) = %q, want %q", path, got, want)
		}
	}
	for i, name := range pageNames {
		if pageOrder(name) != i {
			t.Errorf("pageOrder(%q) = %d, want %d", name, pageOrder(name), i)
		}
	}
	if got := pageOrder("a page of no list"); got != len(pageNames) {
		t.Errorf("an unknown page's order %d, want last (%d)", got, len(pageNames))
	}
	if mark(true) != " **best**" || mark(false) != "" || yes(true) != "yes" || yes(false) != "**no**" {
		t.Errorf("marks: %q %q %q %q", mark(true), mark(false), yes(true), yes(false))
	}
}
