package payments

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestDeliveryLogWritesRowsAndCounters: one batch leaves a row per
// delivery and adds its deliveries and conflicts to each callback's
// counters, keeping the latest receipt time.
func TestDeliveryLogWritesRowsAndCounters(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ids := callbackRows(t, db, 2)
	l := newDeliveryLog(db, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}))
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
	l := newDeliveryLog(db, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}))
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
