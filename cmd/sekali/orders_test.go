package main

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

func TestOversellIsImpossible(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 250000, 10)
	body := fmt.Sprintf(`{"customer_email":"buyer@example.com","items":[{"sku":%q,"qty":1}]}`, sku)

	var mu sync.Mutex
	statuses, codes := map[int]int{}, map[string]int{}
	concurrently(50, func(int) {
		r := a.postOrder(t, randomKey(), body)
		mu.Lock()
		statuses[r.Status]++
		codes[r.str("code")]++
		mu.Unlock()
	})
	if statuses[201] != 10 || statuses[409] != 40 || codes["insufficient_stock"] != 40 {
		t.Fatalf("statuses = %v, codes = %v; want 10 × 201 and 40 × 409 insufficient_stock", statuses, codes)
	}
	if s := a.stock(t, sku); s != 0 {
		t.Fatalf("stock = %d, want 0", s)
	}
	if n := a.count(t, "SELECT count(*) FROM orders"); n != 10 {
		t.Fatalf("orders = %d, want 10", n)
	}
	a.verify(t)
}

// An order opens only with its access token (returned once, at creation)
// or the admin token: its id alone — however it was learnt — gives a 404,
// as for an order that does not exist; neither reading nor cancelling.
func TestOrderNeedsItsAccessToken(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"ADMIN_API_TOKEN": "admin-secret"})
	sku := a.newProduct(t, 1000, 10)
	key := randomKey()
	body := fmt.Sprintf(`{"customer_email":"buyer@example.com","items":[{"sku":%q,"qty":1}]}`, sku)
	created := a.postOrder(t, key, body)
	id, token := created.str("id"), created.str("access_token")
	if len(token) < 22 { // 128 bits in base64url
		t.Fatalf("access_token %q is shorter than 128 bits", token)
	}
	if replay := a.postOrder(t, key, body); replay.str("access_token") != token {
		t.Errorf("the replayed creation answers token %q, want the same %q", replay.str("access_token"), token)
	}
	other := a.createOrder(t, map[string]int{sku: 1})
	otherToken, _ := a.tokens.Load(other)
	var stored string
	a.DB.Raw("SELECT access_token_hash FROM orders WHERE id = ?", id).Scan(&stored)
	if stored == "" || stored == token || strings.Contains(stored, token) {
		t.Errorf("orders.access_token_hash = %q: the token must be stored only as a hash", stored)
	}

	refused := map[string]http.Header{
		"no token":              nil,
		"another order's":       {"Authorization": {"Bearer " + fmt.Sprint(otherToken)}},
		"a wrong token":         {"Authorization": {"Bearer " + token + "x"}},
		"the token, not Bearer": {"Authorization": {"Basic " + token}},
	}
	for name, h := range refused {
		if r := a.do(t, "GET", "/api/orders/"+id, h, nil); r.Status != 404 || r.str("code") != "not_found" {
			t.Errorf("GET with %s: %d %s; want 404", name, r.Status, r.Body)
		}
		if r := a.do(t, "POST", "/api/orders/"+id+"/cancel", h, nil); r.Status != 404 {
			t.Errorf("cancel with %s: %d %s; want 404", name, r.Status, r.Body)
		}
	}
	if r := a.do(t, "GET", "/api/orders/"+id+"?t="+fmt.Sprint(otherToken), nil, nil); r.Status != 404 {
		t.Errorf("GET with another order's ?t=: %d", r.Status)
	}
	// The admin token opens every order: in a header only, never in a URL
	// (URLs end up in logs, histories and proxies).
	if r := a.do(t, "GET", "/api/orders/"+id+"?t=admin-secret", nil, nil); r.Status != 404 {
		t.Errorf("GET with the admin token in ?t=: %d, want 404", r.Status)
	}
	if o := a.order(t, id); o.Status != models.OrderPending {
		t.Fatalf("a refused cancel changed the order to %s", o.Status)
	}
	for name, h := range map[string]http.Header{
		"its token":       {"Authorization": {"Bearer " + token}},
		"the admin token": {"Authorization": {"Bearer admin-secret"}},
	} {
		if r := a.do(t, "GET", "/api/orders/"+id, h, nil); r.Status != 200 || r.str("id") != id {
			t.Errorf("GET with %s: %d %s", name, r.Status, r.Body)
		}
	}
	if r := a.do(t, "POST", "/api/orders/"+id+"/cancel?t="+token, nil, nil); r.Status != 200 || r.str("status") != "cancelled" {
		t.Errorf("cancel with ?t=: %d %s", r.Status, r.Body)
	}
}

// An order's access token leaves no copy in the database: not in the
// order (its hash and nonce only), not in the answer stored under its
// Idempotency-Key (a replay derives the token again, and shows it only to
// the client that made the order), not in the payment confirmation email
// kept for it. The test pays an API order and a shop order, replays each
// from another client, waits for both emails to go out, then reads every
// row of every table for the tokens.
func TestNoPlainTokenInTheDatabase(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"TRUSTED_PROXIES": "127.0.0.1"})
	sku := a.newProduct(t, 150000, 10)
	from := func(addr string, h http.Header) http.Header { h.Set("X-Forwarded-For", addr); return h }

	key := randomKey()
	body := []byte(fmt.Sprintf(`{"customer_email":"buyer@example.com","items":[{"sku":%q,"qty":1}]}`, sku))
	order := func(addr string) response {
		return a.do(t, "POST", "/api/orders", from(addr, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}), body)
	}
	created := order("203.0.113.7")
	apiID, apiToken := created.str("id"), created.str("access_token")
	if created.Status != http.StatusCreated || apiToken == "" {
		t.Fatalf("the order: %d %s", created.Status, created.Body)
	}
	if r := order("198.51.100.9"); r.Status != http.StatusCreated || r.str("id") != apiID || r.str("access_token") != "" {
		t.Errorf("a replay from another client: %d %s; want 201, the order, no token", r.Status, r.Body)
	}
	if r := order("203.0.113.7"); r.str("access_token") != apiToken {
		t.Errorf("a replay from the order's client: token %q, want %q", r.str("access_token"), apiToken)
	}

	// The shop's form: the order's page is where the token goes.
	noRedirects := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"idempotency_key": {randomKey()}, "sku": {sku}, "qty": {"1"}, "email": {"shopper@example.com"}}.Encode()
	checkout := func(addr string) *http.Response {
		req, _ := http.NewRequest("POST", a.URL+"/checkout", strings.NewReader(form))
		req.Header = from(addr, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
		res, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	placed, err := url.Parse(checkout("203.0.113.8").Header.Get("Location"))
	if err != nil || placed.Query().Get("t") == "" {
		t.Fatalf("the shop's order: to %v (%v), want its page with its token", placed, err)
	}
	shopID, shopToken := strings.TrimPrefix(placed.Path, "/orders/"), placed.Query().Get("t")
	if res := checkout("198.51.100.9"); res.StatusCode != http.StatusConflict {
		t.Errorf("the shop's form posted again from another client: %d, want 409", res.StatusCode)
	}

	for i, id := range []string{apiID, shopID} {
		if r := a.callback(t, fmt.Sprintf("evt_tok_%d", i), testenv.SandboxBody(id, fmt.Sprintf("tx-tok-%d", i), models.EventPaid, 150000)); r.Status != 200 {
			t.Fatalf("pay %s: %d %s", id, r.Status, r.Body)
		}
		a.eventually(t, 1, "SELECT count(*) FROM outbound_emails WHERE key = ? AND status = 'sent'", "order_paid:"+id)
	}

	var tables []string
	if err := a.DB.Raw("SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1").Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	// rowsWith counts the rows of table whose text holds s, as text or as
	// bytea (hex).
	rowsWith := func(table, s string) int64 {
		return a.count(t, fmt.Sprintf("SELECT count(*) FROM %s AS r WHERE r::text LIKE ? OR r::text LIKE ?", pgx.Identifier{table}.Sanitize()),
			"%"+s+"%", "%"+hex.EncodeToString([]byte(s))+"%")
	}
	// The scan reads what it should: the orders' ids are in their rows,
	// their answers and their emails.
	for _, table := range []string{"orders", "api_idempotency_keys", "outbound_emails"} {
		if n := rowsWith(table, apiID) + rowsWith(table, shopID); n < 2 {
			t.Errorf("%s: the orders' ids found in %d rows, want both: the scan reads nothing", table, n)
		}
	}
	for _, table := range tables {
		for what, token := range map[string]string{"the API order's token": apiToken, "the shop order's token": shopToken} {
			if n := rowsWith(table, token); n != 0 {
				t.Errorf("%s: %d rows hold %s", table, n, what)
			}
		}
	}
}

func TestOrderIsAllOrNothing(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	plenty, scarce := a.newProduct(t, 1000, 10), a.newProduct(t, 1000, 1)
	r := a.postOrder(t, randomKey(), fmt.Sprintf(`{"customer_email":"b@example.com","items":[{"sku":%q,"qty":2},{"sku":%q,"qty":2}]}`, plenty, scarce))
	if r.Status != http.StatusConflict || r.str("code") != "insufficient_stock" {
		t.Fatalf("create: %d %s; want 409 insufficient_stock", r.Status, r.Body)
	}
	if a.stock(t, plenty) != 10 || a.stock(t, scarce) != 1 {
		t.Fatalf("stock changed: %d, %d", a.stock(t, plenty), a.stock(t, scarce))
	}
	if n := a.count(t, "SELECT count(*) FROM orders") + a.count(t, "SELECT count(*) FROM stock_movements WHERE kind <> 'adjust'"); n != 0 {
		t.Fatalf("%d order or movement rows written by a refused order", n)
	}
}

func TestOrderIdempotencyKey(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"ORDER_MAX_UNITS": "10000"}) // room for an order beyond the stock

	sku := a.newProduct(t, 75000, 100)
	body := fmt.Sprintf(`{"customer_email":"buyer@example.com","items":[{"sku":%q,"qty":2}]}`, sku)

	t.Run("replay returns the stored response", func(t *testing.T) {
		first := a.postOrder(t, "key-replay-0123456789", body)
		// Same content, other spelling: the fingerprint is canonical.
		again := a.postOrder(t, "key-replay-0123456789", strings.ReplaceAll(body, `,"items"`, ` , "items"`))
		if first.Status != 201 || again.Status != 201 || string(first.Body) != string(again.Body) {
			t.Fatalf("first %d %s, replay %d %s; want the same 201 twice", first.Status, first.Body, again.Status, again.Body)
		}
		if first.Header.Get("Idempotent-Replayed") != "" || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("Idempotent-Replayed: first %q, replay %q", first.Header.Get("Idempotent-Replayed"), again.Header.Get("Idempotent-Replayed"))
		}
	})
	// A key is a capability: whoever sends it again with the body gets the
	// answer (the access token too, from the order's client). A guessable
	// key such as my-first-order is refused, and nothing is created.
	t.Run("a short key", func(t *testing.T) {
		r := a.postOrder(t, "my-first-order", body)
		if r.Status != 422 || r.str("code") != models.EIdempotencyTooShort || !strings.Contains(r.str("detail"), "at least 16 characters") {
			t.Fatalf("the key my-first-order: %d %s; want 422 idempotency_key_too_short with the reason", r.Status, r.Body)
		}
		if n := a.count(t, "SELECT count(*) FROM api_idempotency_keys WHERE key = 'my-first-order'"); n != 0 {
			t.Errorf("the short key was stored (%d rows)", n)
		}
	})
	t.Run("reuse with another body", func(t *testing.T) {
		a.postOrder(t, "key-reuse-0123456789", body)
		r := a.postOrder(t, "key-reuse-0123456789", strings.Replace(body, `"qty":2`, `"qty":3`, 1))
		if r.Status != 422 || r.str("code") != "idempotency_key_reused" {
			t.Fatalf("reuse: %d %s; want 422 idempotency_key_reused", r.Status, r.Body)
		}
	})
	t.Run("missing key", func(t *testing.T) {
		r := a.postOrder(t, "", body)
		if r.Status != 400 || r.str("code") != "idempotency_key_missing" {
			t.Fatalf("no key: %d %s; want 400 idempotency_key_missing", r.Status, r.Body)
		}
	})
	t.Run("key too long", func(t *testing.T) {
		r := a.postOrder(t, strings.Repeat("k", 256), body)
		if r.Status != 400 || r.str("code") != "idempotency_key_invalid" {
			t.Fatalf("long key: %d %s; want 400 idempotency_key_invalid", r.Status, r.Body)
		}
	})
	t.Run("a refused order is replayed too", func(t *testing.T) {
		big := strings.Replace(body, `"qty":2`, `"qty":1000`, 1)
		first, again := a.postOrder(t, "key-short-0123456789", big), a.postOrder(t, "key-short-0123456789", big)
		if first.Status != 409 || again.Status != 409 || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("first %d, again %d (replayed %q); want 409 stored and replayed", first.Status, again.Status, again.Header.Get("Idempotent-Replayed"))
		}
	})
	t.Run("20 concurrent requests with one key create one order", func(t *testing.T) {
		before := a.count(t, "SELECT count(*) FROM orders")
		var mu sync.Mutex
		statuses := map[int]int{}
		ids := map[string]bool{}
		concurrently(20, func(int) {
			r := a.postOrder(t, "key-concurrent-0123456789", body)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
			if r.Status == 201 {
				ids[r.str("id")] = true
			} else if r.Status != 409 || r.str("code") != "request_in_progress" {
				t.Errorf("unexpected answer %d %s", r.Status, r.Body)
			}
		})
		if n := a.count(t, "SELECT count(*) FROM orders") - before; n != 1 || len(ids) != 1 {
			t.Fatalf("orders created = %d, distinct ids answered = %d (statuses %v); want 1 and 1", n, len(ids), statuses)
		}
		if r := a.postOrder(t, "key-concurrent-0123456789", body); r.Status != 201 || !ids[r.str("id")] {
			t.Fatalf("after the race: %d %s; want the stored 201", r.Status, r.Body)
		}
	})
	a.verify(t)
}

func TestOrderValidation(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 1000, 10)
	item := fmt.Sprintf(`{"sku":%q,"qty":1}`, sku)
	tests := []struct {
		name, body, contentType string
		status                  int
		code                    string
	}{
		{"unknown sku", `{"customer_email":"a@example.com","items":[{"sku":"NOPE","qty":1}]}`, "", 422, "invalid_request"},
		{"qty 0", `{"customer_email":"a@example.com","items":[{"sku":"` + sku + `","qty":0}]}`, "", 422, "invalid_request"},
		{"bad email", `{"customer_email":"not an email","items":[` + item + `]}`, "", 422, "invalid_request"},
		{"no items", `{"customer_email":"a@example.com","items":[]}`, "", 422, "invalid_request"},
		{"sku twice", `{"customer_email":"a@example.com","items":[` + item + `,` + item + `]}`, "", 422, "invalid_request"},
		{"qty as string", `{"customer_email":"a@example.com","items":[{"sku":"` + sku + `","qty":"1"}]}`, "", 422, "invalid_request"},
		{"unknown field", `{"customer_email":"a@example.com","items":[` + item + `],"coupon":"FREE"}`, "", 422, "invalid_request"},
		{"malformed JSON", `{"customer_email":`, "", 400, "invalid_payload"},
		{"not JSON", `customer_email=a@example.com`, "application/x-www-form-urlencoded", 415, "unsupported_media_type"},
	}
	for _, tt := range tests {
		h := http.Header{"Idempotency-Key": {randomKey()}, "Content-Type": {"application/json"}}
		if tt.contentType != "" {
			h.Set("Content-Type", tt.contentType)
		}
		r := a.do(t, "POST", "/api/orders", h, []byte(tt.body))
		if r.Status != tt.status || r.str("code") != tt.code || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s %s; want %d %s as problem+json", tt.name, r.Status, r.Header.Get("Content-Type"), r.Body, tt.status, tt.code)
		}
		for _, member := range []string{"type", "title", "detail"} {
			if r.str(member) == "" {
				t.Errorf("%s: problem has no %s: %s", tt.name, member, r.Body)
			}
		}
	}
	if n := a.count(t, "SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("orders = %d after invalid requests, want 0", n)
	}
}

func TestGetAndCancelOrder(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 1000, 10)
	id := a.createOrder(t, map[string]int{sku: 3})

	r := a.do(t, "GET", a.orderURL(id), nil, nil)
	if r.Status != 200 || r.str("status") != "pending" || r.JSON["total_amount"] != float64(3000) || r.JSON["invoice"] != nil {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	if _, hasToken := r.JSON["access_token"]; hasToken {
		t.Errorf("a read answers the access token again: %s", r.Body)
	}
	for _, missing := range []string{models.NewOrderID(time.Now()), "ORD-nope", "%20", "x"} {
		if r := a.do(t, "GET", "/api/orders/"+missing, nil, nil); r.Status != 404 || r.str("code") != "not_found" {
			t.Errorf("get %q: %d %s; want 404 not_found", missing, r.Status, r.Body)
		}
	}

	for range 2 { // cancelling a cancelled order answers 200 again
		if r := a.do(t, "POST", a.orderAction(id, "cancel"), nil, nil); r.Status != 200 || r.str("status") != "cancelled" {
			t.Fatalf("cancel: %d %s; want 200 cancelled", r.Status, r.Body)
		}
	}
	if a.stock(t, sku) != 10 {
		t.Fatalf("stock after cancel = %d, want 10", a.stock(t, sku))
	}

	paid := a.createOrder(t, map[string]int{sku: 1})
	a.callback(t, "evt_paid_"+paid, testenv.SandboxBody(paid, "tx-"+paid, models.EventPaid, 1000))
	if r := a.do(t, "POST", a.orderAction(paid, "cancel"), nil, nil); r.Status != 409 || r.str("code") != "invalid_transition" {
		t.Fatalf("cancel paid: %d %s; want 409 invalid_transition", r.Status, r.Body)
	}
	if r := a.do(t, "POST", "/api/orders/ORD-unknown/cancel", nil, nil); r.Status != 404 {
		t.Fatalf("cancel unknown: %d %s; want 404", r.Status, r.Body)
	}
	a.verify(t)
}
