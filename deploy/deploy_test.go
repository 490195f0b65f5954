package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/jobs"
)

const (
	rulesFile     = "prometheus/alerts.yml"
	ruleTestsFile = "prometheus/alerts_test.yml"
	dashboardFile = "grafana/sekali.json"
	runbookFile   = "../docs/operations.md"
	composeFile   = "../docker-compose.yml"
)

// promtool finds Debian's promtool (package prometheus; make test-deps
// installs it). A machine without it fails rather than skips: the rules
// would go unchecked.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (Debian: apt-get install prometheus; make test-deps installs it)")
	}
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRulesAreValid(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "rules", rulesFile)
}

// alerts_test.yml fires and holds each alert over made-up series.
func TestRulesUnitTests(t *testing.T) {
	t.Parallel()
	promtool(t, "test", "rules", ruleTestsFile)
}

// exported returns the names of the series a Sekali server exports: those
// of the registry serve builds (metrics.Set's collectors and jobs.Gauges),
// read from their descriptions — a histogram's as its _bucket, _sum and
// _count — without a database, a queue or a server.
func exported() map[string]bool {
	cs := append(metrics.New().Collectors(), jobs.Gauges(nil, nil)...)
	names := map[string]bool{}
	for _, c := range cs {
		var suffixes []string
		switch c.(type) {
		case *prometheus.HistogramVec, prometheus.Histogram:
			suffixes = []string{"_bucket", "_sum", "_count"}
		case *prometheus.SummaryVec, prometheus.Summary:
			suffixes = []string{"", "_sum", "_count"}
		default:
			suffixes = []string{""}
		}
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				continue
			}
			for _, s := range suffixes {
				names[m[1]+s] = true
			}
		}
	}
	return names
}

// fqName reads a series' name from prometheus.Desc's String, the one
// place a Desc shows it.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// seriesName is a Sekali series named in a rule, a test or a panel. The
// group keeps the prefix a word of its own, so tools/rename renames it.
var seriesName = regexp.MustCompile(`\b(?:sekali_[a-zA-Z0-9_]+)`)

// unknownSeries returns the sekali_ series text names that are not in
// exported, each once, in order of appearance.
func unknownSeries(text string, exported map[string]bool) []string {
	var unknown []string
	for _, name := range seriesName.FindAllString(text, -1) {
		if !exported[name] && !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	return unknown
}

// Every series the rules, their tests and the dashboard's queries name is
// one the server exports: a rule over a renamed or removed series would
// never fire, and say nothing.
func TestRulesAndDashboardNameExportedSeries(t *testing.T) {
	t.Parallel()
	names := exported()
	var queries []string
	for _, p := range readDashboard(t).Panels {
		for _, q := range p.Targets {
			queries = append(queries, q.Expr)
		}
	}
	for file, text := range map[string]string{
		rulesFile:     readFile(t, rulesFile),
		ruleTestsFile: readFile(t, ruleTestsFile),
		dashboardFile: strings.Join(queries, "\n"),
	} {
		if n := len(seriesName.FindAllString(text, -1)); n == 0 {
			t.Errorf("%s names no sekali_ series", file)
		}
		if unknown := unknownSeries(text, names); len(unknown) > 0 {
			t.Errorf("%s names series the server does not export: %v", file, unknown)
		}
	}
}

// The check itself: a name the server does not export is caught, and so
// is a suffix that its type does not have.
func TestSeriesCheckCatchesUnknownNames(t *testing.T) {
	t.Parallel()
	names := exported()
	for expr, want := range map[string][]string{
		`sum(rate(sekali_callbacks_total[5m]))`:                                       nil,
		`histogram_quantile(0.99, rate(sekali_callback_duration_seconds_bucket[5m]))`: nil,
		`max(sekali_outbox_backlog) > 0 and min(sekali_audit_last_ok) == 0`:           nil,
		`rate(sekali_callback_no_such_total[5m]) + rate(sekali_callbacks_total[5m])`:  {"sekali_callback_no_such_total"},
		`rate(sekali_callbacks_total_bucket[5m])`:                                     {"sekali_callbacks_total_bucket"},
		`sekali_callback_duration_seconds`:                                            {"sekali_callback_duration_seconds"},
	} {
		if got := unknownSeries(expr, names); !slices.Equal(got, want) {
			t.Errorf("unknownSeries(%q) = %v, want %v", expr, got, want)
		}
	}
}

// Every alert says how bad it is, what it is, and where its runbook is:
// a section of docs/operations.md that exists.
func TestAlertsHaveRunbooks(t *testing.T) {
	t.Parallel()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(readFile(t, rulesFile)), &rules); err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(readFile(t, runbookFile))
	const base = "https://github.com/sekali/sekali/blob/main/docs/operations.md#"
	var n int
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s has no summary", r.Alert)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], base)
			if !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is not a section of docs/operations.md", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s has no alerts", rulesFile)
	}
}

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: lower case, spaces as hyphens, other punctuation dropped.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	for line := range strings.Lines(md) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

// The dashboard is JSON Grafana can load: every panel but a row has a
// query, and every query reads the dashboard's Prometheus.
func TestDashboardPanelsQuery(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: uid %q, %d panels", dashboardFile, d.UID, len(d.Panels))
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: %d queries, datasource %q; want queries of ${datasource}", p.Title, len(p.Targets), p.Datasource.UID)
		}
		for _, q := range p.Targets {
			if q.Expr == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
		}
	}
}

// dashboard is what the checks read of the Grafana dashboard.
type dashboard struct {
	UID    string
	Panels []struct {
		Type       string
		Title      string
		Datasource struct{ UID string }
		Targets    []struct{ Expr string }
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
