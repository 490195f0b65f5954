package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/models"
)

// `sekali seed --bulk-orders=N` makes a database the size the admin
// console must stay fast on (N = 200,000: about 1,000,000 deliveries),
// with data that the integrity audit finds consistent: every row a real
// run of the app would have written for those orders, written set-based.
//
// Go decides, per order, what happened to it (its id from its creation
// time, status, event times, how often the gateway redelivered) and
// copies that plan into temporary tables; INSERT … SELECT statements
// fan it out into the real tables, in one transaction: a seed that fails
// leaves nothing behind. Running it again adds another batch the same
// way: order ids and callback keys are new, invoice numbers continue the
// year's counter, stock is adjusted by the batch's own movements, and
// the delivery rollup is recounted.

// Bulk data settings.
const (
	bulkSKUs = 50 // BULK-0001 … BULK-0050
	// bulkSpan is how far back orders go; bulkRecentShare of them are in
	// the last hour, so the dashboard has something to show.
	bulkSpan        = 30 * 24 * time.Hour
	bulkRecentShare = 0.015
	// bulkNewest is the age of the newest order: older than the live
	// audit's settle window and the rollup's, once paid.
	bulkNewest = 3 * time.Minute
	// bulkRefusedPerOrder deliveries were refused before their event was
	// known (bad signature, payload, type, size); bulkErrorsPerOrder
	// failed with a 503.
	bulkRefusedPerOrder = 0.45
	bulkErrorsPerOrder  = 0.001
	// bulkStockMargin is the stock each SKU keeps beyond a batch's orders.
	bulkStockMargin = 1500
	// bulkWorker names the worker in the generated job rows.
	bulkWorker = "bulk-seed"
)

// What happened to a bulk order. Each order has exactly one callback. The
// statements in writeBulk name these paths literally.
const (
	pathPaid         = "paid"          // 'paid' event processed → paid, invoice, email
	pathFailed       = "failed"        // 'failed' event processed → failed, stock released
	pathExpiredEvent = "expired_event" // 'expired' event processed → expired, stock released
	pathExpiredJob   = "expired_job"   // expired by its order:expire job; a later 'failed' event is stale
	pathExpiredRej   = "expired_rej"   // a 'paid' event with the wrong amount was rejected; then expired by its job
	pathExpiredSweep = "expired_sweep" // its expire job failed; the sweeper expired it; a later 'expired' event is stale
	pathCancelled    = "cancelled"     // a 'pending' event recorded the charge; then the customer cancelled
	pathPending      = "pending"       // a 'pending' event recorded the charge; still pending
	pathPendingRej   = "pending_rej"   // a 'paid' event with the wrong amount was rejected; still pending
)

// bulkOrder is the plan of one order.
type bulkOrder struct {
	ID, Email          string
	Created, Expires   time.Time
	Path, Status       string
	EventAt            time.Time // the callback's first delivery
	EndAt              time.Time // the status change; zero while pending
	CallbackKey, TxID  string
	EventStatus        string
	CallbackKind       string // processed, stale or rejected
	Dups, Conflicts    int    // further deliveries of the event
	InvoiceJobAttempts int
	Items              []bulkItem
}

type bulkItem struct {
	SKU string
	Qty int64
}

// bulkSummary is what a batch made.
type bulkSummary struct {
	Orders     int
	ByStatus   map[string]int
	Items      int
	Deliveries int64
}

// seedBulk generates n orders and everything around them, then rolls up
// the delivery counts and analyses the tables.
func seedBulk(ctx context.Context, db *gorm.DB, n int, ttl time.Duration, stdout io.Writer) error {
	start := time.Now()
	now := start.UTC().Truncate(time.Microsecond)
	rng := rand.New(rand.NewPCG(uint64(now.UnixNano()), 0x5e4a11))
	plan := planBulk(rng, n, now, ttl)
	planned := time.Now()

	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("seed: bulk: %w", err)
	}
	defer conn.Close()
	var sum bulkSummary
	var written time.Time
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the database driver is %T, not pgx", dc)
		}
		if err := pgx.BeginFunc(ctx, c.Conn(), func(tx pgx.Tx) error {
			var err error
			sum, err = writeBulk(ctx, tx, plan, now, n)
			return err
		}); err != nil {
			return err
		}
		written = time.Now()
		// VACUUM sets the visibility map, so that the dashboard's counts
		// are index-only scans; ANALYZE gives the planner the new sizes.
		_, err := c.Conn().Exec(ctx, `VACUUM (ANALYZE) products, orders, order_items, stock_movements, payments,
			payment_callbacks, callback_deliveries, order_transitions, invoices, invoice_counters, outbound_emails,
			outbox_messages, job_executions`)
		return err
	})
	if err != nil {
		return fmt.Errorf("seed: bulk: %w", err)
	}
	vacuumed := time.Now()

	minutes, err := stats.Rollup(ctx, db, time.Now())
	if err != nil {
		return fmt.Errorf("seed: bulk: %w", err)
	}
	if err := db.WithContext(ctx).Exec(`ANALYZE delivery_counts`).Error; err != nil {
		return fmt.Errorf("seed: bulk: %w", err)
	}
	done := time.Now()

	var parts []string
	for _, s := range slices.Sorted(maps.Keys(sum.ByStatus)) {
		parts = append(parts, fmt.Sprintf("%s %d", s, sum.ByStatus[s]))
	}
	fmt.Fprintf(stdout, "seed: bulk: %d orders (%s), %d order items, %d callbacks, %d deliveries (%.2f per order); products BULK-0001…%s\n",
		sum.Orders, strings.Join(parts, ", "), sum.Items, sum.Orders, sum.Deliveries,
		float64(sum.Deliveries)/float64(max(sum.Orders, 1)), bulkSKU(bulkSKUs))
	fmt.Fprintf(stdout, "seed: bulk: done in %s (plan %s, write %s, vacuum and analyse %s, roll up %d minutes %s)\n",
		round(done.Sub(start)), round(planned.Sub(start)), round(written.Sub(planned)), round(vacuumed.Sub(written)),
		minutes, round(done.Sub(vacuumed)))
	return nil
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// bulkSKU is the SKU of bulk product i (1-based) and bulkPrice its price.
func bulkSKU(i int) string      { return fmt.Sprintf("BULK-%04d", i) }
func bulkPrice(i int) int64     { return 25_000 * int64(1+(i*7)%20) }
func bulkCustomer(c int) string { return fmt.Sprintf("customer%06d@example.com", c) }

// planBulk decides what happened to each of n orders, in creation order.
func planBulk(rng *rand.Rand, n int, now time.Time, ttl time.Duration) []bulkOrder {
	newest := now.Add(-bulkNewest)
	hourAgo := now.Add(-time.Hour)
	oldest := now.Add(-bulkSpan)
	created := make([]time.Time, n)
	recent := max(1, int(math.Round(float64(n)*bulkRecentShare)))
	for i := range created {
		if i < recent {
			created[i] = between(rng, hourAgo, newest)
		} else {
			created[i] = between(rng, oldest, hourAgo)
		}
	}
	slices.SortFunc(created, func(a, b time.Time) int { return a.Compare(b) })
	// The shares of the paths and of the conflicts are kept exact, even in
	// a small batch, by drawing them from evenly spread sequences
	// (fractional parts of multiples of irrational numbers) rather than
	// independently.
	pathSeq, conflictSeq := evenly(rng, 0.6180339887498949), evenly(rng, 0.41421356237309515)

	customers := max(1, n/8)
	lim := now.Add(-30 * time.Second)    // no event is newer
	paidLim := now.Add(-2 * time.Minute) // nor a payment: the live audit and the rollup have settled it
	orders := make([]bulkOrder, n)
	for i, t := range created {
		o := &orders[i]
		o.Created = t
		o.Expires = t.Add(ttl)
		// The app's own ids: they sort by creation time (to the
		// millisecond), as the console's paging needs.
		o.ID = models.NewOrderID(t)
		o.Email = bulkCustomer(rng.IntN(customers))
		o.CallbackKey = "evt_" + randomText(rng, 22)
		o.TxID = "tx_" + randomText(rng, 20)
		o.Dups = rng.IntN(8)
		if conflictSeq() < 0.02 {
			o.Conflicts = 1 + rng.IntN(3)
		}
		o.InvoiceJobAttempts = 1
		if rng.Float64() < 0.01 {
			o.InvoiceJobAttempts = 2
		}
		o.Items = bulkItems(rng)

		// When an event before the expiry may come: soon after creation,
		// never after paidLim.
		early := func() time.Time {
			hi := minTime(t.Add(ttl*8/10), paidLim)
			return between(rng, minTime(t.Add(5*time.Second), hi), hi)
		}
		r := pathSeq()
		switch {
		case o.Expires.After(now): // still within its TTL
			switch {
			case r < 0.30:
				o.Path = pathPending
			case r < 0.40:
				o.Path = pathPendingRej
			case r < 0.90:
				o.Path = pathPaid
			case r < 0.95:
				o.Path = pathFailed
			default:
				o.Path = pathCancelled
			}
		default:
			switch {
			case r < 0.86:
				o.Path = pathPaid
			case r < 0.90:
				o.Path = pathFailed
			case r < 0.92:
				o.Path = pathExpiredEvent
			case r < 0.95:
				o.Path = pathExpiredJob
			case r < 0.96:
				o.Path = pathExpiredRej
			case r < 0.963:
				o.Path = pathExpiredSweep
			default:
				o.Path = pathCancelled
			}
			// Expiries that came too recently for their late events.
			if o.Expires.Add(15*time.Minute).After(now) && (o.Path == pathExpiredJob || o.Path == pathExpiredRej || o.Path == pathExpiredSweep) {
				o.Path = pathExpiredEvent
			}
		}
		switch o.Path {
		case pathPaid, pathFailed:
			o.Status, o.EventStatus, o.CallbackKind = o.Path, o.Path, "processed"
			o.EventAt = early()
			o.EndAt = o.EventAt
		case pathExpiredEvent:
			o.Status, o.EventStatus, o.CallbackKind = "expired", "expired", "processed"
			o.EventAt = minTime(t.Add(ttl*9/10), lim)
			o.EndAt = o.EventAt
		case pathExpiredJob:
			o.Status, o.EventStatus, o.CallbackKind = "expired", "failed", "stale"
			o.EndAt = o.Expires.Add(time.Duration(50+rng.IntN(1500)) * time.Millisecond)
			o.EventAt = minTime(between(rng, o.EndAt.Add(time.Second), o.EndAt.Add(10*time.Minute)), lim)
		case pathExpiredRej:
			o.Status, o.EventStatus, o.CallbackKind = "expired", "paid", "rejected"
			o.EventAt = early()
			o.EndAt = o.Expires.Add(time.Duration(50+rng.IntN(1500)) * time.Millisecond)
		case pathExpiredSweep:
			o.Status, o.EventStatus, o.CallbackKind = "expired", "expired", "stale"
			o.EndAt = o.Expires.Add(time.Duration(60+rng.IntN(120)) * time.Second)
			o.EventAt = minTime(between(rng, o.EndAt.Add(time.Second), o.EndAt.Add(10*time.Minute)), lim)
		case pathCancelled:
			o.Status, o.EventStatus, o.CallbackKind = "cancelled", "pending", "processed"
			o.EventAt = early()
			// Cancelled while it still held its stock.
			o.EndAt = between(rng, o.EventAt.Add(time.Second), maxTime(o.EventAt.Add(time.Second), minTime(o.Expires.Add(-time.Second), lim)))
		case pathPending:
			o.Status, o.EventStatus, o.CallbackKind = "pending", "pending", "processed"
			o.EventAt = early()
		case pathPendingRej:
			o.Status, o.EventStatus, o.CallbackKind = "pending", "paid", "rejected"
			o.EventAt = early()
		}
	}
	return orders
}

// bulkItems picks one to three different products, mostly one unit each.
func bulkItems(rng *rand.Rand) []bulkItem {
	k := 1
	switch r := rng.Float64(); {
	case r > 0.9:
		k = 3
	case r > 0.6:
		k = 2
	}
	picked := map[int]bool{}
	items := make([]bulkItem, 0, k)
	for len(items) < k {
		p := 1 + rng.IntN(bulkSKUs)
		if picked[p] {
			continue
		}
		picked[p] = true
		qty := int64(1)
		if rng.Float64() < 0.3 {
			qty = 2 + rng.Int64N(2)
		}
		items = append(items, bulkItem{SKU: bulkSKU(p), Qty: qty})
	}
	slices.SortFunc(items, func(a, b bulkItem) int { return cmp.Compare(a.SKU, b.SKU) })
	return items
}

// evenly returns the sequence frac(x0 + i·step), i = 0, 1, …, from a
// random x0: values in [0, 1) whose every run covers the interval evenly.
func evenly(rng *rand.Rand, step float64) func() float64 {
	x := rng.Float64()
	return func() float64 {
		v := x
		x = math.Mod(x+step, 1)
		return v
	}
}

func between(rng *rand.Rand, lo, hi time.Time) time.Time {
	if !hi.After(lo) {
		return lo
	}
	return lo.Add(time.Duration(rng.Int64N(int64(hi.Sub(lo))))).Truncate(time.Microsecond)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

const textAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

func randomText(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = textAlphabet[rng.IntN(len(textAlphabet))]
	}
	return string(b)
}

// writeBulk writes the plan in tx.
func writeBulk(ctx context.Context, tx pgx.Tx, plan []bulkOrder, now time.Time, n int) (bulkSummary, error) {
	sum := bulkSummary{Orders: len(plan), ByStatus: map[string]int{}}
	exec := func(what, q string, args ...any) error {
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if err := exec("settings", `SET LOCAL synchronous_commit = off; SET LOCAL work_mem = '256MB'; SET LOCAL jit = off`); err != nil {
		return sum, err
	}

	// Products: created once, priced once; a later batch reads their prices.
	var skus, names []string
	var prices []int64
	for i := 1; i <= bulkSKUs; i++ {
		skus = append(skus, bulkSKU(i))
		names = append(names, fmt.Sprintf("Bulk product %04d", i))
		prices = append(prices, bulkPrice(i))
	}
	if err := exec("products", `
INSERT INTO products (sku, name, price, currency, stock, created_at, updated_at)
SELECT sku, name, price, 'IDR', 0, $4, $4 FROM unnest($1::text[], $2::text[], $3::bigint[]) AS p(sku, name, price)
ON CONFLICT (sku) DO NOTHING`, skus, names, prices, now.Add(-bulkSpan-24*time.Hour)); err != nil {
		return sum, err
	}
	price := map[string]int64{}
	rows, err := tx.Query(ctx, `SELECT sku, price FROM products WHERE sku = ANY($1) AND currency = 'IDR'`, skus)
	if err != nil {
		return sum, err
	}
	for rows.Next() {
		var sku string
		var p int64
		if err := rows.Scan(&sku, &p); err != nil {
			return sum, err
		}
		price[sku] = p
	}
	if err := rows.Err(); err != nil {
		return sum, err
	}
	if len(price) != bulkSKUs {
		return sum, fmt.Errorf("products: %d of the %d BULK products are priced in IDR", len(price), bulkSKUs)
	}

	// The orders and their items, straight from the plan; the plan itself
	// into a temporary table for the statements below.
	if err := exec("temporary tables", `
CREATE TEMP TABLE bulk_plan (
    id text PRIMARY KEY, email text NOT NULL, created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL,
    path text NOT NULL, status text NOT NULL, event_at timestamptz NOT NULL, end_at timestamptz,
    callback_key text NOT NULL, tx_id text NOT NULL, event_status text NOT NULL, callback_kind text NOT NULL,
    dups int NOT NULL, conflicts int NOT NULL, invoice_attempts int NOT NULL, total bigint NOT NULL
) ON COMMIT DROP;
CREATE TEMP TABLE bulk_items (order_id text NOT NULL, sku text NOT NULL, qty bigint NOT NULL) ON COMMIT DROP`); err != nil {
		return sum, err
	}
	orderRows := make([][]any, 0, len(plan))
	planRows := make([][]any, 0, len(plan))
	var itemRows, bulkItemRows [][]any
	for _, o := range plan {
		var total int64
		for _, it := range o.Items {
			total += price[it.SKU] * it.Qty
			itemRows = append(itemRows, []any{o.ID, it.SKU, it.Qty, price[it.SKU]})
			bulkItemRows = append(bulkItemRows, []any{o.ID, it.SKU, it.Qty})
		}
		var paidAt, endAt any
		updated := o.Created
		if !o.EndAt.IsZero() {
			endAt, updated = o.EndAt, o.EndAt
		}
		if o.Status == string(models.OrderPaid) {
			paidAt = o.EndAt
		}
		orderRows = append(orderRows, []any{o.ID, o.Email, o.Status, total, "IDR", o.Expires, paidAt, o.Created, updated})
		planRows = append(planRows, []any{o.ID, o.Email, o.Created, o.Expires, o.Path, o.Status, o.EventAt, endAt,
			o.CallbackKey, o.TxID, o.EventStatus, o.CallbackKind, int32(o.Dups), int32(o.Conflicts), int32(o.InvoiceJobAttempts), total})
		sum.ByStatus[o.Status]++
	}
	sum.Items = len(itemRows)
	copies := []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"orders", []string{"id", "customer_email", "status", "total_amount", "currency", "expires_at", "paid_at", "created_at", "updated_at"}, orderRows},
		{"order_items", []string{"order_id", "sku", "qty", "unit_price"}, itemRows},
		{"bulk_plan", []string{"id", "email", "created_at", "expires_at", "path", "status", "event_at", "end_at",
			"callback_key", "tx_id", "event_status", "callback_kind", "dups", "conflicts", "invoice_attempts", "total"}, planRows},
		{"bulk_items", []string{"order_id", "sku", "qty"}, bulkItemRows},
	}
	for _, c := range copies {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
			return sum, fmt.Errorf("copy %s: %w", c.table, err)
		}
	}
	if err := exec("analyse the plan", `ANALYZE bulk_plan; ANALYZE bulk_items`); err != nil {
		return sum, err
	}

	// Each statement below reads the plan ($1 is now) and writes one table,
	// rows in time order, so that ids grow with time as the app's do.
	lim := now.Add(-30 * time.Second)
	steps := []struct {
		what string
		sql  string
		args []any
	}{
		{"stock movements", `
INSERT INTO stock_movements (sku, order_id, kind, qty, created_at)
SELECT sku, order_id, kind, qty, at FROM (
    -- an initial stock and a restock half-way, per SKU: the batch's reservations and a margin
    SELECT i.sku, NULL::text AS order_id, 'adjust' AS kind, ceil(sum(i.qty) * 0.6)::bigint + 1000 AS qty,
           min(p.created_at) - interval '1 hour' AS at
    FROM bulk_items i JOIN bulk_plan p ON p.id = i.order_id GROUP BY i.sku
    UNION ALL
    SELECT i.sku, NULL, 'adjust', sum(i.qty) - ceil(sum(i.qty) * 0.6)::bigint + $1::bigint - 1000,
           min(p.created_at) + (max(p.created_at) - min(p.created_at)) / 2
    FROM bulk_items i JOIN bulk_plan p ON p.id = i.order_id GROUP BY i.sku
    UNION ALL
    SELECT i.sku, i.order_id, 'reserve', i.qty, p.created_at FROM bulk_items i JOIN bulk_plan p ON p.id = i.order_id
    UNION ALL
    SELECT i.sku, i.order_id, 'release', i.qty, p.end_at FROM bulk_items i JOIN bulk_plan p ON p.id = i.order_id
    WHERE p.status IN ('failed', 'expired', 'cancelled')
) m ORDER BY at, order_id NULLS FIRST, sku`, []any{bulkStockMargin}},
		{"stock", `
UPDATE products pr SET stock = pr.stock + d.delta, updated_at = greatest(pr.updated_at, $1::timestamptz)
FROM (SELECT i.sku, $2::bigint + coalesce(sum(i.qty) FILTER (WHERE p.status IN ('failed', 'expired', 'cancelled')), 0) AS delta
      FROM bulk_items i JOIN bulk_plan p ON p.id = i.order_id GROUP BY i.sku) d
WHERE d.sku = pr.sku`, []any{now, bulkStockMargin}},
		// Every delivery of every event: the first (it applied the event,
		// found it stale, or was rejected), then the gateway's retries on
		// its schedule (duplicates, or rejected again), then the
		// conflicting ones; and the refused deliveries of no known event.
		{"deliveries (plan)", `
CREATE TEMP TABLE bulk_deliveries ON COMMIT DROP AS
SELECT p.id AS order_id, p.event_at AS received_at,
       CASE p.callback_kind WHEN 'rejected' THEN 'rejected' ELSE p.callback_kind END AS outcome,
       CASE p.callback_kind WHEN 'rejected' THEN 422 ELSE 200 END AS code,
       CASE p.callback_kind WHEN 'rejected' THEN 2 + floor(random() * 15)::int ELSE 3 + floor(random() * 40)::int END AS duration_ms
FROM bulk_plan p
UNION ALL
SELECT p.id,
       CASE WHEN p.event_at + r.delay <= $2::timestamptz THEN p.event_at + r.delay
            ELSE p.event_at + greatest($2::timestamptz - p.event_at, interval '0') * r.r END,
       CASE p.callback_kind WHEN 'rejected' THEN 'rejected' ELSE 'duplicate' END,
       CASE p.callback_kind WHEN 'rejected' THEN 422 ELSE 200 END,
       floor(random() * 4)::int
FROM bulk_plan p
CROSS JOIN LATERAL (
    SELECT (ARRAY[0.2, 5, 300, 1800, 7200, 18000, 36000, 86400])[k] * (0.8 + 0.4 * random()) * interval '1 second' AS delay,
           random() AS r
    FROM generate_series(1, p.dups) k) r
UNION ALL
SELECT p.id, least(p.event_at + (k * 20 + random() * 40) * interval '1 second', greatest($2::timestamptz, p.event_at)),
       'conflict', 409, floor(random() * 4)::int
FROM bulk_plan p CROSS JOIN LATERAL generate_series(1, p.conflicts) k
UNION ALL
SELECT NULL, x.at,
       CASE WHEN x.r < 0.002 THEN 'error' WHEN x.r < 0.6 THEN 'invalid_signature' WHEN x.r < 0.75 THEN 'invalid_payload'
            WHEN x.r < 0.87 THEN 'missing_field' WHEN x.r < 0.95 THEN 'unsupported_media_type' ELSE 'too_large' END,
       CASE WHEN x.r < 0.002 THEN 503 WHEN x.r < 0.6 THEN 401 WHEN x.r < 0.75 THEN 400
            WHEN x.r < 0.87 THEN 422 WHEN x.r < 0.95 THEN 415 ELSE 413 END,
       floor(random() * 3)::int
FROM (SELECT CASE WHEN random() < $3::float8 THEN $1::timestamptz - interval '3 minutes' - random() * interval '57 minutes'
                  ELSE $1::timestamptz - interval '1 hour' - random() * ($4::interval - interval '1 hour') END AS at,
             random() AS r
      FROM generate_series(1, $5::int)) x`,
			[]any{now, lim, bulkRecentShare, bulkSpan, int(float64(n) * (bulkRefusedPerOrder + bulkErrorsPerOrder))}},
		{"callbacks", `
CREATE TEMP TABLE bulk_callbacks (id bigint NOT NULL, order_id text PRIMARY KEY) ON COMMIT DROP;
WITH d AS (
    SELECT order_id, count(*) AS attempts, count(*) FILTER (WHERE outcome = 'conflict') AS conflicts, max(received_at) AS last
    FROM bulk_deliveries WHERE order_id IS NOT NULL GROUP BY order_id
), ins AS (
    INSERT INTO payment_callbacks (provider, idempotency_key, payload_hash, order_id, transaction_id, event_status, amount, currency,
                                   status, result, conflict_count, response_code, attempts, first_received_at, last_received_at, processed_at)
    SELECT 'sandbox', p.callback_key,
           encode(sha256(convert_to(format('{"currency":"IDR","order_id":"%s","paid_amount":%s,"payment_status":"%s","transaction_id":"%s"}',
                                           p.id, a.amount, p.event_status, p.tx_id), 'UTF8')), 'hex'),
           p.id, p.tx_id, p.event_status, a.amount, 'IDR',
           CASE p.callback_kind WHEN 'rejected' THEN 'rejected' ELSE 'processed' END,
           CASE p.callback_kind WHEN 'rejected' THEN 'amount_mismatch' ELSE p.callback_kind END,
           d.conflicts, CASE p.callback_kind WHEN 'rejected' THEN 422 ELSE 200 END, d.attempts, p.event_at, d.last,
           CASE WHEN p.callback_kind <> 'rejected' THEN p.event_at END
    FROM bulk_plan p
    JOIN d ON d.order_id = p.id
    CROSS JOIN LATERAL (SELECT CASE p.callback_kind WHEN 'rejected' THEN p.total + 1000 ELSE p.total END AS amount) a
    ORDER BY p.event_at, p.id
    RETURNING id, order_id
)
INSERT INTO bulk_callbacks SELECT id, order_id FROM ins`, nil},
		{"deliveries", `
INSERT INTO callback_deliveries (callback_id, provider, received_at, outcome, response_code, duration_ms, remote_addr, request_id)
SELECT c.id, 'sandbox', d.received_at, d.outcome, d.code, d.duration_ms,
       CASE WHEN d.outcome = 'invalid_signature' THEN '198.51.100.' || (1 + floor(random() * 40)::int)
            ELSE '10.20.0.' || (1 + floor(random() * 4)::int) END,
       md5(random()::text)
FROM bulk_deliveries d LEFT JOIN bulk_callbacks c ON c.order_id = d.order_id
ORDER BY d.received_at`, nil},
		{"payments", `
INSERT INTO payments (provider, provider_reference, order_id, amount, currency, status, created_at, updated_at)
SELECT 'sandbox', p.tx_id, p.id, p.total, 'IDR',
       CASE p.path WHEN 'paid' THEN 'succeeded' WHEN 'failed' THEN 'failed' WHEN 'expired_event' THEN 'expired' ELSE 'pending' END,
       p.event_at, p.event_at
FROM bulk_plan p WHERE p.path IN ('paid', 'failed', 'expired_event', 'pending', 'cancelled')
ORDER BY p.event_at, p.id`, nil},
		{"order transitions", `
INSERT INTO order_transitions (order_id, from_status, to_status, cause, callback_id, created_at)
SELECT p.id, 'pending', p.status, t.cause, CASE WHEN t.cause = 'callback' THEN c.id END, p.end_at
FROM bulk_plan p
JOIN bulk_callbacks c ON c.order_id = p.id
CROSS JOIN LATERAL (SELECT CASE p.path WHEN 'expired_job' THEN 'order:expire job' WHEN 'expired_rej' THEN 'order:expire job'
                                       WHEN 'expired_sweep' THEN 'expiry sweep' WHEN 'cancelled' THEN 'customer cancel'
                                       ELSE 'callback' END AS cause) t
WHERE p.status <> 'pending'
ORDER BY p.end_at, p.id`, nil},
		// The tasks: every order's expiry (handed to the queue when due),
		// and the invoice and email of every paid order.
		{"outbox", `
INSERT INTO outbox_messages (task_type, payload, task_id, queue, process_at, status, attempts, last_error, created_at, dispatched_at)
SELECT task_type, convert_to(payload, 'UTF8'), task_id, queue, process_at,
       CASE WHEN process_at <= $1::timestamptz THEN 'dispatched' ELSE 'pending' END,
       CASE WHEN process_at <= $1 THEN 1 ELSE 0 END, '', created_at,
       CASE WHEN process_at <= $1 THEN least(process_at + interval '30 milliseconds', $1) END
FROM (
    SELECT 'order:expire' AS task_type, format('{"order_id":"%s"}', p.id) AS payload, 'order:expire:' || p.id AS task_id,
           'default' AS queue, p.expires_at AS process_at, p.created_at
    FROM bulk_plan p
    UNION ALL
    SELECT 'invoice:generate', format('{"order_id":"%s"}', p.id), 'invoice:generate:' || p.id, 'critical', p.end_at, p.end_at
    FROM bulk_plan p WHERE p.path = 'paid'
    UNION ALL
    SELECT 'email:send', format('{"template":"order_paid","order_id":"%s"}', p.id), 'email:send:order_paid:' || p.id, 'default', p.end_at, p.end_at
    FROM bulk_plan p WHERE p.path = 'paid'
) t ORDER BY created_at, task_id`, []any{now}},
		{"emails", `
INSERT INTO outbound_emails (key, message_id, "to", subject, body, status, attempts, last_error, sent_at, created_at)
SELECT 'order_paid:' || p.id,
       encode(substring(sha256(convert_to('order_paid:' || p.id, 'UTF8')) FROM 1 FOR 16), 'hex') || '@sekali.local',
       p.email, 'Payment received for order ' || p.id,
       format(E'Thank you! We received your payment of %s IDR for order %s.\n', p.total, p.id),
       'sent', 1, '', p.end_at + interval '250 milliseconds', p.end_at + interval '70 milliseconds'
FROM bulk_plan p WHERE p.path = 'paid'
ORDER BY p.end_at, p.id`, nil},
		// Invoices last but one: the counters stay locked until the
		// commit, and numbers continue each year's counter without a gap.
		{"invoices", `
LOCK TABLE invoice_counters IN EXCLUSIVE MODE;
INSERT INTO invoices (order_id, number, year, sequence, amount, currency, issued_at)
SELECT id, format('INV-%s-%s', year, lpad(seq::text, 6, '0')), year, seq, total, 'IDR', issued_at
FROM (
    SELECT p.id, p.total, i.issued_at, i.year,
           coalesce(c.last, 0) + row_number() OVER (PARTITION BY i.year ORDER BY i.issued_at, p.id) AS seq
    FROM bulk_plan p
    CROSS JOIN LATERAL (SELECT p.end_at + (p.invoice_attempts - 1) * interval '10 seconds' + interval '90 milliseconds' AS issued_at) i0
    CROSS JOIN LATERAL (SELECT i0.issued_at, extract(year FROM i0.issued_at AT TIME ZONE 'UTC')::int AS year) i
    LEFT JOIN invoice_counters c ON c.year = i.year
    WHERE p.path = 'paid'
) x ORDER BY issued_at, id;
INSERT INTO invoice_counters (year, last)
SELECT i.year, max(i.sequence) FROM invoices i JOIN bulk_plan p ON p.id = i.order_id GROUP BY i.year
ON CONFLICT (year) DO UPDATE SET last = excluded.last`, nil},
		// The job runs: each succeeded once (a few invoice jobs on their
		// second attempt); the expiry job of a swept order failed.
		{"jobs", `
INSERT INTO job_executions (idempotency_key, queue_name, external_job_id, business_key, status, attempts, fence, worker_id,
                            locked_until, started_at, finished_at, last_error, result_hash)
SELECT key, queue, key, order_id, status, attempts, attempts, $2::text || ':' || (1 + abs(hashtext(key)) % 2), NULL,
       started_at, finished_at, last_error, CASE WHEN result = '' THEN '' ELSE encode(sha256(convert_to(result, 'UTF8')), 'hex') END
FROM (
    SELECT 'invoice:generate:' || p.id AS key, 'critical' AS queue, p.id AS order_id, 'succeeded' AS status,
           p.invoice_attempts AS attempts, i.issued_at - interval '30 milliseconds' AS started_at,
           i.issued_at + interval '5 milliseconds' AS finished_at, '' AS last_error, i.number AS result
    FROM bulk_plan p JOIN invoices i ON i.order_id = p.id WHERE p.path = 'paid'
    UNION ALL
    SELECT 'email:send:order_paid:' || p.id, 'default', p.id, 'succeeded', 1,
           p.end_at + interval '70 milliseconds', p.end_at + interval '255 milliseconds', '',
           encode(substring(sha256(convert_to('order_paid:' || p.id, 'UTF8')) FROM 1 FOR 16), 'hex') || '@sekali.local'
    FROM bulk_plan p WHERE p.path = 'paid'
    UNION ALL
    SELECT 'order:expire:' || p.id, 'default', p.id,
           CASE p.path WHEN 'expired_sweep' THEN 'failed' ELSE 'succeeded' END,
           CASE p.path WHEN 'expired_sweep' THEN 3 ELSE 1 END,
           p.expires_at + interval '40 milliseconds',
           CASE p.path WHEN 'expired_sweep' THEN p.expires_at + interval '45 seconds'
                       WHEN 'expired_job' THEN p.end_at WHEN 'expired_rej' THEN p.end_at
                       ELSE p.expires_at + interval '60 milliseconds' END,
           CASE p.path WHEN 'expired_sweep' THEN 'context deadline exceeded' ELSE '' END,
           CASE p.path WHEN 'expired_sweep' THEN '' WHEN 'expired_job' THEN 'expired' WHEN 'expired_rej' THEN 'expired'
                       ELSE 'no longer pending' END
    FROM bulk_plan p WHERE p.expires_at + interval '60 milliseconds' <= $1::timestamptz
) j ORDER BY started_at, key`, []any{now, bulkWorker}},
		// The rollup counts only the minutes past its mark: take the mark
		// back, with the batch, so that the minutes the batch wrote into
		// are counted again (a minute's count is recomputed from the rows,
		// never added to).
		{"rollup mark", `UPDATE rollup_marks SET done_until = least(done_until, $1::timestamptz)`, []any{now.Add(-bulkSpan)}},
	}
	for _, s := range steps {
		if err := exec(s.what, s.sql, s.args...); err != nil {
			return sum, err
		}
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM bulk_deliveries`).Scan(&sum.Deliveries); err != nil {
		return sum, err
	}
	return sum, nil
}
