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

// write prints the ratio table and saves JSON, Markdown and the SVG
// histogram under dir.
func write(r *results, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stamp := time.Now().UTC().Format("20060102-150405")
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
	fmt.Fprintf(&b, "%s, %d cores; one server (`serve --roles=web`), load from the same machine; concurrency %d, %s per run.\n\n",
		r.Machine, r.Cores, r.Concurrency, r.Duration)
	b.WriteString("| run | req/s | p50 ms | p99 ms | errors |\n|---|---:|---:|---:|---:|\n")
	for _, name := range []string{"healthz", "new_event", "duplicate"} {
		m := r.Runs[name]
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %d |\n", name, m.Throughput, m.P50, m.P99, m.Errors)
	}
	fmt.Fprintf(&b, "| pgbench (SQL of one new event) | %.0f tx/s | | | |\n", r.PgbenchTPS)
	for _, name := range []string{"new_event", "duplicate"} {
		m := r.At80[name]
		fmt.Fprintf(&b, "| %s at 80%% of its max | %.0f | %.2f | %.2f | %d |\n", name, m.Throughput, m.P50, m.P99, m.Errors)
	}
	b.WriteString("\n| ratio | value | goal |\n|---|---:|---|\n")
	fmt.Fprintf(&b, "| new-event ÷ pgbench ceiling | %.2f | ≥ 0.70 |\n", r.Ratios["new_event / pgbench"])
	fmt.Fprintf(&b, "| duplicate ÷ /healthz ceiling | %.2f | ≥ 0.60 |\n", r.Ratios["duplicate / healthz"])
	fmt.Fprintf(&b, "| duplicate ÷ new-event | %.1f | |\n", r.Ratios["duplicate / new_event"])
	fmt.Fprintf(&b, "| write transactions per duplicate | %.4f | 0 on the hot path (audit rows are batched) |\n", r.WritesPerDup)
	fmt.Fprintf(&b, "| WAL bytes per duplicate | %.0f | |\n", r.WALPerDup)
	fmt.Fprintf(&b, "| p99 at 80%%: duplicate / new event | %.2f ms / %.2f ms | < 10 ms / < 50 ms |\n", r.At80["duplicate"].P99, r.At80["new_event"].P99)
	fmt.Fprintf(&b, "| server peak RSS at 80%% | %.0f MB | < 150 MB |\n", r.MaxRSSMB)
	fmt.Fprintf(&b, "\n![latency histograms](%s)\n", svg)
	return b.String()
}

// histograms draws one latency histogram per run, on log-spaced buckets
// from 0.1 ms to 1 s, bar height the share of requests in the bucket.
func histograms(r *results) string {
	names := []string{"healthz", "new_event", "duplicate"}
	runs := []*measurement{r.Runs["healthz"], r.Runs["new_event"], r.Runs["duplicate"], r.At80["new_event"], r.At80["duplicate"]}
	labels := append(names, "new_event at 80%", "duplicate at 80%")
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
