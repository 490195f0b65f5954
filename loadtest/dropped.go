package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// DroppedRowsSeries is the server's count of the callback delivery rows
// it answered but could not write (its queue of rows was full, or the
// database refused them): those deliveries have no audit row, and the
// console's delivery counts miss them.
const DroppedRowsSeries = "sekali_callback_delivery_rows_dropped_total"

// DroppedDeliveryRows reads DroppedRowsSeries from the server's /metrics
// page at metricsURL.
func DroppedDeliveryRows(ctx context.Context, client *http.Client, metricsURL string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", metricsURL, nil)
	if err != nil {
		return 0, err
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: HTTP %d", metricsURL, res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), DroppedRowsSeries+" "); ok {
			return strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no %s", metricsURL, DroppedRowsSeries)
}

// NoteDroppedRows puts into r the delivery rows the server dropped while the
// scenario ran (before and after are the series' values, err why either
// could not be read). Dropped rows fail the scenario: every answer may
// have been right, but deliveries went unrecorded, and the replayer's
// PASS says the server kept its whole record. Not knowing is a warning.
func NoteDroppedRows(r *Report, before, after float64, err error) {
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("dropped delivery rows not checked (%v): point -metrics at the server's /metrics", err))
		return
	}
	n := after - before
	r.DeliveryRowsDropped = &n
	if n > 0 {
		r.OK = false
		r.Problems = append(r.Problems, fmt.Sprintf("the server dropped %.0f callback delivery rows (%s): those deliveries were answered but have no audit row, and the console under-counts them", n, DroppedRowsSeries))
	}
}
