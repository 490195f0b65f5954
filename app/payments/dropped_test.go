package payments_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestDroppedDeliveryRowsAreReported: with the writer of delivery rows
// held (a lock on the callback it counts on), the queue fills and the
// rows it has no room for are dropped — each one counted in
// sekali_callback_delivery_rows_dropped_total, served on /metrics, where
// the replayer reads it around each scenario (the QA module's
// TestReplayerReportsDroppedRows). The console's dashboard counts them
// too (Service.DroppedDeliveryRows).
func TestDroppedDeliveryRowsAreReported(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	now := time.Now().UTC()
	cb := models.PaymentCallback{Provider: "sandbox", IdempotencyKey: "evt-dropped", PayloadHash: "h", OrderID: "ORD-1",
		Status: models.CallbackProcessed, Result: models.ResultProcessed, Attempts: 1, FirstReceivedAt: now, LastReceivedAt: now}
	if err := db.Create(&cb).Error; err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	srv := httptest.NewServer(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	if got := servedDropped(t, srv.URL); got != "0" {
		t.Fatalf("before: /metrics serves %q dropped rows; want 0", got)
	}

	const room, extra = 4, 5
	hold := db.Begin()
	t.Cleanup(func() { hold.Rollback() })
	if err := hold.Exec("SELECT 1 FROM payment_callbacks WHERE id = ? FOR UPDATE", cb.ID).Error; err != nil {
		t.Fatal(err)
	}
	l := payments.NewDeliveryLog(db, testenv.Logger(t), m.DeliveryRowsDropped, room)
	row := models.CallbackDelivery{CallbackID: &cb.ID, Provider: "sandbox", ReceivedAt: now, Outcome: models.ResultDuplicate,
		ResponseCode: 200, DurationMS: 1, RemoteAddr: "127.0.0.1", RequestID: "req"}
	l.Add(row) // the writer takes it and waits for the callback's lock
	// Waiting for the queue to be empty is not enough: the writer still
	// gathers what is queued behind the first row into its batch until
	// it finds none. It holds no more once it waits on the lock.
	testenv.Eventually(t, "the writer waiting on the callback's lock", func() bool {
		var waiting int64
		db.Raw("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting)
		return l.Queued() == 0 && waiting == 1
	})
	for range room + extra {
		l.Add(row)
	}
	if got := testutil.ToFloat64(m.DeliveryRowsDropped); got != extra {
		t.Errorf("the metric counts %v dropped rows, want %d", got, extra)
	}
	if got := l.Dropped(); got != extra {
		t.Errorf("the dashboard's count: %d dropped rows, want %d", got, extra)
	}
	if got := servedDropped(t, srv.URL); got != "5" {
		t.Errorf("/metrics serves %q dropped rows; want %d", got, extra)
	}

	hold.Rollback() // the writer goes on: the first row and the queued ones are written
	l.Close()
	var written int64
	db.Model(&models.CallbackDelivery{}).Count(&written)
	if written != 1+room {
		t.Errorf("%d delivery rows written, want %d", written, 1+room)
	}
}

// servedDropped is the value of the dropped rows' counter in what the
// metrics server at url serves, the line the replayer reads.
func servedDropped(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^sekali_callback_delivery_rows_dropped_total (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/metrics serves no sekali_callback_delivery_rows_dropped_total:\n%s", b)
	}
	return string(m[1])
}
