package payments

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// TestDeliveryLogWritesRowsAndCounters: one batch leaves a row per
// delivery and adds its deliveries and conflicts to each callback's
// counters, keeping the latest receipt time.
func TestDeliveryLogWritesRowsAndCounters(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ids := callbackRows(t, db, 2)
	l := newDeliveryLog(db, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}), deliveryQueue)
	t.Cleanup(l.close)
	at := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond) // later than the rows' own times
	l.write([]queuedDelivery{
		{row: delivery(&ids[0], at, models.ResultDuplicate)},
		{row: delivery(&ids[0], at.Add(2*time.Second), models.ResultConflict), conflict: true},
		{row: delivery(&ids[1], at.Add(time.Second), models.ResultDuplicate)},
		{row: delivery(nil, at, models.EInvalidSignature)},
	})
	var n int64
	db.Model(&models.CallbackDelivery{}).Count(&n)
	if n != 4 {
		t.Fatalf("%d delivery rows; want 4", n)
	}
	var got []models.PaymentCallback
	db.Order("id").Find(&got)
	if got[0].Attempts != 3 || got[0].ConflictCount != 1 || !got[0].LastReceivedAt.Equal(at.Add(2*time.Second)) {
		t.Errorf("first callback: attempts %d, conflicts %d, last %v; want 3, 1, %v", got[0].Attempts, got[0].ConflictCount, got[0].LastReceivedAt, at.Add(2*time.Second))
	}
	if got[1].Attempts != 2 || got[1].ConflictCount != 0 || !got[1].LastReceivedAt.Equal(at.Add(time.Second)) {
		t.Errorf("second callback: attempts %d, conflicts %d, last %v; want 2, 0, %v", got[1].Attempts, got[1].ConflictCount, got[1].LastReceivedAt, at.Add(time.Second))
	}
}

// BenchmarkDeliveryRows writes 500 audit rows of duplicates of one
// callback per op: with COPY (what the delivery log does) and, as the
// baseline measured in the same run, with the multi-row INSERT it did
// before. Compare the two ns/op.
func BenchmarkDeliveryRows(b *testing.B) {
	db := testenv.NewDB(b)
	id := callbackRows(b, db, 1)[0]
	l := newDeliveryLog(db, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}), deliveryQueue)
	b.Cleanup(l.close)
	batch := make([]queuedDelivery, deliveryBatchMax)
	for i := range batch {
		batch[i] = queuedDelivery{row: delivery(&id, time.Now().UTC(), models.ResultDuplicate)}
	}
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			l.write(batch)
		}
	})
	b.Run("insert", func(b *testing.B) {
		for b.Loop() {
			rows := make([]models.CallbackDelivery, len(batch))
			for i, q := range batch {
				rows[i] = q.row
			}
			err := db.Transaction(func(tx *gorm.DB) error {
				if err := tx.CreateInBatches(&rows, deliveryBatchMax).Error; err != nil {
					return err
				}
				return tx.Model(&models.PaymentCallback{}).Where("id = ?", id).Updates(map[string]any{
					"attempts": gorm.Expr("attempts + ?", len(rows)), "last_received_at": gorm.Expr("greatest(last_received_at, ?)", time.Now()),
				}).Error
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func callbackRows(tb testing.TB, db *gorm.DB, n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		cb := models.PaymentCallback{Provider: "sandbox", IdempotencyKey: fmt.Sprintf("evt-%d", i), PayloadHash: "h",
			OrderID: "ORD-1", Status: models.CallbackProcessed, Result: models.ResultProcessed, Attempts: 1,
			FirstReceivedAt: time.Now().UTC(), LastReceivedAt: time.Now().UTC()}
		if err := db.Create(&cb).Error; err != nil {
			tb.Fatal(err)
		}
		ids[i] = cb.ID
	}
	return ids
}

func delivery(callbackID *int64, at time.Time, outcome string) models.CallbackDelivery {
	return models.CallbackDelivery{CallbackID: callbackID, Provider: "sandbox", ReceivedAt: at, Outcome: outcome,
		ResponseCode: 200, DurationMS: 1, RemoteAddr: "127.0.0.1", RequestID: "req"}
}

// A row per refused delivery would let a sender of bad signatures write
// about 1.4 GB an hour. 500 refused deliveries from
// one address write the address's budget of rows and no more; each one
// is still answered and counted by its result, and the rest are counted
// as skipped. Another address has a budget of its own.
func TestRefusedDeliveriesCostBoundedRows(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	m := metrics.New()
	s := NewService(db, testenv.Logger(t), time.Now, m, jobs.Tasks{}, testProvider{})
	refuse := func(addr string) Outcome {
		return s.Receive(context.Background(), Delivery{Provider: "sandbox", Body: strings.NewReader("{"),
			ContentType: "application/json", RemoteAddr: addr, Header: http.Header{}})
	}
	for range 500 {
		if out := refuse("203.0.113.66"); out.Status() != 400 {
			t.Fatalf("a malformed body: %d %s, want 400", out.Status(), out.Result)
		}
	}
	refuse("198.51.100.5")
	s.Close() // writes what is queued
	var byAddr []struct {
		RemoteAddr string
		N          int64
	}
	db.Raw("SELECT remote_addr, count(*) AS n FROM callback_deliveries GROUP BY remote_addr ORDER BY remote_addr").Scan(&byAddr)
	want := fmt.Sprint([]any{map[string]any{"198.51.100.5": 1}, map[string]any{"203.0.113.66": refusedPerClient}})
	got := []any{}
	for _, r := range byAddr {
		got = append(got, map[string]any{r.RemoteAddr: int(r.N)})
	}
	if fmt.Sprint(got) != want {
		t.Errorf("rows by address %v, want %v", got, want)
	}
	if n := testutil.ToFloat64(m.Callbacks.WithLabelValues("sandbox", models.EInvalidPayload)); n != 501 {
		t.Errorf("sekali_callbacks_total{result=invalid_payload} = %v, want every one of the 501", n)
	}
	if n := testutil.ToFloat64(m.RefusedRowsSkipped); n != 500-refusedPerClient {
		t.Errorf("skipped rows counted %v, want %d", n, 500-refusedPerClient)
	}
}

// A sender with an IPv6 /64 has 2^64 addresses to send from: the budget
// counts the client the web layer names (Delivery.Client, the /64), so
// refused deliveries from a new address each still cost at most the
// client's budget of rows, and each row keeps its own address.
func TestRefusalBudgetCountsTheClientNotTheAddress(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	m := metrics.New()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) // one minute: the budget is not renewed meanwhile
	s := NewService(db, testenv.Logger(t), func() time.Time { return at }, m, jobs.Tasks{}, testProvider{})
	const sent = refusedPerClient + 40
	for i := range sent {
		out := s.Receive(context.Background(), Delivery{Provider: "sandbox", Body: strings.NewReader("{"),
			ContentType: "application/json", Header: http.Header{},
			RemoteAddr: fmt.Sprintf("2001:db8:1:2::%x", i+1), Client: "2001:db8:1:2::/64"})
		if out.Status() != 400 {
			t.Fatalf("a malformed body: %d %s, want 400", out.Status(), out.Result)
		}
	}
	s.Close() // writes what is queued
	var rows, addrs, others int64
	db.Raw("SELECT count(*), count(DISTINCT remote_addr), count(*) FILTER (WHERE remote_addr NOT LIKE '2001:db8:1:2::%') FROM callback_deliveries").
		Row().Scan(&rows, &addrs, &others)
	if rows != refusedPerClient || addrs != refusedPerClient || others != 0 {
		t.Errorf("%d rows from %d addresses (%d outside the /64); want the client's budget, %d, each with its own address",
			rows, addrs, others, refusedPerClient)
	}
	if n := testutil.ToFloat64(m.RefusedRowsSkipped); n != sent-refusedPerClient {
		t.Errorf("skipped rows counted %v, want %d", n, sent-refusedPerClient)
	}
}

// The budget is per minute: the next minute has it afresh.
func TestRefusalBudgetResetsEachMinute(t *testing.T) {
	t.Parallel()
	b := newRefusalBudget()
	now := time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)
	for i := range refusedPerClient {
		if !b.allow("a", now) {
			t.Fatalf("row %d refused within the budget", i+1)
		}
	}
	if b.allow("a", now.Add(20*time.Second)) {
		t.Error("a row over the budget allowed within the minute")
	}
	if !b.allow("a", now.Add(40*time.Second)) {
		t.Error("the next minute has no budget")
	}
}
