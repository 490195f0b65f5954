package main

import (
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestMetrics: /metrics serves the series of docs/api.md#get-metrics once
// there was traffic, counting exactly that traffic. The app is a process
// of its own, so no other test's traffic is in its series.
func TestMetrics(t *testing.T) {
	t.Parallel()
	a := startAppProcess(t, nil)
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
