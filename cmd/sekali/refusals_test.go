package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestRefusedDeliveriesChangeNothing: each delivery refused before its
// event is known is answered with its own status, writes no
// payment_callbacks row, changes no state, and leaves one audit row.
func TestRefusedDeliveriesChangeNothing(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	good := testenv.SandboxBody(id, "tx-r", models.EventPaid, 150000)
	now := time.Now()
	signed := func(body []byte, at time.Time) http.Header { return testenv.SandboxHeaders("evt_refused", body, at) }
	wrongSecret := stdwebhooks.Headers([]byte("not our key"), "evt_refused", now, good)
	wrongSecret.Set("Content-Type", "application/json")
	unsigned := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"evt_refused"}}
	textPlain := signed(good, now)
	textPlain.Set("Content-Type", "text/plain")
	huge := []byte(`{"order_id":"` + id + `","pad":"` + strings.Repeat("x", 64<<10) + `"}`)

	tests := []struct {
		name   string
		header http.Header
		body   []byte
		status int
		result string
	}{
		{"body over 64 KiB", signed(huge, now), huge, 413, "too_large"},
		{"not JSON content type", textPlain, good, 415, "unsupported_media_type"},
		{"no signature", unsigned, good, 401, "invalid_signature"},
		{"wrong secret", wrongSecret, good, 401, "invalid_signature"},
		{"signed 6 minutes ago", signed(good, now.Add(-6*time.Minute)), good, 401, "invalid_signature"},
		{"signed 6 minutes ahead", signed(good, now.Add(6*time.Minute)), good, 401, "invalid_signature"},
		{"tampered body", signed(good, now), bytes.Replace(good, []byte("150000"), []byte("1"), 1), 401, "invalid_signature"},
		{"malformed JSON", signed([]byte(`{"order_id":`), now), []byte(`{"order_id":`), 400, "invalid_payload"},
		{"missing field", signed([]byte(`{"order_id":"`+id+`"}`), now), []byte(`{"order_id":"` + id + `"}`), 422, "missing_field"},
		{"mistyped field", signed(bytes.Replace(good, []byte("150000"), []byte(`"150000"`), 1), now),
			bytes.Replace(good, []byte("150000"), []byte(`"150000"`), 1), 422, "missing_field"},
		{"unknown status", signed(bytes.Replace(good, []byte(`"paid"`), []byte(`"settled"`), 1), now),
			bytes.Replace(good, []byte(`"paid"`), []byte(`"settled"`), 1), 422, "missing_field"},
	}
	for i, tt := range tests {
		r := a.do(t, "POST", "/callbacks/sandbox", tt.header, tt.body)
		if r.Status != tt.status || r.str("result") != tt.result || r.str("code") != tt.result {
			t.Errorf("%s: %d %s; want %d with result and code %s", tt.name, r.Status, r.Body, tt.status, tt.result)
		}
		a.eventually(t, int64(i+1), "SELECT count(*) FROM callback_deliveries")
		if n := a.count(t, "SELECT count(*) FROM callback_deliveries WHERE callback_id IS NULL AND outcome = ? AND response_code = ?", tt.result, tt.status); n < 1 {
			t.Errorf("%s: no callback_deliveries row with outcome %s", tt.name, tt.result)
		}
	}
	if n := a.count(t, "SELECT count(*) FROM payment_callbacks"); n != 0 {
		t.Fatalf("payment_callbacks = %d, want 0", n)
	}
	if n := a.count(t, "SELECT count(*) FROM payments"); n != 0 {
		t.Fatalf("payments = %d, want 0", n)
	}
	if o := a.order(t, id); o.Status != models.OrderPending || a.stock(t, sku) != 4 {
		t.Fatalf("order %s, stock %d; want pending and 4", o.Status, a.stock(t, sku))
	}
	// The same event, now sent properly, is processed.
	if r := a.callback(t, "evt_refused", good); r.str("result") != "processed" {
		t.Fatalf("valid delivery after the refusals: %d %s", r.Status, r.Body)
	}
	a.verify(t)
}

// TestRejectedEventIsEvaluatedAgain: a paid event with the wrong amount,
// or for an order that does not exist yet, is recorded as rejected (422)
// and changes nothing; a later delivery of the same event is judged anew.
func TestRejectedEventIsEvaluatedAgain(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})

	wrongAmount := testenv.SandboxBody(id, "tx-amount", models.EventPaid, 149999)
	for range 2 {
		r := a.callback(t, "evt_amount", wrongAmount)
		if r.Status != 422 || r.str("result") != "rejected" || r.str("reason") != "amount_mismatch" {
			t.Fatalf("wrong amount: %d %s; want 422 rejected amount_mismatch", r.Status, r.Body)
		}
	}
	wrongCurrency := bytes.Replace(testenv.SandboxBody(id, "tx-cur", models.EventPaid, 150000), []byte("IDR"), []byte("USD"), 1)
	if r := a.callback(t, "evt_currency", wrongCurrency); r.Status != 422 || r.str("reason") != "currency_mismatch" {
		t.Fatalf("wrong currency: %d %s; want 422 currency_mismatch", r.Status, r.Body)
	}
	if o := a.order(t, id); o.Status != models.OrderPending || len(o.Payments) != 0 {
		t.Fatalf("after rejections: order %s with %d payments; want pending, none", o.Status, len(o.Payments))
	}
	if n := a.count(t, "SELECT attempts FROM payment_callbacks WHERE idempotency_key = 'evt_amount' AND status = 'rejected' AND result = 'amount_mismatch'"); n != 2 {
		t.Fatalf("rejected row attempts = %d, want 2", n)
	}

	unknown := testenv.SandboxBody("ORD-01JUNKNOWNUNKNOWNUNKNOWN0", "tx-u", models.EventPaid, 1)
	if r := a.callback(t, "evt_unknown", unknown); r.Status != 422 || r.str("reason") != "unknown_order" {
		t.Fatalf("unknown order: %d %s; want 422 unknown_order", r.Status, r.Body)
	}

	// A rejected event whose order now accepts it is processed on redelivery.
	a.DB.Exec("UPDATE orders SET total_amount = 149999 WHERE id = ?", id)
	if r := a.callback(t, "evt_amount", wrongAmount); r.Status != 200 || r.str("result") != "processed" {
		t.Fatalf("redelivery after the order changed: %d %s; want processed", r.Status, r.Body)
	}
	if n := a.count(t, "SELECT count(*) FROM payment_callbacks WHERE idempotency_key = 'evt_amount' AND status = 'processed'"); n != 1 {
		t.Fatalf("evt_amount not processed")
	}
	a.verify(t)
}

// TestDatabaseUnavailable puts a TCP proxy between the app and PostgreSQL
// and cuts it: a callback answers 503 with nothing half-applied, and the
// same delivery, retried once the database is back, is processed once.
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	dbURL := testenv.NewDatabaseURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	a := startApp(t, map[string]string{
		"DATABASE_URL":    strings.Replace(dbURL, u.Host, proxy.Listen, 1),
		"REQUEST_TIMEOUT": "3s",
	})
	a.DB = testenv.OpenDB(t, dbURL) // the test itself reads around the proxy
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	body := testenv.SandboxBody(id, "tx-down", models.EventPaid, 150000)

	proxy.Stop()
	r := a.callback(t, "evt_down", body)
	if r.Status != 503 || r.str("result") != "error" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("with the database cut: %d %s; want 503 error with Retry-After", r.Status, r.Body)
	}
	if r := a.do(t, "GET", "/readyz", nil, nil); r.Status != 503 {
		t.Fatalf("readyz with the database cut: %d %s; want 503", r.Status, r.Body)
	}
	if n := a.count(t, "SELECT count(*) FROM payment_callbacks"); n != 0 {
		t.Fatalf("payment_callbacks = %d while the database was cut", n)
	}

	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	// The provider retries a 503. Connections the pool still holds from
	// before the cut are dead and are found out one by one, so a few more
	// 503s may come before the answer; the first 200 must apply the event.
	var answers []string
	for {
		r := a.callback(t, "evt_down", body)
		answers = append(answers, fmt.Sprintf("%d %s", r.Status, r.str("result")))
		if r.Status == 200 {
			if r.str("result") != "processed" {
				t.Fatalf("after the database came back: %v; want the first 200 to be processed", answers)
			}
			break
		}
		if r.Status != 503 || len(answers) == 10 {
			t.Fatalf("after the database came back: %v; want 503s, then processed", answers)
		}
	}
	if r := a.callback(t, "evt_down", body); r.str("result") != "duplicate" {
		t.Fatalf("again: %d %s; want duplicate", r.Status, r.Body)
	}
	if o := a.order(t, id); o.Status != models.OrderPaid || len(o.Payments) != 1 {
		t.Fatalf("order %s with %d payments; want paid with 1", o.Status, len(o.Payments))
	}
	a.verify(t)
}

// TestVerifyReportsBrokenInvariants: verify is green on a consistent
// database and exits 1, naming the check, when a test breaks one.
func TestVerifyReportsBrokenInvariants(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	a.callback(t, "evt_v", testenv.SandboxBody(id, "tx-v", models.EventPaid, 150000))
	a.verify(t)

	// Each report names the broken check by its number and name, on the
	// line it prints for it.
	breakages := []struct{ check, sql string }{
		{"1. stock", "UPDATE products SET stock = stock + 1 WHERE sku = '" + sku + "'"},
		{"3. payments", "UPDATE payments SET amount = amount - 1"},
		{"2. reservations", "DELETE FROM stock_movements WHERE kind = 'reserve'"},
		{"4. callbacks", "DELETE FROM callback_deliveries WHERE outcome = 'processed'"},
		{"5. refunds", "UPDATE payments SET refunded_amount = 1"}, // no refund adds up to it
		// a refund asked of the gateway, done, above its payment
		{"9. gateway refunds", `INSERT INTO gateway_requests (kind, order_id, provider, idempotency_key, amount, currency, phase, provider_object_id, done_at, payment_id)
			SELECT 'refund', order_id, provider, order_id || '-R1', amount + 1, currency, 'done', 'rf-1', now(), id FROM payments`},
	}
	for _, b := range breakages {
		if err := a.DB.Exec(b.sql).Error; err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := run(context.Background(), []string{"sekali", "verify"}, a.getenv, &out, io.Discard)
		if exitCode(err) != 1 || !strings.Contains(out.String(), "FAIL  "+b.check+" ") ||
			!strings.Contains(out.String(), "integrity audit: RED") || !strings.Contains(out.String(), "(10 checks, ") {
			t.Fatalf("after breaking %s: exit %d, report:\n%s", b.check, exitCode(err), out.String())
		}
	}
}

// TestFullPoolAnswers503: with one pooled connection held by a request
// that waits on a row lock, every request that cannot get a connection
// (and the one that waits) answers 503 at its deadline instead of
// hanging, and the deliveries succeed once the lock is gone.
func TestFullPoolAnswers503(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"DB_MAX_CONNS": "1", "REQUEST_TIMEOUT": "1s"})
	sku := a.newProduct(t, 150000, 5)
	// The worker's periodic tasks share the one connection: the order
	// may have to wait for them, and be asked again after a 503.
	var id string
	testenv.Eventually(t, "an order created", func() bool {
		r := a.postOrder(t, randomKey(), fmt.Sprintf(`{"customer_email":"buyer@example.com","items":[{"sku":%q,"qty":1}]}`, sku))
		if r.Status != http.StatusCreated && r.Status != http.StatusServiceUnavailable {
			t.Fatalf("create order: %d %s", r.Status, r.Body)
		}
		id = r.str("id")
		return r.Status == http.StatusCreated
	})

	lock := a.DB.Begin()
	if err := lock.Exec("SELECT 1 FROM orders WHERE id = ? FOR UPDATE", id).Error; err != nil {
		t.Fatal(err)
	}
	got := newResults()
	concurrently(3, func(i int) {
		got.add(a.callback(t, fmt.Sprintf("evt_pool_%d", i), testenv.SandboxBody(id, fmt.Sprintf("tx-pool-%d", i), models.EventPending, 0)))
	})
	lock.Rollback()
	if got.status[503] != 3 || got.counts["error"] != 3 {
		t.Fatalf("with the pool exhausted: statuses %v, results %v; want 3 × 503 error", got.status, got.counts)
	}
	// Sent again, as the gateway does after a 503. On a busy machine one
	// of these may itself miss the 1 s deadline: a 503 again, which the
	// gateway retries too, is not a failure; any other answer is.
	for i := range 3 {
		var r response
		testenv.Eventually(t, "the delivery processed once the lock is gone", func() bool {
			r = a.callback(t, fmt.Sprintf("evt_pool_%d", i), testenv.SandboxBody(id, fmt.Sprintf("tx-pool-%d", i), models.EventPending, 0))
			return r.Status != http.StatusServiceUnavailable
		})
		if r.Status != 200 || r.str("result") != "processed" {
			t.Fatalf("after the lock is gone: %d %s; want processed", r.Status, r.Body)
		}
	}
	a.verify(t)
}

// A server with neither a sandbox secret of its own nor the sandbox
// gateway has no sandbox provider: the public development secret must not
// pay orders in production. The same server with the gateway on accepts
// callbacks signed with it.
func TestSandboxProviderNeedsASecretOrTheGateway(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		gateway string
		want    int
	}{{"off", 404}, {"on", 422}} { // 422: an unknown order, so the signature was accepted
		a := startApp(t, map[string]string{"SANDBOX_WEBHOOK_SECRET": "", "SANDBOX_GATEWAY": tt.gateway})
		body := []byte(`{"order_id":"ORD-01JZZZZZZZZZZZZZZZZZZZZZZZ","transaction_id":"tx-dev","payment_status":"paid","paid_amount":1,"currency":"IDR"}`)
		key, _ := stdwebhooks.DecodeSecret(config.DevSandboxSecret)
		h := stdwebhooks.Headers(key, "evt_dev_secret", time.Now(), body)
		h.Set("Content-Type", "application/json")
		if r := a.do(t, "POST", "/callbacks/sandbox", h, body); r.Status != tt.want {
			t.Errorf("SANDBOX_GATEWAY=%s, signed with the development secret: %d %s, want %d", tt.gateway, r.Status, r.Body, tt.want)
		}
	}
}
