package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// goal is one goal of docs/performance.md, judged on one run.
type goal struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "" for a ratio
	Goal  string  `json:"goal"`
	// Ratio is the value as a ratio: the value itself for a ratio goal,
	// value ÷ limit for a bound (below 1 is met).
	Ratio float64 `json:"ratio"`
	Met   bool    `json:"met"`
}

// judge computes the ratios and the goals.
func judge(r *results) {
	ceiling := r.Ceiling.TPS
	r.Ratios["new_event / pgbench ceiling"] = r.Runs["new_event"].Throughput / ceiling
	r.Ratios["new_event / pgbench pipelined ceiling"] = r.Runs["new_event"].Throughput / r.PipelinedBest.TPS
	r.Ratios["pgbench at 32 clients / ceiling"] = tpsAt(r.Pgbench, 32) / ceiling
	r.Ratios["duplicate / healthz"] = r.Runs["duplicate"].Throughput / r.Runs["healthz"].Throughput
	r.Ratios["duplicate / new_event"] = r.Runs["duplicate"].Throughput / r.Runs["new_event"].Throughput
	r.Ratios["duplicate p99 at 80% / healthz p99 at 80%"] = r.At80["duplicate"].P99 / r.At80["healthz"].P99
	// The most each ratio can be while the server, the load generator and
	// PostgreSQL share the cores, from the CPU per request: a saturated
	// machine serves capacity ÷ (CPU per request) requests a second.
	if h, n, d := r.Runs["healthz"].CPU, r.Runs["new_event"].CPU, r.Runs["duplicate"].CPU; h != nil && n != nil && d != nil {
		r.Ratios["shared-core bound: new_event / pgbench ceiling"] = n.OtherUS / n.total()
		r.Ratios["shared-core bound: duplicate / healthz"] = h.total() / d.total()
	}
	for _, mb := range r.RSSMB {
		r.PeakRSSMB = math.Max(r.PeakRSSMB, mb)
	}
	atMost := func(name string, v, limit float64) goal {
		return goal{Name: name, Value: v, Goal: fmt.Sprintf("≤ %g", limit), Ratio: v / limit, Met: v > 0 && v <= limit}
	}
	below := func(name string, v, limit float64, unit string) goal {
		return goal{Name: name, Value: v, Unit: unit, Goal: fmt.Sprintf("< %g %s", limit, unit), Ratio: v / limit, Met: v < limit}
	}
	// What the server spends per request, against what it spends on
	// /healthz in the same run: the other processes on the cores change
	// this little, where they change a throughput ratio a lot.
	r.Ratios["server CPU: duplicate / healthz"] = serverCPURatio(r.Runs["duplicate"], r.Runs["healthz"])
	r.Ratios["server CPU: new_event / healthz"] = serverCPURatio(r.Runs["new_event"], r.Runs["healthz"])
	r.Goals = []goal{
		atMost("server CPU per duplicate ÷ per /healthz", r.Ratios["server CPU: duplicate / healthz"], 1.3),
		atMost("server CPU per new event ÷ per /healthz", r.Ratios["server CPU: new_event / healthz"], 8),
	}
	r.Goals = append(r.Goals, pipelineGoals(r)...)
	r.Goals = append(r.Goals,
		below("write transactions per duplicate", r.WritesPerDup, 0.05, "tx"),
		below("paid → invoice → email p50 at 80% load", r.E2E.EmailP50, 150, "ms"),
		below("paid → invoice → email p99 at 80% load", r.E2E.EmailP99, 1000, "ms"),
		below("server peak RSS", r.PeakRSSMB, 150, "MB"),
	)
	r.Met = true
	for _, g := range r.Goals {
		r.Met = r.Met && g.Met
	}
	// A run with errors proves nothing.
	for _, m := range append(mapValues(r.Runs), mapValues(r.At80)...) {
		if m.Errors > 0 {
			r.Met = false
		}
	}
}

// serverCPURatio is the server's CPU per request of m ÷ of base; 0 when
// either was not measured.
func serverCPURatio(m, base *measurement) float64 {
	if m == nil || base == nil || m.CPU == nil || base.CPU == nil || base.CPU.ServerUS == 0 {
		return 0
	}
	return m.CPU.ServerUS / base.CPU.ServerUS
}

func tpsAt(runs []pgbenchRun, clients int) float64 {
	for _, p := range runs {
		if p.Clients == clients && !p.Pipelined {
			return p.TPS
		}
	}
	return 0
}

func mapValues(m map[string]*measurement) []*measurement {
	var out []*measurement
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// write prints the tables and saves JSON, Markdown and the SVG histogram
// under dir.
func write(r *results, dir, stamp string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	md := markdown(r, "bench-"+stamp+".svg")
	fmt.Println()
	fmt.Print(md)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(dir, "bench-"+stamp)
	for path, content := range map[string][]byte{
		base + ".json": append(b, '\n'),
		base + ".md":   []byte(md),
		base + ".svg":  []byte(histograms(r)),
	} {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("\nwritten: %s.{json,md,svg}\n", base)
	return nil
}

func markdown(r *results, svg string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Sekali benchmark, %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "%s, %d cores; PostgreSQL, Redis, the server and the load on the same machine; HTTP concurrency %d, %s per run; "+
		"default `DB_MAX_CONNS` %d. Load average (1 min) %.2f at the start, %.2f at the end.\n\n",
		r.Machine, r.Cores, r.Concurrency, r.Duration, r.DefaultMaxConns, r.LoadStart, r.LoadEnd)

	n := 0
	for _, g := range r.Goals {
		if g.Met {
			n++
		}
	}
	verdict := "**Every goal is met.**"
	switch {
	case n < len(r.Goals):
		verdict = fmt.Sprintf("**%d of %d goals met.**", n, len(r.Goals))
	case !r.Met: // judge: a run with errors proves nothing
		verdict = "**Every goal is met, but a run had errors: it proves nothing.**"
	}
	b.WriteString("## Goals\n\n" + verdict + "\n\n| goal | measured | bound | ratio | met |\n|---|---:|---|---:|---|\n")
	for _, g := range r.Goals {
		v := fmt.Sprintf("%.2f", g.Value)
		if g.Unit != "" {
			v = fmt.Sprintf("%.2f %s", g.Value, g.Unit)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %s |\n", g.Name, v, g.Goal, g.Ratio, yes(g.Met))
	}

	b.WriteString("\n## The database ceiling: pgbench, the SQL of one new event\n\n")
	b.WriteString("| clients | tx/s, a round trip per statement | avg ms | tx/s, pipelined (one round trip) | avg ms | load |\n|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range clientCounts(r.Pgbench) {
		var plain, piped pgbenchRun
		for _, p := range r.Pgbench {
			if p.Clients == c && p.Pipelined {
				piped = p
			} else if p.Clients == c {
				plain = p
			}
		}
		fmt.Fprintf(&b, "| %d | %.0f%s | %.2f | %.0f%s | %.2f | %.1f |\n", c, plain.TPS, mark(plain == r.Ceiling),
			plain.LatencyMS, piped.TPS, mark(piped == r.PipelinedBest), piped.LatencyMS, plain.Load)
	}
	fmt.Fprintf(&b, "\nCeiling (best, **bold**): %.0f tx/s at %d clients; pipelined %.0f tx/s at %d clients. "+
		"32 clients reach %.2f of the ceiling.\n", r.Ceiling.TPS, r.Ceiling.Clients, r.PipelinedBest.TPS, r.PipelinedBest.Clients,
		r.Ratios["pgbench at 32 clients / ceiling"])

	b.WriteString("\n## The callback paths (one server, `serve --roles=web`, default pool)\n\n")
	b.WriteString("| run | req/s | p50 ms | p99 ms | max ms | errors | CPU µs per request: server / load generator / PostgreSQL and the rest | idle | load |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(label string, m *measurement) {
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %.2f | %d | %s | %s | %.1f |\n", label, m.Throughput, m.P50, m.P99, m.Max, m.Errors,
			cpuCells(m.CPU), idle(m.CPU), m.Load)
	}
	for _, name := range []string{"healthz", "new_event", "duplicate"} {
		row(name, r.Runs[name])
	}
	row("healthz at 80% of its max", r.At80["healthz"])
	row("new_event at 80% of its max", r.At80["new_event"])
	row("duplicate at 80% of its max", r.At80["duplicate"])
	fmt.Fprintf(&b, "\nThroughput, printed and not judged: new events ÷ best pgbench ceiling %.2f; duplicates ÷ /healthz %.2f; "+
		"new events ÷ pipelined ceiling %.2f; duplicates ÷ new events %.1f; WAL bytes per duplicate %.0f; "+
		"duplicate p99 at 80%% ÷ /healthz p99 at 80%% %.2f.\n",
		r.Ratios["new_event / pgbench ceiling"], r.Ratios["duplicate / healthz"],
		r.Ratios["new_event / pgbench pipelined ceiling"], r.Ratios["duplicate / new_event"], r.WALPerDup,
		r.Ratios["duplicate p99 at 80% / healthz p99 at 80%"])
	if bound, ok := r.Ratios["shared-core bound: duplicate / healthz"]; ok {
		fmt.Fprintf(&b, "\nOn shared cores, from the CPU per request above: new events ÷ ceiling can reach at most %.2f "+
			"(PostgreSQL and the rest's share of a new event's CPU; pgbench leaves PostgreSQL nearly the whole machine), "+
			"duplicates ÷ /healthz at most %.2f (/healthz's CPU per request ÷ the duplicate's).\n",
			r.Ratios["shared-core bound: new_event / pgbench ceiling"], bound)
	}

	b.WriteString("\n## Pool sweep: new events per `DB_MAX_CONNS`\n\n| DB_MAX_CONNS | req/s | ÷ ceiling | p50 ms | p99 ms | errors | CPU µs per request: server / load generator / PostgreSQL and the rest | idle | load |\n" +
		"|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Pools {
		label := fmt.Sprint(p.MaxConns)
		if p.Default {
			label += " (default)"
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %.2f | %d | %s | %s | %.1f |\n", label, p.Run.Throughput, p.Run.Throughput/r.Ceiling.TPS,
			p.Run.P50, p.Run.P99, p.Run.Errors, cpuCells(p.Run.CPU), idle(p.Run.CPU), p.Run.Load)
	}

	e := r.E2E
	b.WriteString("\n## The pipeline: paid callback → invoice → email (`serve --roles=web,worker,relay`, an SMTP server)\n\n")
	fmt.Fprintf(&b, "Sustained: %d orders paid as fast as the callbacks went, the last email sent %.1f s after the first callback: %.0f orders/s. "+
		"At 80%% of that, %d orders/s for %s: %d of %d orders had their email.\n\n",
		e.MaxOrders, e.MaxSeconds, e.MaxRate, e.Rate, r.Duration, e.Completed, e.Orders)
	b.WriteString("| from the callback to | p50 ms | p99 ms |\n|---|---:|---:|\n")
	fmt.Fprintf(&b, "| the callback's answer | %.2f | %.2f |\n", e.Callbacks.P50, e.Callbacks.P99)
	fmt.Fprintf(&b, "| the invoice issued | %.1f | %.1f |\n", e.InvoiceP50, e.InvoiceP99)
	fmt.Fprintf(&b, "| the email sent | %.1f | %.1f |\n", e.EmailP50, e.EmailP99)
	if e.SustainedCPU != nil {
		fmt.Fprintf(&b, "\nCPU per order while sustained, µs: server %.0f, bench (load and SMTP server) %.0f, PostgreSQL's backends %.0f, "+
			"Redis %.0f; the machine %.0f%% idle.\n", e.SustainedCPU.ServerUS, e.SustainedCPU.ClientUS, e.PostgresUS, e.RedisUS,
			100*e.SustainedCPU.Idle)
	}
	if g := r.Guard; g != nil {
		b.WriteString("\n### A guarded job against a bare one (`BenchmarkGuardVersusBare`, the same invoice jobs)\n\n" +
			"| per job | bare | guarded | guarded ÷ bare |\n|---|---:|---:|---:|\n")
		for _, row := range []struct {
			name          string
			bare, guarded float64
		}{
			{"worker CPU µs", g.Bare.WorkerCPUUS, g.Guarded.WorkerCPUUS},
			{"allocations", g.Bare.Allocs, g.Guarded.Allocs},
			{"PostgreSQL CPU µs", g.Bare.PostgresUS, g.Guarded.PostgresUS},
			{"Redis CPU µs", g.Bare.RedisUS, g.Guarded.RedisUS},
			{"jobs/s (wall time)", g.Bare.JobsPerS, g.Guarded.JobsPerS},
		} {
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f |\n", row.name, row.bare, row.guarded, row.guarded/row.bare)
		}
	}

	b.WriteString("\n## Server memory (peak RSS over each server's life)\n\n| server | MB |\n|---|---:|\n")
	names := make([]string, 0, len(r.RSSMB))
	for n := range r.RSSMB {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | %.0f |\n", n, r.RSSMB[n])
	}
	fmt.Fprintf(&b, "\n![latency histograms](%s)\n", svg)
	return b.String()
}

func cpuCells(c *cpuUse) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f", c.ServerUS, c.ClientUS, c.OtherUS)
}

func idle(c *cpuUse) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*c.Idle)
}

func clientCounts(runs []pgbenchRun) []int {
	var out []int
	for _, p := range runs {
		if !slices.Contains(out, p.Clients) {
			out = append(out, p.Clients)
		}
	}
	return out
}

func mark(best bool) string {
	if best {
		return " **best**"
	}
	return ""
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// histograms draws one latency histogram per run, on log-spaced buckets
// from 0.1 ms to 1 s, bar height the share of requests in the bucket.
func histograms(r *results) string {
	runs := []*measurement{r.Runs["healthz"], r.Runs["new_event"], r.Runs["duplicate"], r.At80["new_event"], r.At80["duplicate"]}
	labels := []string{"healthz", "new_event", "duplicate", "new_event at 80%", "duplicate at 80%"}
	if r.E2E != nil && r.E2E.Callbacks != nil {
		runs, labels = append(runs, r.E2E.Callbacks), append(labels, "callbacks of the pipeline at 80%")
	}
	const (
		buckets        = 40
		w, h, top, pad = 640, 120, 24, 40
		lo, hi         = -1.0, 3.0 // log10 of ms
	)
	var b strings.Builder
	height := len(runs)*(h+top+pad) + pad
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w+2*pad, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, m := range runs {
		y0 := pad + i*(h+top+pad)
		counts := make([]int, buckets)
		for _, l := range m.latencies {
			k := int((math.Log10(math.Max(l, 0.1)) - lo) / (hi - lo) * buckets)
			counts[min(max(k, 0), buckets-1)]++
		}
		peak := max(slices.Max(counts), 1)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s: %d requests, p50 %.2f ms, p99 %.2f ms</text>`+"\n",
			pad, y0, labels[i], m.Requests, m.P50, m.P99)
		bw := float64(w) / buckets
		for k, c := range counts {
			bh := float64(h) * float64(c) / float64(peak)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3b6ea5"/>`+"\n",
				float64(pad)+float64(k)*bw, float64(y0+top+h)-bh, bw-1, bh)
		}
		for _, tick := range []float64{0.1, 1, 10, 100, 1000} {
			x := float64(pad) + (math.Log10(tick)-lo)/(hi-lo)*float64(w)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999"/><text x="%.1f" y="%d" text-anchor="middle">%g ms</text>`+"\n",
				x, y0+top+h, x, y0+top+h+4, x, y0+top+h+16, tick)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
