package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestBehindPgBouncer runs `sekali serve` with every role through a
// PgBouncer of its own in transaction pooling mode (DB_PGBOUNCER=true):
// the app's 20 pooled connections share 4 server connections, so a
// statement prepared in one transaction would be gone, or someone else's,
// in the next. The relay LISTENs and `sekali migrate` runs on the direct
// DATABASE_LISTEN_URL. A concurrent duplicate storm of paid callbacks,
// and the invoice and email jobs it causes, must have one effect per
// event, and the audit (itself through the pooler) must be green.
func TestBehindPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole app behind a PgBouncer of its own: make test runs it")
	}
	t.Parallel()
	const paidOrders, copies, poolSize = 40, 5, 4
	const price = 20000
	direct := testenv.NewDatabaseURL(t)
	bouncer := testenv.StartPgBouncer(t, direct, poolSize)
	listenURL := withQuery(t, direct, "application_name", "sekali-direct") // to tell its sessions apart
	a := startApp(t, map[string]string{
		"DATABASE_URL":        bouncer.URL,
		"DATABASE_LISTEN_URL": listenURL,
		"DB_PGBOUNCER":        "true",
		"DB_MAX_CONNS":        "20",
	})

	// Migrations take a session-level advisory lock: they run on the
	// direct URL, and need no other (here DATABASE_URL leads nowhere).
	migrateEnv := func(k string) string {
		if k == "DATABASE_URL" {
			return "postgres://postgres@127.0.0.1:1/nowhere?sslmode=disable"
		}
		return a.getenv(k)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"sekali", "migrate", "up"}, migrateEnv, &out, logOutput(t)); err != nil {
		t.Fatalf("sekali migrate up: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "nothing to do") {
		t.Fatalf("sekali migrate up: %s", out.String())
	}
	testenv.Eventually(t, "the relay to LISTEN on the direct connection", func() bool {
		return a.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = 'sekali-direct' AND query = 'LISTEN outbox_messages'`) == 1
	})

	sku := a.newProduct(t, price, paidOrders)
	ids := make([]string, paidOrders)
	concurrently(paidOrders, func(i int) {
		r := a.postOrder(t, randomKey(), `{"customer_email":"buyer@example.com","items":[{"sku":"`+sku+`","qty":1}]}`)
		if r.Status != http.StatusCreated {
			t.Errorf("create order: %d %s", r.Status, r.Body)
		}
		ids[i] = r.str("id")
	})
	if t.Failed() {
		t.FailNow()
	}
	got := newResults()
	concurrently(paidOrders*copies, func(i int) {
		id := ids[i/copies]
		got.add(a.callback(t, "evt_paid_"+id, testenv.SandboxBody(id, "tx-"+id, models.EventPaid, price)))
	})
	if got.counts["processed"] != paidOrders || got.counts["duplicate"] != paidOrders*(copies-1) || got.status[200] != paidOrders*copies {
		t.Fatalf("callbacks: results %v, statuses %v; want %d processed and %d duplicate, all 200",
			got.counts, got.status, paidOrders, paidOrders*(copies-1))
	}
	testenv.Eventually(t, "an invoice and a sent email for every paid order", func() bool {
		return a.count(t, "SELECT count(*) FROM invoices") == paidOrders &&
			a.count(t, "SELECT count(*) FROM outbound_emails WHERE status = 'sent'") == paidOrders
	})

	a.expectCounts(t, []countCheck{
		{"paid orders", "SELECT count(*) FROM orders WHERE status = 'paid'", paidOrders},
		{"succeeded payments", "SELECT count(*) FROM payments WHERE status = 'succeeded'", paidOrders},
		{"stock left", "SELECT stock FROM products WHERE sku = '" + sku + "'", 0},
		{"invoiced orders", "SELECT count(DISTINCT order_id) FROM invoices", paidOrders},
		{"highest invoice number", "SELECT max(sequence) FROM invoices", paidOrders},
		{"outbound emails", "SELECT count(*) FROM outbound_emails", paidOrders},
		{"jobs run more than once", "SELECT count(*) FROM job_executions WHERE attempts > 1", 0},
	})
	a.eventually(t, paidOrders*copies, "SELECT count(*) FROM callback_deliveries")
	// The pooler really pooled: the app's connections shared poolSize
	// server connections (the LISTEN and the test's own reads are direct).
	if n := a.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND backend_type = 'client backend' AND application_name <> 'sekali-direct'`); n > poolSize {
		t.Errorf("server connections through the pooler = %d, want at most %d", n, poolSize)
	}
	a.verify(t) // through the pooler too: DB_PGBOUNCER is in the app's environment
}

// withQuery returns rawURL with the query parameter key set to value.
func withQuery(t *testing.T, rawURL, key, value string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
