package jobs_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
)

// The audit gauges follow the latest run: none before the first run,
// red (0, with its violations) after a run that found the stock
// corrupted by hand, green (1) after the next run once it is put right.
func TestStatsReportTheLatestAudit(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	testenv.MustCreateProduct(t, db, "AUD", 1000, 5)
	v := jobs.NewStats(db)
	if n := testutil.CollectAndCount(v, "sekali_audit_last_ok", "sekali_audit_last_violations", "sekali_audit_last_run_timestamp_seconds"); n != 0 {
		t.Fatalf("%d series before any run, want none", n)
	}
	run := func(want string) {
		t.Helper()
		if _, err := audit.WithoutJobs(db).Run(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		if err := testutil.CollectAndCompare(v, strings.NewReader(want), "sekali_audit_last_ok", "sekali_audit_last_violations"); err != nil {
			t.Error(err)
		}
		if n := testutil.CollectAndCount(v, "sekali_audit_last_run_timestamp_seconds"); n != 1 {
			t.Errorf("%d run timestamps, want 1", n)
		}
	}
	if err := db.Exec("UPDATE products SET stock = stock + 1 WHERE sku = 'AUD'").Error; err != nil {
		t.Fatal(err)
	}
	run(`
# HELP sekali_audit_last_ok 1 when the latest integrity audit was green, 0 when it was red.
# TYPE sekali_audit_last_ok gauge
sekali_audit_last_ok 0
# HELP sekali_audit_last_violations Violations the latest integrity audit found.
# TYPE sekali_audit_last_violations gauge
sekali_audit_last_violations 1
`)
	if err := db.Exec("UPDATE products SET stock = stock - 1 WHERE sku = 'AUD'").Error; err != nil {
		t.Fatal(err)
	}
	run(`
# HELP sekali_audit_last_ok 1 when the latest integrity audit was green, 0 when it was red.
# TYPE sekali_audit_last_ok gauge
sekali_audit_last_ok 1
# HELP sekali_audit_last_violations Violations the latest integrity audit found.
# TYPE sekali_audit_last_violations gauge
sekali_audit_last_violations 0
`)
}
