package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Report is the outcome of one scenario.
type Report struct {
	Scenario   string         `json:"scenario"`
	OK         bool           `json:"ok"`
	Requests   uint64         `json:"requests"`
	Statuses   map[string]int `json:"statuses"`
	Results    map[string]int `json:"results"`
	Unexpected int            `json:"unexpected"`
	Problems   []string       `json:"problems"`
	LatencyP50 Millis         `json:"latency_p50_ms"`
	LatencyP95 Millis         `json:"latency_p95_ms"`
	LatencyP99 Millis         `json:"latency_p99_ms"`
	LatencyMax Millis         `json:"latency_max_ms"`
	Throughput float64        `json:"throughput_rps"`
	Duration   Millis         `json:"duration_ms"`
	Audit      *AuditReport   `json:"audit"`
	// DeliveryRowsDropped is how many callback delivery rows the server
	// dropped while the scenario ran (DroppedRowsSeries); null when its
	// /metrics could not be read.
	DeliveryRowsDropped *float64 `json:"delivery_rows_dropped"`
	Warnings            []string `json:"warnings"`
}

// Millis is a duration in milliseconds, as the JSON report writes it.
type Millis float64

func ms(d time.Duration) Millis { return Millis(float64(d) / float64(time.Millisecond)) }

func (m Millis) String() string { return fmt.Sprintf("%.1fms", float64(m)) }

// stats gathers the answers of a scenario.
type stats struct {
	mu         sync.Mutex
	metrics    vegeta.Metrics
	results    map[string]int
	unexpected int
	problems   []string
	done       atomic.Int64
}

func newStats() *stats { return &stats{results: map[string]int{}} }

func (s *stats) add(phase string, res *vegeta.Result, a answer, expected bool) {
	s.done.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metrics.Add(res)
	s.results[a.result]++
	if !expected {
		s.unexpected++
		s.problem("%s: unexpected %d %s for %s", phase, a.status, a.result, a.tag)
	}
}

// problem records a failed expectation (the first 20 are kept).
func (s *stats) problem(format string, args ...any) {
	if len(s.problems) < 20 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

func (s *stats) report(name string) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metrics.Close()
	m := s.metrics
	return Report{
		Scenario: name, Requests: m.Requests, Statuses: m.StatusCodes, Results: s.results,
		Unexpected: s.unexpected, Problems: append([]string{}, s.problems...),
		LatencyP50: ms(m.Latencies.P50), LatencyP95: ms(m.Latencies.P95),
		LatencyP99: ms(m.Latencies.P99), LatencyMax: ms(m.Latencies.Max),
		Throughput: m.Throughput, Duration: ms(m.Duration + m.Wait),
	}
}

// PrintSummary writes the reports as a table, then each scenario's problems.
func PrintSummary(w io.Writer, reports []Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tverdict\trequests\tstatuses\tresults\tp50\tp95\tp99\treq/s\taudit\trows dropped")
	for _, r := range reports {
		verdict, audit := "PASS", "-"
		if !r.OK {
			verdict = "FAIL"
		}
		if r.Audit != nil {
			audit = "green"
			if !r.Audit.OK {
				audit = fmt.Sprintf("RED (%d)", len(r.Audit.Violations))
			}
		}
		dropped := "?"
		if r.DeliveryRowsDropped != nil {
			dropped = fmt.Sprintf("%.0f", *r.DeliveryRowsDropped)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\n", r.Scenario, verdict, r.Requests,
			pairs(r.Statuses), pairs(r.Results), r.LatencyP50, r.LatencyP95, r.LatencyP99, r.Throughput, audit, dropped)
	}
	tw.Flush()
	for _, r := range reports {
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s: %s\n", r.Scenario, p)
		}
		for _, p := range r.Warnings {
			fmt.Fprintf(w, "  %s: WARN %s\n", r.Scenario, p)
		}
		if r.Audit != nil {
			for _, v := range r.Audit.Violations {
				fmt.Fprintf(w, "  %s: audit %s: %s\n", r.Scenario, v.Check, v.Detail)
			}
		}
	}
}

func pairs[V int](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// WriteJSON writes the reports to path.
func WriteJSON(path string, reports []Report) error {
	b, err := json.MarshalIndent(reports, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// progress shows how many requests are done: a bar redrawn in place on a
// terminal, a plain line every second otherwise.
func progress(w io.Writer, tty bool, name string, s *stats, total int) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	every := time.Second
	if tty {
		every = 100 * time.Millisecond
	}
	draw := func(final bool) {
		n := int(s.done.Load())
		switch {
		case tty && total > 0:
			width := 30
			filled := min(width, n*width/max(total, 1))
			fmt.Fprintf(w, "\r%-16s [%s%s] %d/%d", name, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), n, total)
		case tty:
			fmt.Fprintf(w, "\r%-16s %d requests", name, n)
		case !final:
			fmt.Fprintf(w, "%s: %d requests done\n", name, n)
		}
		if final && tty {
			fmt.Fprintln(w)
		}
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				draw(true)
				return
			case <-t.C:
				draw(false)
			}
		}
	}()
	return func() { close(done); <-finished }
}
