package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestBulkSeed seeds a small bulk batch, then a second one, and checks
// after each that the counts add up and that the full audit (jobs
// included, live mode) is green.
func TestBulkSeed(t *testing.T) {
	t.Parallel()
	dbURL := testenv.NewDatabaseURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "ADMIN_PASSWORD": "bulk-seed-test", "LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	seedBulkOrders := func(n int) {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), []string{"sekali", "seed", "--bulk-orders=" + strconv.Itoa(n)}, getenv, &out, logOutput(t)); err != nil {
			t.Fatalf("seed --bulk-orders=%d: %v\n%s", n, err, out.String())
		}
		if !strings.Contains(out.String(), "seed: bulk: "+strconv.Itoa(n)+" orders") {
			t.Fatalf("seed --bulk-orders=%d printed no summary:\n%s", n, out.String())
		}
		t.Log(out.String())
	}
	db := testenv.OpenDB(t, dbURL)

	seedBulkOrders(500)
	checkBulk(t, db, 500)
	verifyLive(t, db, getenv)

	// A second run adds a batch: ids, keys and invoice numbers continue,
	// stock and the delivery rollup still add up.
	seedBulkOrders(200)
	checkBulk(t, db, 700)
	verifyLive(t, db, getenv)
}

func TestBulkSeedRefusesNegative(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"sekali", "seed", "--bulk-orders=-1"},
		func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	if exitCode(err) != 2 {
		t.Fatalf("seed --bulk-orders=-1: %v, want a usage error (exit status 2)", err)
	}
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

// verifyLive runs the full audit live, as `sekali verify
// --drain-timeout=0` does, and the command itself.
func verifyLive(t *testing.T, db *gorm.DB, getenv func(string) string) {
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
	var out bytes.Buffer
	if err := run(context.Background(), []string{"sekali", "verify", "--drain-timeout=0"}, getenv, &out, logOutput(t)); err != nil {
		t.Fatalf("sekali verify --drain-timeout=0: %v\n%s", err, out.String())
	}
}

// TestBulkPlan checks the plan without a database: times in order and in
// the past, ids sorted by creation time, paths that fit the status.
func TestBulkPlan(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	const ttl = 15 * time.Minute
	plan := planBulk(rand.New(rand.NewPCG(1, 2)), 20_000, now, ttl)
	paths := map[string]int{}
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
		case o.Status == "pending":
			if !o.EndAt.IsZero() || !o.Expires.After(now) {
				t.Fatalf("%s pending, ended %s, expires %s", o.ID, o.EndAt, o.Expires)
			}
		case o.EndAt.Before(o.Created) || o.EndAt.After(now):
			t.Fatalf("%s (%s) ended at %s, created %s", o.ID, o.Path, o.EndAt, o.Created)
		case o.Status == "paid" && (o.EndAt.After(now.Add(-audit.SettleWindow-time.Minute)) || o.EndAt.After(o.Expires)):
			t.Fatalf("%s paid at %s, expires %s: too late for the live audit or after its expiry", o.ID, o.EndAt, o.Expires)
		case o.Status == "cancelled" && !o.EndAt.Before(o.Expires):
			t.Fatalf("%s cancelled at %s, after its expiry %s", o.ID, o.EndAt, o.Expires)
		}
		if o.CallbackKind == "stale" && !o.EventAt.After(o.EndAt) {
			t.Fatalf("%s: stale event at %s before the status change at %s", o.ID, o.EventAt, o.EndAt)
		}
		if len(o.Items) == 0 || !slices.IsSortedFunc(o.Items, func(a, b bulkItem) int { return strings.Compare(a.SKU, b.SKU) }) {
			t.Fatalf("%s: items %v", o.ID, o.Items)
		}
	}
	for _, p := range []string{pathPaid, pathFailed, pathExpiredEvent, pathExpiredJob, pathExpiredRej, pathExpiredSweep,
		pathCancelled, pathPending, pathPendingRej} {
		if paths[p] == 0 {
			t.Errorf("no order took path %s in 20,000", p)
		}
	}
	t.Logf("paths: %v", paths)
}
