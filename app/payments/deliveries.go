package payments

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/store"
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
	lost    atomic.Int64       // the same, for the console's dashboard
	kept    atomic.Int64       // bytes of bodies and headers queued (maxQueuedBodyBytes)
	ch      chan queuedDelivery
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

type queuedDelivery struct {
	row      models.CallbackDelivery
	conflict bool
	kept     int64 // bytes of the row's body and headers
}

// newDeliveryLog starts the log with room for size rows (deliveryQueue).
func newDeliveryLog(db *gorm.DB, log *slog.Logger, dropped prometheus.Counter, size int) *deliveryLog {
	l := &deliveryLog{db: db, log: log, dropped: dropped, ch: make(chan queuedDelivery, size), stop: make(chan struct{})}
	l.wg.Add(1)
	go l.run()
	return l
}

// add queues a row; it never blocks the response. A row whose body would
// take the queue's kept bytes over maxQueuedBodyBytes goes without its
// body and headers, so that a storm of large bodies cannot fill memory.
func (l *deliveryLog) add(_ context.Context, d models.CallbackDelivery, conflict bool) {
	kept := int64(len(d.Body) + len(d.Headers) + len(d.BodyJSON))
	if kept > 0 && l.kept.Add(kept) > maxQueuedBodyBytes {
		l.kept.Add(-kept)
		d.Body, d.Headers, d.BodyJSON, d.BodyHash, kept = nil, nil, nil, nil, 0
	}
	select {
	case l.ch <- queuedDelivery{row: d, conflict: conflict, kept: kept}:
	default:
		l.kept.Add(-kept)
		l.dropped.Add(1)
		l.lost.Add(1)
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

// write copies a batch into callback_deliveries and bumps the counters of
// its callbacks, in one transaction, retrying a few times before giving
// the batch up. COPY, not a multi-row INSERT: the server builds no
// statement of 4,000 parameters, with 0.39× the allocations, and the
// batch takes 0.85× the time (BenchmarkDeliveryRows, docs/performance.md).
func (l *deliveryLog) write(batch []queuedDelivery) {
	defer func() {
		for _, q := range batch {
			l.kept.Add(-q.kept)
		}
	}()
	rows := make([][]any, len(batch))
	bumps := map[int64]*bump{}
	for i, q := range batch {
		d := q.row
		rows[i] = []any{d.CallbackID, d.Provider, d.ReceivedAt, d.Outcome, d.ResponseCode, d.DurationMS, d.RemoteAddr, d.RequestID, d.TraceID, d.Note,
			nullText(d.Headers), d.Body, nullText(d.BodyJSON), d.BodyHash}
		if d.CallbackID == nil {
			continue
		}
		b := bumps[*d.CallbackID]
		if b == nil {
			b = &bump{id: *d.CallbackID}
			bumps[b.id] = b
		}
		b.n++
		if q.conflict {
			b.conflicts++
		}
		if d.ReceivedAt.After(b.last) {
			b.last = d.ReceivedAt
		}
	}
	// One order of row locks for every writer, so that two processes'
	// batches never deadlock on the same callbacks.
	ordered := slices.SortedFunc(maps.Values(bumps), func(a, b *bump) int { return cmp.Compare(a.id, b.id) })
	var err error
	for attempt := range deliveryRetries {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond) // back off from a database in trouble
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = store.PgxTransaction(ctx, l.db, func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"callback_deliveries"}, deliveryColumns, pgx.CopyFromRows(rows))
			if err != nil {
				return err
			}
			for _, b := range ordered {
				_, err := tx.Exec(ctx, `UPDATE payment_callbacks SET attempts = attempts + $1, conflict_count = conflict_count + $2,
    last_received_at = greatest(last_received_at, $3) WHERE id = $4`, b.n, b.conflicts, b.last, b.id)
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
	}
	l.dropped.Add(float64(len(rows)))
	l.lost.Add(int64(len(rows)))
	l.log.Error("callback delivery rows dropped: could not write them", "rows", len(rows), "error", err)
}

// deliveryColumns are the columns write copies, in the order of its rows.
var deliveryColumns = []string{"callback_id", "provider", "received_at", "outcome", "response_code", "duration_ms", "remote_addr", "request_id", "trace_id", "note",
	"headers", "body", "body_json", "body_hash"}

// nullText is JSON b as a jsonb parameter: its text, or NULL when there
// is none.
func nullText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// bump is what one batch adds to one callback's counters.
type bump struct {
	id           int64
	n, conflicts int
	last         time.Time
}
