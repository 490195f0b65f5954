package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// Input that can never succeed is a 4xx that names the problem — never a
// 500, and for a callback never a 503 that the gateway would retry
// forever. Found black-box; tested black-box.
func TestUnstorableTextIsRefused(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})

	// A correctly signed callback with NUL in a field, or an event id that
	// is not UTF-8: 422 missing_field, recorded, every time.
	for name, d := range map[string]struct {
		eventID string
		body    []byte
	}{
		"NUL in order_id":       {"evt_nul_1", []byte(`{"order_id":"ORD-\u0000x","transaction_id":"tx","payment_status":"paid","paid_amount":150000,"currency":"IDR"}`)},
		"NUL in transaction_id": {"evt_nul_2", []byte(`{"order_id":"` + id + `","transaction_id":"t\u0000x","payment_status":"paid","paid_amount":150000,"currency":"IDR"}`)},
		"event id not UTF-8":    {"evt_\xff\xfe", testenv.SandboxBody(id, "tx-utf8", models.EventPaid, 150000)},
	} {
		for attempt := range 2 {
			r := a.do(t, "POST", "/callbacks/sandbox", testenv.SandboxHeaders(d.eventID, d.body, time.Now()), d.body)
			if r.Status != 422 || r.str("code") != models.EMissingField {
				t.Errorf("%s (attempt %d): %d %s; want 422 missing_field", name, attempt+1, r.Status, r.Body)
			}
		}
	}
	// NUL from anyone on the API: 404 for an id, 422 for a field.
	if r := a.do(t, "GET", "/api/orders/ORD-%00x", nil, nil); r.Status != 404 {
		t.Errorf("GET /api/orders/ORD-%%00x: %d %s; want 404", r.Status, r.Body)
	}
	if r := a.do(t, "POST", "/api/orders/ORD-%00x/cancel", nil, nil); r.Status != 404 {
		t.Errorf("cancel ORD-%%00x: %d %s; want 404", r.Status, r.Body)
	}
	r := a.postOrder(t, randomKey(), `{"customer_email":"a@example.com","items":[{"sku":"DEMO\u0000MUG","qty":1}]}`)
	if r.Status != 422 || r.str("code") != models.EInvalid {
		t.Errorf("sku with NUL: %d %s; want 422 invalid_request", r.Status, r.Body)
	}
	if o := a.order(t, id); o.Status != models.OrderPending || a.stock(t, sku) != 4 {
		t.Errorf("the refusals changed the order (%s) or the stock (%d)", o.Status, a.stock(t, sku))
	}
}

// Prices, quantities, totals and restocks have upper bounds checked
// before any arithmetic: a total cannot wrap around to 0 (and be paid
// with 0), and nothing at the bounds is a 500.
func TestAmountsAreBounded(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"ADMIN_API_TOKEN": "tok", "ORDER_MAX_UNITS": "1000000"})
	admin := http.Header{"Authorization": {"Bearer tok"}, "Content-Type": {"application/json"}}
	product := func(sku string, price, stock int64) response {
		return a.do(t, "POST", "/api/products", admin,
			fmt.Appendf(nil, `{"sku":%q,"name":"x","price":%d,"currency":"IDR","stock":%d}`, sku, price, stock))
	}
	if r := product("HUGE", 1<<62, 10); r.Status != 422 {
		t.Errorf("price 2^62: %d %s; want 422", r.Status, r.Body)
	}
	if r := product("TOP", models.MaxPrice, 2_000_000); r.Status != 201 {
		t.Fatalf("price at the bound: %d %s", r.Status, r.Body)
	}
	// MaxPrice × 1000 is within MaxTotal; × 1001 is not.
	for qty, want := range map[int]int{1000: 201, 1001: 422, models.MaxQty: 422, models.MaxQty + 1: 422} {
		r := a.postOrder(t, randomKey(), fmt.Sprintf(`{"customer_email":"a@example.com","items":[{"sku":"TOP","qty":%d}]}`, qty))
		if r.Status != want {
			t.Errorf("qty %d at the highest price: %d %s; want %d", qty, r.Status, r.Body, want)
		}
	}
	if n := a.count(t, "SELECT count(*) FROM orders WHERE total_amount <= 0"); n != 0 {
		t.Errorf("%d orders with a total of 0 or less", n)
	}
	restock := func(qty int64) response {
		h := admin.Clone()
		h.Set("Idempotency-Key", randomKey())
		return a.do(t, "POST", "/api/products/TOP/restock", h, fmt.Appendf(nil, `{"qty":%d}`, qty))
	}
	for _, qty := range []int64{1<<63 - 1, models.MaxRestock + 1} {
		if r := restock(qty); r.Status != 422 {
			t.Errorf("restock %d: %d %s; want 422", qty, r.Status, r.Body)
		}
	}
	if r := restock(models.MaxRestock); r.Status != 200 {
		t.Errorf("restock at the bound: %d %s", r.Status, r.Body)
	}
	// A paid_amount beyond any total is refused before the amount check.
	id := a.createOrder(t, map[string]int{a.newProduct(t, 1000, 5): 1})
	body := []byte(`{"order_id":"` + id + `","transaction_id":"tx-big","payment_status":"paid","paid_amount":9223372036854775807,"currency":"IDR"}`)
	if r := a.callback(t, "evt_big", body); r.Status != 422 || r.str("code") != models.EInvalid {
		t.Errorf("paid_amount 2^63-1: %d %s; want 422 invalid_request", r.Status, r.Body)
	}
}

// One order may not hold more than ORDER_MAX_UNITS units: one buyer
// cannot hoard a product's stock without paying.
func TestOrderUnitsAreLimited(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"ORDER_MAX_UNITS": "5"})
	one, two := a.newProduct(t, 1000, 100), a.newProduct(t, 1000, 100)
	r := a.postOrder(t, randomKey(), fmt.Sprintf(`{"customer_email":"a@example.com","items":[{"sku":%q,"qty":3},{"sku":%q,"qty":3}]}`, one, two))
	if r.Status != 422 || !strings.Contains(r.str("detail"), "at most 5 units") {
		t.Errorf("6 units with a limit of 5: %d %s", r.Status, r.Body)
	}
	if a.stock(t, one) != 100 || a.stock(t, two) != 100 {
		t.Error("a refused order reserved stock")
	}
	a.createOrder(t, map[string]int{one: 2, two: 3})
}

// A request id is kept only when it is short and plain; anything else is
// replaced, so it is never stored, echoed or logged as sent.
func TestRequestIDIsBounded(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	for sent, kept := range map[string]bool{
		"req-123:abc.DEF_9":      true,
		strings.Repeat("x", 64):  true,
		strings.Repeat("x", 65):  false,
		strings.Repeat("x", 9e5): false,
		"has space":              false,
		"<script>":               false,
	} {
		r := a.do(t, "POST", "/callbacks/sandbox", http.Header{"X-Request-Id": {sent}, "Content-Type": {"application/json"}}, []byte(`{}`))
		got := r.Header.Get("X-Request-Id")
		if (got == sent) != kept || len(got) == 0 || len(got) > 64 {
			t.Errorf("X-Request-Id of %d bytes: answered with %.70q, kept=%v, want kept=%v", len(sent), got, got == sent, kept)
		}
	}
	a.eventually(t, 6, "SELECT count(*) FROM callback_deliveries")
	if n := a.count(t, "SELECT count(*) FROM callback_deliveries WHERE length(request_id) > 64"); n != 0 {
		t.Errorf("%d delivery rows store a request id over 64 characters", n)
	}
}

// Two Idempotency-Key headers are refused: which one counts would be a
// guess.
func TestTwoIdempotencyKeysAreRefused(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 1000, 5)
	h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1", "k2"}}
	r := a.do(t, "POST", "/api/orders", h, fmt.Appendf(nil, `{"customer_email":"a@example.com","items":[{"sku":%q,"qty":1}]}`, sku))
	if r.Status != 400 || r.str("code") != models.EIdempotencyInvalid {
		t.Errorf("two keys: %d %s; want 400 idempotency_key_invalid", r.Status, r.Body)
	}
	if n := a.count(t, "SELECT count(*) FROM orders"); n != 0 {
		t.Errorf("%d orders created", n)
	}
}

// A body that two parsers would read differently is refused, not taken
// for a duplicate of the event it imitates; a timestamp written another
// way than it was signed is refused too.
func TestAmbiguousCallbacksAreRefused(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	id := a.createOrder(t, map[string]int{a.newProduct(t, 75000, 5): 1})
	good := testenv.SandboxBody(id, "tx-amb", models.EventPaid, 75000)
	if r := a.callback(t, "evt_amb", good); r.str("result") != "processed" {
		t.Fatalf("first delivery: %d %s", r.Status, r.Body)
	}
	twice := []byte(`{"order_id":"` + id + `","transaction_id":"tx-amb","payment_status":"paid","paid_amount":1,"paid_amount":75000,"currency":"IDR"}`)
	if r := a.callback(t, "evt_amb", twice); r.Status != 400 || r.str("code") != models.EInvalidPayload {
		t.Errorf("same event id, paid_amount twice: %d %s; want 400 invalid_payload (it was answered duplicate)", r.Status, r.Body)
	}
	// Keys that differ only in case: encoding/json would read either.
	cased := []byte(`{"order_id":"` + id + `","transaction_id":"tx-amb-case","payment_status":"paid","PAYMENT_STATUS":"expired","paid_amount":75000,"currency":"IDR"}`)
	if r := a.callback(t, "evt_amb_case", cased); r.Status != 400 || r.str("code") != models.EInvalidPayload {
		t.Errorf("payment_status and PAYMENT_STATUS: %d %s; want 400 invalid_payload", r.Status, r.Body)
	}
	order := fmt.Appendf(nil, `{"customer_email":"a@example.com","Customer_Email":"b@example.com","items":[{"sku":%q,"qty":1}]}`, "DEMO-NONE")
	if r := a.do(t, "POST", "/api/orders", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"amb-case-0123456789"}}, order); r.Status != 400 || r.str("code") != models.EInvalidPayload {
		t.Errorf("an order with customer_email and Customer_Email: %d %s; want 400 invalid_payload", r.Status, r.Body)
	}
	now := time.Now()
	h := testenv.SandboxHeaders("evt_amb_ts", good, now)
	h.Set("webhook-timestamp", "000"+h.Get("webhook-timestamp"))
	if r := a.do(t, "POST", "/callbacks/sandbox", h, good); r.Status != 401 {
		t.Errorf("timestamp 000<now> signed over <now>: %d %s; want 401", r.Status, r.Body)
	}
}
