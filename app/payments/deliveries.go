package payments

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sekali/sekali/models"
)

// Batching limits of the delivery log.
const (
	deliveryQueue    = 8192 // rows waiting to be written; beyond this they are dropped and counted
	deliveryBatchMax = 500
	deliveryRetries  = 3
)

// deliveryLog writes the audit rows of deliveries that applied nothing —
// duplicates, conflicts, refusals, failures — after the response, in
// batches, and counts them on their callback rows (attempts,
// last_received_at, conflict_count). A delivery that applies an effect
// writes its row in its own transaction instead, so the rows that the
// audit relies on are never in this queue.
//
// What it can lose: rows still queued when the process dies, and rows it
// cannot write after a few tries (the database is down) or has no room
// for. Each loss is logged and counted in
// sekali_callback_delivery_rows_dropped_total. That is acceptable for an
// audit trail of deliveries that changed nothing; it is never done for
// effects.
type deliveryLog struct {
	db      *gorm.DB
	log     *slog.Logger
	dropped prometheus.Counter // rows that could not be written
	ch      chan queuedDelivery
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

type queuedDelivery struct {
	row      models.CallbackDelivery
	conflict bool
}

func newDeliveryLog(db *gorm.DB, log *slog.Logger, dropped prometheus.Counter) *deliveryLog {
	l := &deliveryLog{db: db, log: log, dropped: dropped, ch: make(chan queuedDelivery, deliveryQueue), stop: make(chan struct{})}
	l.wg.Add(1)
	go l.run()
	return l
}

// add queues a row; it never blocks the response.
func (l *deliveryLog) add(_ context.Context, d models.CallbackDelivery, conflict bool) {
	select {
	case l.ch <- queuedDelivery{row: d, conflict: conflict}:
	default:
		l.dropped.Add(1)
		l.log.Error("callback delivery row dropped: queue full", "provider", d.Provider,
			"request_id", d.RequestID, "outcome", d.Outcome)
	}
}

// close writes what is queued and stops.
func (l *deliveryLog) close() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

func (l *deliveryLog) run() {
	defer l.wg.Done()
	for {
		var first queuedDelivery
		select {
		case first = <-l.ch:
		case <-l.stop:
			l.drain()
			return
		}
		l.write(l.collect(first))
	}
}

// collect takes what is already queued behind first, up to a batch: at
// low load each row is written at once, under load batches grow while the
// previous one is being written.
func (l *deliveryLog) collect(first queuedDelivery) []queuedDelivery {
	batch := []queuedDelivery{first}
	for len(batch) < deliveryBatchMax {
		select {
		case q := <-l.ch:
			batch = append(batch, q)
		default:
			return batch
		}
	}
	return batch
}

func (l *deliveryLog) drain() {
	for {
		select {
		case q := <-l.ch:
			l.write(l.collect(q))
		default:
			return
		}
	}
}

// write inserts a batch and bumps the counters of its callbacks, in one
// transaction, retrying a few times before giving the batch up.
func (l *deliveryLog) write(batch []queuedDelivery) {
	rows := make([]models.CallbackDelivery, len(batch))
	type bump struct {
		n, conflicts int
		last         time.Time
	}
	bumps := map[int64]*bump{}
	for i, q := range batch {
		rows[i] = q.row
		if q.row.CallbackID == nil {
			continue
		}
		b := bumps[*q.row.CallbackID]
		if b == nil {
			b = &bump{}
			bumps[*q.row.CallbackID] = b
		}
		b.n++
		if q.conflict {
			b.conflicts++
		}
		if q.row.ReceivedAt.After(b.last) {
			b.last = q.row.ReceivedAt
		}
	}
	var err error
	for attempt := range deliveryRetries {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond) // back off from a database in trouble
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = l.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.CreateInBatches(&rows, deliveryBatchMax).Error; err != nil {
				return err
			}
			for id, b := range bumps {
				err := tx.Model(&models.PaymentCallback{}).Where("id = ?", id).Updates(map[string]any{
					"attempts":         gorm.Expr("attempts + ?", b.n),
					"conflict_count":   gorm.Expr("conflict_count + ?", b.conflicts),
					"last_received_at": gorm.Expr("greatest(last_received_at, ?)", b.last),
				}).Error
				if err != nil {
					return err
				}
			}
			return nil
		})
		cancel()
		if err == nil {
			return
		}
		for i := range rows {
			rows[i].ID = 0 // let the retry insert them afresh
		}
	}
	l.dropped.Add(float64(len(rows)))
	l.log.Error("callback delivery rows dropped: could not write them", "rows", len(rows), "error", err)
}
