package main

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestBulkSeed seeds a small batch, then a second one, and checks after
// each that the rows say what the plan decided for every order (its
// path), that the counts add up, and that the full audit (jobs included,
// live mode) is green.
func TestBulkSeed(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	planned := map[string]int{}
	seedOrders := func(n int) {
		t.Helper()
		// Small chunks, so that rows cross from one chunk into the next.
		sum, err := seed(context.Background(), db, batch{n: n, chunk: 200, ttl: config.DefaultOrderTTL}, testenv.LogWriter(t))
		if err != nil {
			t.Fatalf("seed %d orders: %v", n, err)
		}
		for p, k := range sum.ByPath {
			planned[p] += k
		}
		if got := pathCounts(t, db); !maps.Equal(got, planned) {
			t.Errorf("orders by path: %v in the database, %v planned", got, planned)
		}
	}

	seedOrders(1500)
	for _, p := range []string{pathPaid, pathFailed, pathExpiredEvent, pathExpiredJob, pathExpiredRej, pathCancelled} {
		if planned[p] == 0 {
			t.Errorf("no order took path %s in 1,500", p)
		}
	}
	checkBulk(t, db, 1500)
	checkTimeOrder(t, db)
	auditGreen(t, db)

	// A second run adds a batch: ids, keys and invoice numbers continue,
	// stock and the delivery rollup still add up.
	seedOrders(300)
	checkBulk(t, db, 1800)
	auditGreen(t, db)
	t.Logf("orders by path: %v", planned)
}

// TestBulkSeedCommand runs the command as `go -C loadtest run ./bulkseed`
// does, configured by DATABASE_URL.
func TestBulkSeedCommand(t *testing.T) {
	t.Parallel()
	dbURL := testenv.NewDatabaseURL(t)
	getenv := func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] }
	var out bytes.Buffer
	if err := run(context.Background(), []string{"bulkseed", "-orders=500"}, getenv, &out, testenv.LogWriter(t)); err != nil {
		t.Fatalf("bulkseed -orders=500: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "bulkseed: 500 orders") {
		t.Fatalf("bulkseed -orders=500 printed no summary:\n%s", out.String())
	}
	t.Log(out.String())
	db := testenv.OpenDB(t, dbURL)
	checkBulk(t, db, 500)
	auditGreen(t, db)
}

// TestBulkSeedIsOneTransaction makes the database refuse the job rows,
// the last table written: the seed fails and leaves nothing behind.
func TestBulkSeedIsOneTransaction(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	if err := db.Exec(`ALTER TABLE job_executions ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`).Error; err != nil {
		t.Fatal(err)
	}
	_, err := seed(context.Background(), db, batch{n: 300, chunk: defaultChunk, ttl: config.DefaultOrderTTL}, testenv.LogWriter(t))
	if err == nil || !strings.Contains(err.Error(), "refuse_all") {
		t.Fatalf("seed with job rows refused: %v, want the refusal", err)
	}
	for _, table := range []string{"products", "orders", "order_items", "stock_movements", "payment_callbacks",
		"callback_deliveries", "payments", "order_transitions", "outbox_messages", "outbound_emails", "invoices",
		"invoice_counters", "job_executions"} {
		var n int64
		if err := db.Raw(`SELECT count(*) FROM ` + table).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d rows after a failed seed, want none", table, n)
		}
	}
}

func TestBulkSeedRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"-orders=0"}, {"-orders=-1"}, {"-orders=x"}, {"-orders=5", "extra"}} {
		var stderr bytes.Buffer
		err := run(context.Background(), append([]string{"bulkseed"}, args...), func(string) string { return "" }, &bytes.Buffer{}, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("bulkseed %v: %v, want a usage error", args, err)
		}
		if !strings.Contains(stderr.String(), "usage: bulkseed") {
			t.Errorf("bulkseed %v printed no usage:\n%s", args, stderr.String())
		}
	}
}

// pathCounts says, from the rows, which path each order took.
func pathCounts(t *testing.T, db *gorm.DB) map[string]int {
	t.Helper()
	var rows []struct {
		Path string
		N    int
	}
	err := db.Raw(`
SELECT CASE
         WHEN o.status IN ('paid', 'failed', 'cancelled') THEN o.status
         WHEN o.status = 'pending' AND c.status = 'rejected' THEN 'pending_rej'
         WHEN o.status = 'pending' THEN 'pending'
         WHEN tr.cause = 'callback' THEN 'expired_event'
         WHEN tr.cause = 'expiry sweep' AND c.result = 'stale' AND j.status = 'failed' THEN 'expired_sweep'
         WHEN tr.cause = 'order:expire job' AND c.status = 'rejected' THEN 'expired_rej'
         WHEN tr.cause = 'order:expire job' AND c.result = 'stale' THEN 'expired_job'
         ELSE 'unknown'
       END AS path, count(*) AS n
FROM orders o
JOIN payment_callbacks c ON c.order_id = o.id
LEFT JOIN order_transitions tr ON tr.order_id = o.id
LEFT JOIN job_executions j ON j.idempotency_key = 'order:expire:' || o.id
GROUP BY 1`).Scan(&rows).Error
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range rows {
		got[r.Path] = r.N
	}
	return got
}

// checkBulk checks the counts of a database that holds n bulk orders and
// nothing else.
func checkBulk(t *testing.T, db *gorm.DB, n int64) {
	t.Helper()
	count := func(q string) int64 {
		t.Helper()
		var c int64
		if err := db.Raw(q).Scan(&c).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return c
	}
	byStatus := map[string]int64{}
	var rows []struct {
		Status string
		N      int64
	}
	if err := db.Raw(`SELECT status, count(*) AS n FROM orders GROUP BY status`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		byStatus[r.Status] = r.N
	}
	paid := byStatus["paid"]
	t.Logf("orders by status: %v", byStatus)

	exact := []struct {
		what      string
		got, want int64
	}{
		{"orders", count(`SELECT count(*) FROM orders`), n},
		{"callbacks", count(`SELECT count(*) FROM payment_callbacks`), n},
		{"orders with a callback", count(`SELECT count(DISTINCT order_id) FROM payment_callbacks`), n},
		{"succeeded payments", count(`SELECT count(*) FROM payments WHERE status = 'succeeded'`), paid},
		{"invoices", count(`SELECT count(*) FROM invoices`), paid},
		{"sent order_paid emails", count(`SELECT count(*) FROM outbound_emails WHERE status = 'sent' AND key LIKE 'order\_paid:%'`), paid},
		{"succeeded invoice jobs", count(`SELECT count(*) FROM job_executions WHERE status = 'succeeded' AND idempotency_key LIKE 'invoice:generate:%'`), paid},
		{"succeeded email jobs", count(`SELECT count(*) FROM job_executions WHERE status = 'succeeded' AND idempotency_key LIKE 'email:send:%'`), paid},
		{"dispatched invoice and email tasks", count(`SELECT count(*) FROM outbox_messages WHERE status = 'dispatched' AND task_type IN ('invoice:generate', 'email:send')`), 2 * paid},
		{"order:expire tasks", count(`SELECT count(*) FROM outbox_messages WHERE task_type = 'order:expire'`), n},
		{"transitions", count(`SELECT count(*) FROM order_transitions`), n - byStatus["pending"]},
		{"transitions by a callback, with its id", count(`SELECT count(*) FROM order_transitions t JOIN payment_callbacks c ON c.id = t.callback_id AND c.order_id = t.order_id WHERE t.cause = 'callback'`),
			count(`SELECT count(*) FROM order_transitions WHERE cause = 'callback'`)},
		{"orders whose id sorts before one created a millisecond earlier or more", count(`
SELECT count(*) FROM (SELECT date_trunc('milliseconds', created_at) < lag(date_trunc('milliseconds', created_at)) OVER (ORDER BY id) AS back FROM orders) x
WHERE back`), 0},
		{"callbacks whose attempts are not their deliveries", count(`SELECT count(*) FROM payment_callbacks c WHERE attempts <> (SELECT count(*) FROM callback_deliveries d WHERE d.callback_id = c.id)`), 0},
		{"callbacks whose last delivery is not their last_received_at", count(`SELECT count(*) FROM payment_callbacks c WHERE last_received_at <> (SELECT max(received_at) FROM callback_deliveries d WHERE d.callback_id = c.id)`), 0},
		{"first deliveries not at first_received_at", count(`SELECT count(*) FROM payment_callbacks c WHERE first_received_at <> (SELECT received_at FROM callback_deliveries d WHERE d.callback_id = c.id ORDER BY id LIMIT 1)`), 0},
		// Each kept body is searchable by path = value, as a server keeps it.
		{"kept signed bodies without their searchable copy", count(`SELECT count(*) FROM callback_deliveries WHERE (body IS NULL) <> (body_json IS NULL)
AND outcome NOT IN ('invalid_signature', 'unsupported_media_type')`), 0},
		{"searchable bodies of unsigned deliveries", count(`SELECT count(*) FROM callback_deliveries WHERE body_json IS NOT NULL
AND outcome IN ('invalid_signature', 'unsupported_media_type')`), 0},
		{"kept bodies without their hash", count(`SELECT count(*) FROM callback_deliveries WHERE (body IS NULL) <> (body_hash IS NULL)`), 0},
		{"searchable copies that are not their body", count(`SELECT count(*) FROM callback_deliveries WHERE body_json <> convert_from(body, 'UTF8')::jsonb`), 0},
		{"dispatched tasks not yet due", count(`SELECT count(*) FROM outbox_messages WHERE status = 'dispatched' AND process_at > now()`), 0},
		{"invoice tasks without the paying delivery's request id", count(`
SELECT count(*) FROM outbox_messages m JOIN payment_callbacks c ON m.task_id = 'invoice:generate:' || c.order_id
WHERE convert_from(m.payload, 'UTF8')::jsonb ->> 'request_id' IS DISTINCT FROM
      (SELECT request_id FROM callback_deliveries d WHERE d.callback_id = c.id AND d.outcome = 'processed')`), 0},
		// The rollup counts every delivery of the minutes it has closed.
		{"deliveries in delivery_counts", count(`SELECT coalesce(sum(deliveries), 0) FROM delivery_counts`),
			count(`SELECT count(*) FROM callback_deliveries WHERE received_at >= (SELECT min(minute) FROM delivery_counts) AND received_at < (SELECT done_until FROM rollup_marks)`)},
	}
	for _, c := range exact {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	if paid < n*3/4 {
		t.Errorf("%d of %d orders are paid, want most", paid, n)
	}
	for _, st := range []string{"failed", "expired", "cancelled"} {
		if byStatus[st] == 0 {
			t.Errorf("no %s order", st)
		}
	}
	if d := count(`SELECT count(*) FROM callback_deliveries`); d < 4*n || d > 6*n {
		t.Errorf("%d deliveries for %d callbacks, want about 5 each", d, n)
	}
	for _, q := range []string{
		`SELECT count(*) FROM callback_deliveries WHERE callback_id IS NULL`,
		`SELECT count(*) FROM callback_deliveries WHERE outcome = 'duplicate'`,
		`SELECT count(*) FROM callback_deliveries WHERE outcome = 'conflict'`,
		`SELECT count(*) FROM payment_callbacks WHERE status = 'rejected'`,
		`SELECT count(*) FROM orders WHERE created_at > now() - interval '1 hour'`,
		`SELECT count(*) FROM delivery_counts`,
	} {
		if count(q) == 0 {
			t.Errorf("%s: none", q)
		}
	}
	var ids []string
	if err := db.Raw(`SELECT id FROM orders ORDER BY random() LIMIT 20`).Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !models.ValidOrderID(id) {
			t.Errorf("order id %q is not ORD- and a ULID", id)
		}
	}
}

// checkTimeOrder checks that a database seeded once has every table's
// ids in the order of its rows' times, as the app writes them: across
// chunks too.
func checkTimeOrder(t *testing.T, db *gorm.DB) {
	t.Helper()
	for table, column := range map[string]string{
		"stock_movements": "created_at", "payment_callbacks": "first_received_at", "callback_deliveries": "received_at",
		"payments": "created_at", "order_transitions": "created_at", "outbox_messages": "created_at",
		"outbound_emails": "created_at", "invoices": "issued_at", "job_executions": "started_at",
	} {
		var back int64
		err := db.Raw(`SELECT count(*) FROM (SELECT ` + column + ` < lag(` + column + `) OVER (ORDER BY id) AS back FROM ` + table + `) x WHERE back`).
			Scan(&back).Error
		if err != nil {
			t.Fatal(err)
		}
		if back != 0 {
			t.Errorf("%s: %d rows have an earlier %s than the row before them", table, back, column)
		}
	}
	var gaps int64
	if err := db.Raw(`SELECT count(*) FROM (SELECT sequence < lag(sequence) OVER (ORDER BY issued_at, id) AS back FROM invoices) x WHERE back`).Scan(&gaps).Error; err != nil {
		t.Fatal(err)
	}
	if gaps != 0 {
		t.Errorf("%d invoices are numbered before one issued earlier", gaps)
	}
}

// auditGreen runs the full audit live, as `sekali verify
// --drain-timeout=0` does.
func auditGreen(t *testing.T, db *gorm.DB) {
	t.Helper()
	a := audit.New(db)
	r, err := a.Run(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || r.Settling != 0 {
		var b bytes.Buffer
		a.Print(&b, r)
		t.Fatalf("audit after the bulk seed (settling %d):\n%s", r.Settling, b.String())
	}
}

// TestBulkPlan checks the plan without a database: times in order and in
// the past, ids sorted by creation time, paths that fit the status, and
// units that are the items' sum.
func TestBulkPlan(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	const ttl = 15 * time.Minute
	const n = 20_000
	p := newPlanner(rand.New(rand.NewPCG(1, 2)), n, now, ttl)
	units := p.units()
	plan := make([]bulkOrder, n)
	for i := range plan {
		plan[i] = p.order(i)
	}
	paths := map[string]int{}
	items := map[string]int64{}
	refused := 0
	for i, o := range plan {
		paths[o.Path]++
		// The id's first 10 ULID characters are its creation millisecond;
		// within one the rest is random, as in the app.
		if i > 0 && (o.ID[:14] < plan[i-1].ID[:14] || o.Created.Before(plan[i-1].Created)) {
			t.Fatalf("order %d (%s, %s) does not sort after %s, %s", i, o.ID, o.Created, plan[i-1].ID, plan[i-1].Created)
		}
		if o.Created.Before(now.Add(-bulkSpan)) || o.Created.After(now.Add(-bulkNewest)) {
			t.Fatalf("%s created %s, outside the last %s", o.ID, o.Created, bulkSpan)
		}
		if !o.EventAt.After(o.Created) || o.EventAt.After(now.Add(-30*time.Second)) {
			t.Fatalf("%s (%s): event at %s, created %s", o.ID, o.Path, o.EventAt, o.Created)
		}
		switch {
		case o.Status == models.OrderPending:
			if !o.EndAt.IsZero() || !o.Expires.After(now) {
				t.Fatalf("%s pending, ended %s, expires %s", o.ID, o.EndAt, o.Expires)
			}
		case o.EndAt.Before(o.Created) || o.EndAt.After(now):
			t.Fatalf("%s (%s) ended at %s, created %s", o.ID, o.Path, o.EndAt, o.Created)
		case o.Status == models.OrderPaid && (o.EndAt.After(now.Add(-audit.SettleWindow-time.Minute)) || o.EndAt.After(o.Expires)):
			t.Fatalf("%s paid at %s, expires %s: too late for the live audit or after its expiry", o.ID, o.EndAt, o.Expires)
		case o.Status == models.OrderCancelled && !o.EndAt.Before(o.Expires):
			t.Fatalf("%s cancelled at %s, after its expiry %s", o.ID, o.EndAt, o.Expires)
		}
		if o.CallbackKind == models.ResultStale && !o.EventAt.After(o.EndAt) {
			t.Fatalf("%s: stale event at %s before the status change at %s", o.ID, o.EventAt, o.EndAt)
		}
		if len(o.Items) == 0 || !slices.IsSortedFunc(o.Items, func(a, b bulkItem) int { return strings.Compare(a.SKU, b.SKU) }) {
			t.Fatalf("%s: items %v", o.ID, o.Items)
		}
		for _, it := range o.Items {
			items[it.SKU] += it.Qty
		}
		// Refused deliveries come after their order, and before the next:
		// a chunk's rows are never older than the chunk.
		for _, at := range o.Refused {
			if at.Before(o.Created) || (i+1 < n && at.After(plan[i+1].Created)) {
				t.Fatalf("%s created %s: refused delivery at %s", o.ID, o.Created, at)
			}
		}
		refused += len(o.Refused)
	}
	for _, path := range []string{pathPaid, pathFailed, pathExpiredEvent, pathExpiredJob, pathExpiredRej, pathExpiredSweep,
		pathCancelled, pathPending, pathPendingRej} {
		if paths[path] == 0 {
			t.Errorf("no order took path %s in 20,000", path)
		}
	}
	if !maps.Equal(units, items) {
		t.Errorf("units drawn ahead %v, the orders' items %v", units, items)
	}
	if want := int(n * (bulkRefusedPerOrder + bulkErrorsPerOrder)); refused != want {
		t.Errorf("%d refused deliveries, want %d", refused, want)
	}
	t.Logf("paths: %v", paths)
}
