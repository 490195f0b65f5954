package audit

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// The checks are numbered 1, 2, 3, … in the order they run, baseChecks
// first and jobChecks after them, so `sekali verify`, the console and the docs
// can number them alike.
func TestCheckIDsFollowTheirOrder(t *testing.T) {
	t.Parallel()
	all := New(nil).Checks()
	if len(all) != len(baseChecks)+len(jobChecks) {
		t.Fatalf("New checks %d invariants, want the %d of baseChecks and jobChecks", len(all), len(baseChecks)+len(jobChecks))
	}
	names := map[string]bool{"drain": true}
	for i, c := range all {
		if c.ID != i+1 {
			t.Errorf("check %q runs at position %d but has ID %d", c.Name, i+1, c.ID)
		}
		if names[c.Name] {
			t.Errorf("check name %q is used twice (or is the drain's)", c.Name)
		}
		names[c.Name] = true
	}
	without := WithoutJobs(nil).Checks()
	for i, c := range without {
		if c.ID != all[i].ID || c.Name != all[i].Name {
			t.Errorf("WithoutJobs runs %d. %s where New runs %d. %s", c.ID, c.Name, all[i].ID, all[i].Name)
		}
	}
}

var (
	checkLine   = regexp.MustCompile(`^(ok  |FAIL)  (\d+)\. (\S+)`)
	summaryLine = regexp.MustCompile(`^integrity audit: (green|RED, \d+ violation\(s\)) \((\d+) checks, [^)]+\)$`)
)

// Print numbers its lines 1, 2, 3, … and its summary counts the lines it
// printed: a drained run, a drain that timed out, a live run and an
// auditor without the job checks alike.
func TestPrintCountsWhatItPrints(t *testing.T) {
	t.Parallel()
	names := func(a *Auditor) []string {
		var n []string
		for _, c := range a.Checks() {
			n = append(n, c.Name)
		}
		return n
	}
	full, noJobs := New(nil), WithoutJobs(nil)
	tests := []struct {
		name string
		a    *Auditor
		r    Report
	}{
		{"drained, green", full, Report{OK: true, Violations: []Violation{}, Checked: names(full), Drained: true, Took: "1s"}},
		{"drain timed out", full, Report{Violations: []Violation{
			{Check: "drain", Detail: "work still in flight after 1s: 1 due outbox rows not relayed, 0 paid orders without their invoice or sent email"},
			{Check: "stock", Detail: "product QA-1 has stock 13 but its movements add up to 12", Ref: "product:QA-1"},
		}, Checked: names(full), Took: "1s"}},
		{"live", full, Report{OK: true, Violations: []Violation{}, Checked: names(full), Settling: 2, Took: "10ms"}},
		{"without jobs, red", noJobs, Report{Violations: []Violation{
			{Check: "callbacks", Detail: "callback 1 (sandbox evt_1) has 2 applying deliveries", Ref: "callback:1"},
		}, Checked: names(noJobs), Took: "10ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tt.a.Print(&out, tt.r)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			var ids []int
			for _, l := range lines {
				if m := checkLine.FindStringSubmatch(l); m != nil {
					var id int
					fmt.Sscan(m[2], &id)
					ids = append(ids, id)
				}
			}
			for i, id := range ids {
				if id != i+1 {
					t.Fatalf("printed check numbers %v, want 1, 2, 3, …\n%s", ids, out.String())
				}
			}
			if len(ids) != len(tt.a.Checks()) || len(ids) != len(tt.r.Checked) {
				t.Fatalf("printed %d check lines for %d checks (report: %d)\n%s", len(ids), len(tt.a.Checks()), len(tt.r.Checked), out.String())
			}
			m := summaryLine.FindStringSubmatch(lines[len(lines)-1])
			if m == nil {
				t.Fatalf("last line %q is not the summary", lines[len(lines)-1])
			}
			if m[2] != fmt.Sprint(len(ids)) {
				t.Errorf("summary says %s checks after printing %d\n%s", m[2], len(ids), out.String())
			}
			if want := !tt.r.OK; strings.HasPrefix(m[1], "RED") != want {
				t.Errorf("summary %q for a report with OK = %v", m[1], tt.r.OK)
			}
		})
	}
}
