package k6smoke

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Metric types, as k6 names them in its summary.
const (
	counter = "counter"
	gauge   = "gauge"
	rate    = "rate"
	trend   = "trend"
)

type sample struct {
	value float64
	tags  map[string]string
}

type metric struct {
	name, typ string
	isTime    bool
	samples   []sample
}

// registry holds every metric of a run: k6's built-in ones and those the
// script declares, with all their samples (a smoke run has few).
type registry struct {
	mu      sync.Mutex
	metrics map[string]*metric
}

// builtins are k6's own metrics that a threshold may name; the runner
// samples those it can measure (checks, the http_req_* of each request,
// iterations) and leaves the others empty.
var builtins = map[string][2]string{
	"checks": {rate, ""}, "http_reqs": {counter, ""}, "http_req_duration": {trend, "time"},
	"http_req_failed": {rate, ""}, "http_req_waiting": {trend, "time"}, "http_req_blocked": {trend, "time"},
	"http_req_connecting": {trend, "time"}, "http_req_tls_handshaking": {trend, "time"},
	"http_req_sending": {trend, "time"}, "http_req_receiving": {trend, "time"},
	"iterations": {counter, ""}, "iteration_duration": {trend, "time"}, "dropped_iterations": {counter, ""},
	"vus": {gauge, ""}, "vus_max": {gauge, ""}, "data_sent": {counter, "data"}, "data_received": {counter, "data"},
	"group_duration": {trend, "time"},
}

func newRegistry() *registry {
	g := &registry{metrics: map[string]*metric{}}
	for name, t := range builtins {
		g.metrics[name] = &metric{name: name, typ: t[0], isTime: t[1] == "time"}
	}
	return g
}

var metricName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,127}$`)

// declare registers a script's metric; declaring it again with the same
// type is k6's way of getting it back.
func (g *registry) declare(name, typ string, isTime bool) error {
	if !metricName.MatchString(name) {
		return fmt.Errorf("invalid metric name %q", name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.metrics[name]; ok {
		if m.typ != typ {
			return fmt.Errorf("metric %q is already a %s, not a %s", name, m.typ, typ)
		}
		return nil
	}
	g.metrics[name] = &metric{name: name, typ: typ, isTime: isTime}
	return nil
}

func (g *registry) add(name string, value float64, tags map[string]string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.metrics[name]
	m.samples = append(m.samples, sample{value, tags})
}

// threshold is one expression on one metric or submetric
// ("http_req_duration{endpoint:callback}": the samples with that tag).
type threshold struct {
	metric string            // as written, with its tag filter
	base   string            // the metric's name
	filter map[string]string // the tag filter
	expr   string            // as written, e.g. "p(95)<500"
	agg    string            // count, rate, value, avg, min, max, med, p(N)
	op     string
	value  float64
}

func (t threshold) key() string { return t.metric + ": " + t.expr }

var (
	submetric  = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)(?:\{(.*)\})?$`)
	expression = regexp.MustCompile(`^\s*(count|rate|value|avg|min|max|med|p\(\d+(?:\.\d+)?\))\s*(<=|>=|===|==|!=|<|>)\s*(-?\d+(?:\.\d+)?)\s*$`)
)

func parseThresholds(b json.RawMessage) ([]threshold, error) {
	var all map[string][]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("options.thresholds: %w", err)
	}
	var out []threshold
	for name, exprs := range all {
		m := submetric.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("threshold on %q: not a metric name with an optional {tag:value} filter", name)
		}
		filter := map[string]string{}
		if m[2] != "" {
			for _, kv := range strings.Split(m[2], ",") {
				k, v, ok := strings.Cut(kv, ":")
				if !ok {
					return nil, fmt.Errorf("threshold on %q: tag filter %q is not tag:value", name, kv)
				}
				filter[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
			}
		}
		for _, raw := range exprs {
			var expr string
			if err := json.Unmarshal(raw, &expr); err != nil {
				var obj map[string]json.RawMessage
				if json.Unmarshal(raw, &obj) != nil || json.Unmarshal(obj["threshold"], &expr) != nil {
					return nil, fmt.Errorf("threshold on %s: %s is neither a string nor {threshold: ...}", name, raw)
				}
				for k := range obj {
					if k != "threshold" && k != "abortOnFail" && k != "delayAbortEval" {
						return nil, fmt.Errorf("threshold on %s: k6 API threshold option %q is not implemented by the smoke runner (loadtest/k6smoke): add it there", name, k)
					}
				}
			}
			e := expression.FindStringSubmatch(expr)
			if e == nil {
				return nil, fmt.Errorf("threshold on %s: cannot read %q", name, expr)
			}
			v, _ := strconv.ParseFloat(e[3], 64)
			out = append(out, threshold{metric: name, base: m[1], filter: filter, expr: expr, agg: e[1], op: e[2], value: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out, nil
}

// aggregations each metric type offers a threshold.
var aggregations = map[string][]string{
	counter: {"count", "rate"}, gauge: {"value"}, rate: {"rate"}, trend: {"avg", "min", "max", "med"},
}

// checkThresholds refuses, as k6 does, a threshold on a metric that does
// not exist once the init code has run, or with an aggregation its type
// lacks.
func (g *registry) checkThresholds(ths []threshold) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range ths {
		m, ok := g.metrics[t.base]
		if !ok {
			return fmt.Errorf("threshold on %s: no metric %q is defined", t.metric, t.base)
		}
		if !slices.Contains(aggregations[m.typ], t.agg) && !(m.typ == trend && strings.HasPrefix(t.agg, "p(")) {
			return fmt.Errorf("threshold on %s: a %s has no %s", t.metric, m.typ, t.agg)
		}
	}
	return nil
}

// values are a metric's (or submetric's) values, as k6's summary names
// them; ok is false when it has no sample.
func (g *registry) values(base string, filter map[string]string, trendStats []string, d time.Duration) (typ string, isTime bool, vals map[string]float64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.metrics[base]
	var xs []float64
	for _, s := range m.samples {
		match := true
		for k, v := range filter {
			if s.tags[k] != v {
				match = false
				break
			}
		}
		if match {
			xs = append(xs, s.value)
		}
	}
	if len(xs) == 0 {
		return m.typ, m.isTime, nil, false
	}
	vals = map[string]float64{}
	switch m.typ {
	case counter:
		var sum float64
		for _, x := range xs {
			sum += x
		}
		vals["count"], vals["rate"] = sum, sum/max(d.Seconds(), 1e-9)
	case gauge:
		vals["value"], vals["min"], vals["max"] = xs[len(xs)-1], slices.Min(xs), slices.Max(xs)
	case rate:
		var passes float64
		for _, x := range xs {
			if x != 0 {
				passes++
			}
		}
		vals["rate"], vals["passes"], vals["fails"] = passes/float64(len(xs)), passes, float64(len(xs))-passes
	case trend:
		sorted := slices.Sorted(slices.Values(xs))
		var sum float64
		for _, x := range xs {
			sum += x
		}
		vals["avg"], vals["min"], vals["max"] = sum/float64(len(xs)), sorted[0], sorted[len(sorted)-1]
		vals["med"], vals["count"] = percentile(sorted, 50), float64(len(xs))
		for _, s := range trendStats {
			var p float64
			if _, err := fmt.Sscanf(s, "p(%g)", &p); err == nil {
				vals[s] = percentile(sorted, p)
			}
		}
	}
	return m.typ, m.isTime, vals, true
}

// percentile interpolates between the closest ranks, as k6 does.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// evaluate decides every threshold. A metric with no sample is not
// judged, as in k6: that is why the scripts add a zero to their counters
// in setup().
func (g *registry) evaluate(ths []threshold, d time.Duration) map[string]bool {
	out := map[string]bool{}
	for _, t := range ths {
		v, ok := g.value(t, d)
		if !ok {
			out[t.key()] = true
			continue
		}
		out[t.key()] = compare(v, t.op, t.value)
	}
	return out
}

// value is the number threshold t compares.
func (g *registry) value(t threshold, d time.Duration) (float64, bool) {
	stats := []string{t.agg}
	_, _, vals, ok := g.values(t.base, t.filter, stats, d)
	if !ok {
		return 0, false
	}
	return vals[t.agg], true
}

// describe says what the metric of threshold key was, for a failure.
func (g *registry) describe(key string, d time.Duration) string {
	name, expr, _ := strings.Cut(key, ": ")
	m := submetric.FindStringSubmatch(name)
	e := expression.FindStringSubmatch(expr)
	if m == nil || e == nil {
		return "?"
	}
	filter := map[string]string{}
	if m[2] != "" {
		for _, kv := range strings.Split(m[2], ",") {
			k, v, _ := strings.Cut(kv, ":")
			filter[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	_, _, vals, ok := g.values(m[1], filter, []string{e[1]}, d)
	if !ok {
		return "no samples"
	}
	return fmt.Sprintf("%s=%g", e[1], vals[e[1]])
}

func compare(a float64, op string, b float64) bool {
	switch op {
	case "<":
		return a < b
	case "<=":
		return a <= b
	case ">":
		return a > b
	case ">=":
		return a >= b
	case "==", "===":
		return a == b
	case "!=":
		return a != b
	}
	return false
}

// summaryData is the data k6 hands handleSummary, as JSON: every metric
// with a sample, every submetric with a threshold, the checks and the
// run's duration.
func (g *registry) summaryData(o options, outcomes map[string]bool, checks []namedCheck, d time.Duration) string {
	type metricData struct {
		Type       string                     `json:"type"`
		Contains   string                     `json:"contains"`
		Values     map[string]float64         `json:"values"`
		Thresholds map[string]map[string]bool `json:"thresholds,omitempty"`
	}
	metrics := map[string]*metricData{}
	entry := func(name, base string, filter map[string]string) *metricData {
		if md, ok := metrics[name]; ok {
			return md
		}
		typ, isTime, vals, ok := g.values(base, filter, o.summaryTrendStat, d)
		if !ok {
			return nil
		}
		contains := "default"
		if isTime {
			contains = "time"
		}
		if typ == trend {
			kept := map[string]float64{}
			for _, s := range o.summaryTrendStat {
				if v, ok := vals[s]; ok {
					kept[s] = v
				}
			}
			vals = kept
		}
		for k, v := range vals {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				delete(vals, k) // JSON has no such number
			}
		}
		md := &metricData{Type: typ, Contains: contains, Values: vals}
		metrics[name] = md
		return md
	}
	g.mu.Lock()
	names := make([]string, 0, len(g.metrics))
	for n := range g.metrics {
		names = append(names, n)
	}
	g.mu.Unlock()
	for _, n := range names {
		entry(n, n, nil)
	}
	for _, t := range o.thresholds {
		md := entry(t.metric, t.base, t.filter)
		if md == nil {
			continue // not judged: k6 leaves it out too
		}
		if md.Thresholds == nil {
			md.Thresholds = map[string]map[string]bool{}
		}
		md.Thresholds[t.expr] = map[string]bool{"ok": outcomes[t.key()]}
	}
	type checkData struct {
		Name   string `json:"name"`
		Path   string `json:"path"`
		ID     string `json:"id"`
		Passes int    `json:"passes"`
		Fails  int    `json:"fails"`
	}
	cs := []checkData{}
	for i, c := range checks {
		cs = append(cs, checkData{Name: c.name, Path: "::" + c.name, ID: strconv.Itoa(i), Passes: c.passes, Fails: c.fails})
	}
	data := map[string]any{
		"metrics":    metrics,
		"root_group": map[string]any{"name": "", "path": "", "id": "root", "groups": []any{}, "checks": cs},
		"options":    map[string]any{"summaryTrendStats": o.summaryTrendStat, "summaryTimeUnit": "", "noColor": true},
		"state":      map[string]any{"isStdOutTTY": false, "isStdErrTTY": false, "testRunDurationMs": float64(d.Milliseconds())},
	}
	b, err := json.Marshal(data)
	if err != nil {
		panic(err) // maps of numbers, strings and booleans
	}
	return string(b)
}
