package loadtest_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/loadtest"
)

// TestReplayerReportsDroppedRows: the replayer reads the server's count
// of dropped delivery rows (sekali_callback_delivery_rows_dropped_total,
// from the app's own metrics registry, served as /metrics serves it)
// around a scenario, as sekali-replay does, and reports it: the scenario
// fails, and says how many rows were dropped. That the server counts each
// row it drops there is the app's TestDroppedDeliveryRowsAreReported.
func TestReplayerReportsDroppedRows(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	srv := httptest.NewServer(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	before, err := loadtest.DroppedDeliveryRows(ctx, http.DefaultClient, srv.URL)
	if err != nil || before != 0 {
		t.Fatalf("before: %v, %v; want 0", before, err)
	}
	const extra = 5
	m.DeliveryRowsDropped.Add(extra)
	after, err := loadtest.DroppedDeliveryRows(ctx, http.DefaultClient, srv.URL)
	if err != nil || after != extra {
		t.Errorf("the replayer reads %v, %v; want %d", after, err, extra)
	}
	rep := loadtest.Report{Scenario: "storm", OK: true}
	loadtest.NoteDroppedRows(&rep, before, after, err)
	var out bytes.Buffer
	loadtest.PrintSummary(&out, []loadtest.Report{rep})
	if rep.OK || rep.DeliveryRowsDropped == nil || *rep.DeliveryRowsDropped != extra || len(rep.Problems) != 1 ||
		!regexp.MustCompile(`(?m)^storm\s+FAIL\s`).MatchString(out.String()) ||
		!strings.Contains(out.String(), "the server dropped 5 callback delivery rows") {
		t.Errorf("the replayer's report: %+v\n%s", rep, out.String())
	}
}
