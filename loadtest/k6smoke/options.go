package k6smoke

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the parts of a script's `export const options` the runner
// reads. An option it does not know is an error that names it.
type options struct {
	scenarios        []scenario
	thresholds       []threshold
	batch            int
	batchPerHost     int
	summaryTrendStat []string
}

// scenario is one entry of options.scenarios, as k6 reads it.
type scenario struct {
	name, executor, exec string
	vus, iterations      int
	rate                 int
	timeUnit, duration   time.Duration
	preAllocatedVUs      int
	maxVUs               int
	maxDuration          time.Duration
}

// Options the runner reads, or accepts knowing they change nothing it
// does (timeouts of setup and teardown: the test's own deadline rules).
var knownOptions = []string{"scenarios", "thresholds", "batch", "batchPerHost", "summaryTrendStats",
	"setupTimeout", "teardownTimeout", "vus", "iterations", "duration"}

// Scenario keys per executor.
var executorKeys = map[string][]string{
	"shared-iterations":     {"executor", "exec", "vus", "iterations", "maxDuration", "gracefulStop"},
	"per-vu-iterations":     {"executor", "exec", "vus", "iterations", "maxDuration", "gracefulStop"},
	"constant-vus":          {"executor", "exec", "vus", "duration", "gracefulStop"},
	"constant-arrival-rate": {"executor", "exec", "rate", "timeUnit", "duration", "preAllocatedVUs", "maxVUs", "gracefulStop"},
}

func parseOptions(v *vu) (options, error) {
	o := options{batch: 20, batchPerHost: 6, summaryTrendStat: []string{"avg", "min", "med", "max", "p(90)", "p(95)"}}
	val := v.exports.Get("options")
	text, err := v.stringify(val)
	if err != nil {
		return o, err
	}
	raw := map[string]json.RawMessage{}
	if text != "" {
		if err := json.Unmarshal([]byte(text), &raw); err != nil {
			return o, fmt.Errorf("options is not an object: %w", err)
		}
	}
	for k := range raw {
		if !slices.Contains(knownOptions, k) {
			return o, fmt.Errorf("k6 API options.%s is not implemented by the smoke runner (loadtest/k6smoke): add it there", k)
		}
	}
	for _, k := range []string{"batch", "batchPerHost"} {
		if b, ok := raw[k]; ok {
			var n int
			if err := json.Unmarshal(b, &n); err != nil || n < 0 {
				return o, fmt.Errorf("options.%s: want a whole number, got %s", k, b)
			}
			if k == "batch" {
				o.batch = n
			} else {
				o.batchPerHost = n
			}
		}
	}
	if b, ok := raw["summaryTrendStats"]; ok {
		if err := json.Unmarshal(b, &o.summaryTrendStat); err != nil {
			return o, fmt.Errorf("options.summaryTrendStats: %w", err)
		}
	}
	for _, k := range []string{"setupTimeout", "teardownTimeout"} {
		if b, ok := raw[k]; ok {
			if _, err := durationOf(b); err != nil {
				return o, fmt.Errorf("options.%s: %w", k, err)
			}
		}
	}

	if b, ok := raw["thresholds"]; ok {
		if o.thresholds, err = parseThresholds(b); err != nil {
			return o, err
		}
	}

	if b, ok := raw["scenarios"]; ok {
		for _, k := range []string{"vus", "iterations", "duration"} {
			if _, both := raw[k]; both {
				return o, fmt.Errorf("options.%s beside options.scenarios: k6 ignores it; move it into a scenario", k)
			}
		}
		var names []string
		scs := map[string]map[string]json.RawMessage{}
		if err := json.Unmarshal(b, &scs); err != nil {
			return o, fmt.Errorf("options.scenarios: %w", err)
		}
		// Keys in the script's order, for logs that read as the script.
		dec := json.NewDecoder(strings.NewReader(string(b)))
		_, _ = dec.Token()
		for dec.More() {
			t, _ := dec.Token()
			names = append(names, t.(string))
			var skip json.RawMessage
			_ = dec.Decode(&skip)
		}
		for _, name := range names {
			sc, err := parseScenario(name, scs[name])
			if err != nil {
				return o, err
			}
			o.scenarios = append(o.scenarios, sc)
		}
		return o, nil
	}
	// The shortcuts: vus and iterations (shared-iterations) or duration
	// (constant-vus); neither: one iteration of one VU.
	sc := scenario{name: "default", executor: "shared-iterations", exec: "default", vus: 1, iterations: 1}
	if b, ok := raw["vus"]; ok {
		if err := json.Unmarshal(b, &sc.vus); err != nil {
			return o, fmt.Errorf("options.vus: %w", err)
		}
	}
	if b, ok := raw["iterations"]; ok {
		if err := json.Unmarshal(b, &sc.iterations); err != nil {
			return o, fmt.Errorf("options.iterations: %w", err)
		}
	} else if b, ok := raw["duration"]; ok {
		sc.executor = "constant-vus"
		if sc.duration, err = durationOf(b); err != nil {
			return o, fmt.Errorf("options.duration: %w", err)
		}
	}
	o.scenarios = []scenario{sc}
	return o, nil
}

func parseScenario(name string, raw map[string]json.RawMessage) (scenario, error) {
	sc := scenario{name: name, exec: "default", vus: 1, iterations: 1, timeUnit: time.Second}
	if err := json.Unmarshal(raw["executor"], &sc.executor); err != nil {
		return sc, fmt.Errorf("scenario %s: executor: %w", name, err)
	}
	keys, ok := executorKeys[sc.executor]
	if !ok {
		return sc, fmt.Errorf("scenario %s: k6 API executor %q is not implemented by the smoke runner (loadtest/k6smoke): add it there", name, sc.executor)
	}
	for k := range raw {
		if !slices.Contains(keys, k) {
			return sc, fmt.Errorf("scenario %s: k6 API %s option %q is not implemented by the smoke runner (loadtest/k6smoke): add it there", name, sc.executor, k)
		}
	}
	ints := map[string]*int{"vus": &sc.vus, "iterations": &sc.iterations, "rate": &sc.rate,
		"preAllocatedVUs": &sc.preAllocatedVUs, "maxVUs": &sc.maxVUs}
	for k, p := range ints {
		if b, ok := raw[k]; ok {
			if err := json.Unmarshal(b, p); err != nil || *p < 0 {
				return sc, fmt.Errorf("scenario %s: %s: want a whole number, got %s", name, k, b)
			}
		}
	}
	durs := map[string]*time.Duration{"timeUnit": &sc.timeUnit, "duration": &sc.duration, "maxDuration": &sc.maxDuration}
	for k, p := range durs {
		if b, ok := raw[k]; ok {
			d, err := durationOf(b)
			if err != nil {
				return sc, fmt.Errorf("scenario %s: %s: %w", name, k, err)
			}
			*p = d
		}
	}
	if b, ok := raw["gracefulStop"]; ok {
		if _, err := durationOf(b); err != nil {
			return sc, fmt.Errorf("scenario %s: gracefulStop: %w", name, err)
		}
	}
	if b, ok := raw["exec"]; ok {
		if err := json.Unmarshal(b, &sc.exec); err != nil {
			return sc, fmt.Errorf("scenario %s: exec: %w", name, err)
		}
	}
	switch sc.executor {
	case "constant-arrival-rate":
		if sc.rate <= 0 || sc.duration <= 0 || sc.preAllocatedVUs <= 0 {
			return sc, fmt.Errorf("scenario %s: constant-arrival-rate needs rate, duration and preAllocatedVUs", name)
		}
	case "constant-vus":
		if sc.duration <= 0 {
			return sc, fmt.Errorf("scenario %s: constant-vus needs a duration", name)
		}
	}
	if sc.vus <= 0 {
		return sc, fmt.Errorf("scenario %s: vus must be at least 1", name)
	}
	return sc, nil
}

// durationOf reads a k6 duration: "1m30s", "500ms", or a number of
// milliseconds.
func durationOf(b json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if n, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(n * float64(time.Millisecond)), nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration", s)
		}
		return d, nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return 0, fmt.Errorf("%s is not a duration", b)
	}
	return time.Duration(n * float64(time.Millisecond)), nil
}
