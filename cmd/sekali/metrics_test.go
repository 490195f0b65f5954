package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestMetrics: /metrics serves the series of docs/api.md#get-metrics once
// there was traffic, counting exactly that traffic. Each app builds its
// own metrics.Set, so the other apps this test binary runs at the same
// time count into theirs, not into this one's.
func TestMetrics(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 1000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	body := testenv.SandboxBody(id, "tx-m", models.EventPaid, 1000)
	a.callback(t, "evt_m", body)
	a.callback(t, "evt_m", body)
	a.callback(t, "evt_m", testenv.SandboxBody(id, "tx-m", models.EventPaid, 999))
	a.verify(t) // the invoice and email jobs have run

	r := a.do(t, "GET", "/metrics", nil, nil)
	if r.Status != 200 {
		t.Fatalf("/metrics: %d", r.Status)
	}
	for _, series := range []string{
		`sekali_callbacks_total{provider="sandbox",result="processed"} 1`,
		`sekali_callbacks_total{provider="sandbox",result="duplicate"} 1`,
		`sekali_callbacks_total{provider="sandbox",result="conflict"} 1`,
		`sekali_callback_duplicates_total{provider="sandbox"} 1`,
		`sekali_callback_conflicts_total{provider="sandbox"} 1`,
		`sekali_job_runs_total{outcome="succeeded",type="email:send"} 1`,
		`sekali_callback_duration_seconds_bucket`,
		`sekali_job_runs_total{outcome="succeeded",type="invoice:generate"} 1`,
		`sekali_job_duration_seconds_bucket`,
		`sekali_outbox_dispatched_total`,
		`sekali_outbox_backlog `,
		`sekali_outbox_oldest_age_seconds `,
		`sekali_jobs_stuck `,
		`sekali_queue_tasks{queue="critical",state="completed"}`,
		`sekali_queue_latency_seconds{queue="critical"}`,
		`go_goroutines `,
	} {
		if !strings.Contains(string(r.Body), series) {
			t.Errorf("/metrics has no %s", series)
		}
	}
}

// metric reads one series of the app's /metrics, by its name and labels
// as /metrics prints them; 0 when the series has not been counted yet.
func (a *testApp) metric(t *testing.T, series string) float64 {
	t.Helper()
	r := a.do(t, "GET", "/metrics", nil, nil)
	if r.Status != 200 {
		t.Fatalf("/metrics: %d", r.Status)
	}
	for line := range strings.Lines(string(r.Body)) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("/metrics: %s: %v", series, err)
			}
			return v
		}
	}
	return 0
}
