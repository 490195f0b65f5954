package orders_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The tests of this package run against a private PostgreSQL database
// each (testenv.NewDB). The helpers below keep them short: env is the
// service on that database with a clock the test moves by hand, and the
// count and stock helpers read what the database holds — the one place
// an effect is real.

// ttl is how long a test's pending orders hold their stock.
const ttl = 15 * time.Minute

// clock is the service's clock: a test moves it on instead of waiting.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is the orders service on a fresh database.
type env struct {
	t     *testing.T
	db    *gorm.DB
	s     *orders.Service
	clock *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := testenv.NewDB(t)
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	return &env{t: t, db: db, s: orders.NewService(db, testenv.Logger(t), c.Now, ttl, jobs.Tasks{}), clock: c}
}

// item is one line of a request.
func item(sku string, qty int64) orders.ItemRequest { return orders.ItemRequest{SKU: sku, Qty: qty} }

// request is a request from no particular client.
func request(email string, items ...orders.ItemRequest) orders.CreateRequest {
	return orders.CreateRequest{CustomerEmail: email, Items: items}
}

// product creates a product priced in IDR with stock units.
func (e *env) product(sku string, price, stock int64) {
	e.t.Helper()
	testenv.MustCreateProduct(e.t, e.db, sku, price, stock)
}

// order creates an order that must succeed.
func (e *env) order(req orders.CreateRequest) *models.Order {
	e.t.Helper()
	o, err := e.s.Create(e.t.Context(), req)
	if err != nil {
		e.t.Fatalf("create %+v: %v", req, err)
	}
	return o
}

// exec runs a statement that must succeed.
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if err := e.db.Exec(sql, args...).Error; err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// count is the number of rows of table matching where.
func (e *env) count(table, where string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.Table(table).Where(where, args...).Count(&n).Error; err != nil {
		e.t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// stock is products.stock of sku.
func (e *env) stock(sku string) int64 {
	e.t.Helper()
	var p models.Product
	if err := e.db.Take(&p, "sku = ?", sku).Error; err != nil {
		e.t.Fatalf("read product %s: %v", sku, err)
	}
	return p.Stock
}

// wantStock fails the test unless each product has the stock given.
func (e *env) wantStock(want map[string]int64) {
	e.t.Helper()
	for sku, n := range want {
		if got := e.stock(sku); got != n {
			e.t.Errorf("stock of %s is %d, want %d", sku, got, n)
		}
	}
}

// movements is the number of stock movements of kind for the order.
func (e *env) movements(orderID string, kind models.MovementKind) int64 {
	e.t.Helper()
	return e.count("stock_movements", "order_id = ? AND kind = ?", orderID, kind)
}

// status is the order's status as stored.
func (e *env) status(id string) models.OrderStatus {
	e.t.Helper()
	var o models.Order
	if err := e.db.Take(&o, "id = ?", id).Error; err != nil {
		e.t.Fatalf("read order %s: %v", id, err)
	}
	return o.Status
}

// pay moves a pending order to paid the way the payments package does:
// under the order's lock, with orders.Transition.
func (e *env) pay(id string) {
	e.t.Helper()
	err := e.db.Transaction(func(tx *gorm.DB) error {
		o, err := orders.Lock(tx, id)
		if err != nil {
			return err
		}
		return orders.Transition(tx, o, models.OrderPaid, e.clock.Now(), orders.Cause{What: models.CauseCallback}, models.OrderPending)
	})
	if err != nil {
		e.t.Fatalf("pay %s: %v", id, err)
	}
}

// nothingWritten fails the test if any order, order item, order stock
// movement or outbox row exists.
func (e *env) nothingWritten() {
	e.t.Helper()
	for table, where := range map[string]string{
		"orders":          "true",
		"order_items":     "true",
		"stock_movements": "kind <> 'adjust'",
		"outbox_messages": "true",
	} {
		if n := e.count(table, where); n != 0 {
			e.t.Errorf("%d rows in %s (where %s), want none", n, table, where)
		}
	}
}

// wantCode fails the test unless err carries the code want ("" for no
// error).
func wantCode(t *testing.T, err error, want, what string) {
	t.Helper()
	if got := models.ErrorCode(err); got != want {
		t.Fatalf("%s: error %v (code %q), want code %q", what, err, got, want)
	}
}

// Validate refuses each malformed request with invalid_request and a
// message naming what is wrong, and accepts the largest requests allowed:
// MaxItems items, MaxQty units of an item, a SKU of 255 bytes.
func TestValidateRefusesBadRequests(t *testing.T) {
	t.Parallel()
	distinct := func(n int) []orders.ItemRequest {
		items := make([]orders.ItemRequest, n)
		for i := range items {
			items[i] = item(fmt.Sprintf("SKU-%03d", i), 1)
		}
		return items
	}
	const email = "ayu@example.com"
	cases := []struct {
		name     string
		req      orders.CreateRequest
		wantCode string
		wantText string // in the message
	}{
		{"a plain order", request(email, item("MUG", 2), item("TEE", 1)), "", ""},
		{"the most items", request(email, distinct(orders.MaxItems)...), "", ""},
		{"the most units of one item", request(email, item("MUG", models.MaxQty)), "", ""},
		{"a sku of 255 bytes", request(email, item(strings.Repeat("S", 255), 1)), "", ""},

		{"no email", request("", item("MUG", 1)), models.EInvalid, "customer_email"},
		{"not an email", request("ayu.example.com", item("MUG", 1)), models.EInvalid, "customer_email"},
		{"an email with a display name", request("Ayu <ayu@example.com>", item("MUG", 1)), models.EInvalid, "customer_email"},
		{"an email with spaces around it", request(" ayu@example.com ", item("MUG", 1)), models.EInvalid, "customer_email"},
		{"an email with a NUL", request("ayu\x00@example.com", item("MUG", 1)), models.EInvalid, "customer_email"},
		{"no items", request(email), models.EInvalid, "at least one item"},
		{"an empty item list", orders.CreateRequest{CustomerEmail: email, Items: []orders.ItemRequest{}}, models.EInvalid, "at least one item"},
		{"one item too many", request(email, distinct(orders.MaxItems+1)...), models.EInvalid, "at most 100 items"},
		{"an empty sku", request(email, item("", 1)), models.EInvalid, "items[0].sku is empty"},
		{"a blank sku", request(email, item("MUG", 1), item("  ", 1)), models.EInvalid, "items[1].sku is empty"},
		{"a sku of 256 bytes", request(email, item(strings.Repeat("S", 256), 1)), models.EInvalid, "items[0].sku must be at most 255"},
		{"a sku with a NUL", request(email, item("MU\x00G", 1)), models.EInvalid, "items[0].sku"},
		{"a sku that is not UTF-8", request(email, item("MU\xffG", 1)), models.EInvalid, "items[0].sku"},
		{"zero units", request(email, item("MUG", 0)), models.EInvalid, "items[0].qty"},
		{"negative units", request(email, item("MUG", -1)), models.EInvalid, "items[0].qty"},
		{"more units than MaxQty", request(email, item("MUG", models.MaxQty+1)), models.EInvalid, "items[0].qty"},
		{"a sku listed twice", request(email, item("MUG", 1), item("TEE", 1), item("MUG", 2)), models.EInvalid, "items[2]: sku MUG is listed twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := c.req.Validate()
			wantCode(t, err, c.wantCode, "Validate")
			if msg := models.ErrorMessage(err); !strings.Contains(msg, c.wantText) {
				t.Errorf("message %q does not say %q", msg, c.wantText)
			}
		})
	}
}

// Create reserves every item's units in one transaction: each product's
// stock goes down by its quantity with one reserve movement per item,
// the order is pending with its total, its items sorted by SKU and the
// prices of the moment, and an order:expire outbox row is due at its
// expires_at. The access token it returns opens the order as stored; a
// wrong or empty token does not, and the token itself is stored nowhere.
func TestCreateReservesStockAndSchedulesExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 75_000, 10)
	e.product("TEE", 150_000, 5)
	o := e.order(request("ayu@example.com", item("TEE", 2), item("MUG", 3)))

	e.wantStock(map[string]int64{"MUG": 7, "TEE": 3})
	var moves []models.StockMovement
	e.db.Order("sku").Find(&moves, "order_id = ?", o.ID)
	if got := fmt.Sprint(moveSummary(moves)); got != "[MUG reserve 3 TEE reserve 2]" {
		t.Errorf("the order's movements are %s, want one reserve per item", got)
	}

	stored, err := e.s.Get(t.Context(), o.ID)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	if stored.Status != models.OrderPending || stored.TotalAmount != 3*75_000+2*150_000 || stored.Currency != "IDR" ||
		stored.CustomerEmail != "ayu@example.com" || !stored.CreatedAt.Equal(now) || !stored.ExpiresAt.Equal(now.Add(ttl)) {
		t.Errorf("stored order %+v; want pending, total 525000 IDR, created now, expiring after the ttl", stored)
	}
	if got := fmt.Sprint(itemSummary(stored.Items)); got != "[MUG×3@75000 TEE×2@150000]" {
		t.Errorf("stored items %s", got)
	}

	var task models.OutboxMessage
	if err := e.db.Take(&task, "task_id = ?", "order:expire:"+o.ID).Error; err != nil {
		t.Fatalf("no order:expire outbox row: %v", err)
	}
	var payload jobs.ExpireArgs
	json.Unmarshal(task.Payload, &payload)
	if task.TaskType != jobs.TaskOrderExpire || task.Status != models.OutboxPending || !task.ProcessAt.Equal(stored.ExpiresAt) || payload.OrderID != o.ID {
		t.Errorf("outbox row %s %s due %v for %q; want a pending order:expire due at %v for %s",
			task.TaskType, task.Status, task.ProcessAt, payload.OrderID, stored.ExpiresAt, o.ID)
	}

	if o.AccessToken == "" || !orders.TokenOpens(stored, o.AccessToken) {
		t.Errorf("the token Create returned (%q) does not open the stored order", o.AccessToken)
	}
	if orders.TokenOpens(stored, orders.AccessToken([]byte("another key"), o.ID, stored.AccessTokenNonce)) || orders.TokenOpens(stored, "") {
		t.Error("a wrong or empty token opens the order")
	}
	if n := e.count("orders", "row_to_json(orders)::text LIKE ?", "%"+o.AccessToken+"%"); n != 0 {
		t.Error("the access token itself is stored in the order's row")
	}
}

// When one item is short, Create fails with insufficient_stock and
// leaves nothing behind: no order, no items, no movements, no outbox
// row, and the stock of the item reserved before the short one (SKUs are
// reserved in order) is back where it was.
func TestCreateWithTooLittleStockWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("AAA-PLENTY", 1_000, 10)
	e.product("ZZZ-SCARCE", 1_000, 1)
	_, err := e.s.Create(t.Context(), request("ayu@example.com", item("ZZZ-SCARCE", 2), item("AAA-PLENTY", 2)))
	wantCode(t, err, models.EInsufficientStock, "an order for 2 of a product with 1 left")
	e.nothingWritten()
	e.wantStock(map[string]int64{"AAA-PLENTY": 10, "ZZZ-SCARCE": 1})
}

// Create refuses, with invalid_request and nothing written, what only the
// service or the catalogue can tell: more units in all than MaxUnits, more
// of a product than its max_per_order, an unknown SKU, products priced in
// different currencies, and a total beyond models.MaxTotal.
func TestCreateRefusesWhatTheCatalogueForbids(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(e *env)
		req   orders.CreateRequest
	}{
		{"more units than MaxUnits", func(e *env) { e.s.MaxUnits = 4 },
			request("ayu@example.com", item("MUG", 3), item("TEE", 2))},
		{"more than the product's max per order", func(e *env) { e.exec("UPDATE products SET max_per_order = 2 WHERE sku = 'TEE'") },
			request("ayu@example.com", item("MUG", 3), item("TEE", 3))},
		{"an unknown sku", func(*env) {},
			request("ayu@example.com", item("MUG", 1), item("NOPE", 1))},
		{"two currencies", func(e *env) { e.exec("UPDATE products SET currency = 'USD' WHERE sku = 'TEE'") },
			request("ayu@example.com", item("MUG", 1), item("TEE", 1))},
		{"a total beyond MaxTotal", func(e *env) {
			e.s.MaxUnits = models.MaxQty
			e.exec("UPDATE products SET price = ?, stock = ? WHERE sku = 'MUG'", int64(models.MaxPrice), int64(models.MaxQty))
		}, request("ayu@example.com", item("MUG", models.MaxQty))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.product("MUG", 75_000, 10)
			e.product("TEE", 150_000, 10)
			c.setup(e)
			before := map[string]int64{"MUG": e.stock("MUG"), "TEE": e.stock("TEE")}
			_, err := e.s.Create(t.Context(), c.req)
			wantCode(t, err, models.EInvalid, c.name)
			e.nothingWritten()
			e.wantStock(before)
		})
	}
}

// Open answers not_found, with the same message, both for an id that does
// not exist and for an order opened with a wrong or missing token, so a
// stranger cannot tell the two apart; a malformed id is not_found too.
// With admin set it opens the order without a token. An order from before
// tokens (empty hash) opens for the admin only, never with an empty token.
func TestOpenNeedsTheTokenOrAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 75_000, 10)
	o := e.order(request("ayu@example.com", item("MUG", 1)))
	ctx := t.Context()

	got, err := e.s.Open(ctx, o.ID, o.AccessToken, false)
	if err != nil || got.ID != o.ID || len(got.Items) != 1 {
		t.Fatalf("open with its token: %+v, %v; want the order with its item", got, err)
	}
	if got, err := e.s.Open(ctx, o.ID, "", true); err != nil || got.ID != o.ID {
		t.Fatalf("open as admin: %v, %v", got, err)
	}

	unknown := models.NewOrderID(e.clock.Now())
	for _, c := range []struct{ what, id, token string }{
		{"a wrong token", o.ID, orders.AccessToken([]byte("another key"), o.ID, "")},
		{"no token", o.ID, ""},
		{"an unknown id", unknown, o.AccessToken},
		{"a malformed id", "ORD-nope", o.AccessToken},
	} {
		got, err := e.s.Open(ctx, c.id, c.token, false)
		if got != nil {
			t.Errorf("%s: opened %s", c.what, got.ID)
		}
		wantCode(t, err, models.ENotFound, c.what)
		if want := fmt.Sprintf("no order %q", c.id); models.ErrorMessage(err) != want {
			t.Errorf("%s: message %q, want %q", c.what, models.ErrorMessage(err), want)
		}
	}
	if _, err := e.s.Open(ctx, unknown, "", true); models.ErrorCode(err) != models.ENotFound {
		t.Errorf("admin opening an unknown id: %v, want not_found", err)
	}

	e.exec("UPDATE orders SET access_token_hash = '' WHERE id = ?", o.ID)
	_, err = e.s.Open(ctx, o.ID, "", false)
	wantCode(t, err, models.ENotFound, "an order without a token, opened with none")
	if _, err := e.s.Open(ctx, o.ID, "", true); err != nil {
		t.Errorf("admin opening an order without a token: %v", err)
	}
}

// An access token is derived from the order id and its random nonce
// under the service's key: another key, id or nonce derives another
// token; it has 192 bits in base64url; and it is the token Create hands
// out, while the order keeps its nonce and hash only.
func TestAccessTokenIsDerived(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 75_000, 10)
	o := e.order(request("ayu@example.com", item("MUG", 1)))
	var stored models.Order
	if err := e.db.Take(&stored, "id = ?", o.ID).Error; err != nil {
		t.Fatal(err)
	}
	key, nonce := e.s.TokenKey, stored.AccessTokenNonce
	if len(nonce) < 22 || o.AccessToken != orders.AccessToken(key, o.ID, nonce) {
		t.Errorf("Create's token %q, nonce %q: want AccessToken(key, id, a random nonce)", o.AccessToken, nonce)
	}
	if len(o.AccessToken) != 32 || strings.Trim(o.AccessToken, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		t.Errorf("token %q: want 32 base64url characters (192 bits)", o.AccessToken)
	}
	for what, token := range map[string]string{
		"another key":   orders.AccessToken([]byte("another key"), o.ID, nonce),
		"another id":    orders.AccessToken(key, models.NewOrderID(e.clock.Now()), nonce),
		"another nonce": orders.AccessToken(key, o.ID, nonce+"x"),
		"no nonce":      orders.AccessToken(key, o.ID, ""),
	} {
		if token == o.AccessToken {
			t.Errorf("%s derives the same token", what)
		}
	}
	o2 := e.order(request("ayu@example.com", item("MUG", 1)))
	var nonce2 string
	e.db.Raw("SELECT access_token_nonce FROM orders WHERE id = ?", o2.ID).Scan(&nonce2)
	if nonce2 == nonce {
		t.Errorf("two orders share the nonce %q", nonce)
	}
}

// A replay of an order's creation shows the order again to the client
// that made it only, and the token only the one whose hash the order
// keeps: not to another client, nor to an unknown one; not for an order
// whose token was random (made before tokens were derived) or derived
// under another key — its own client still sees the order.
func TestReplayIsForTheOrdersClientOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 75_000, 10)
	req := request("ayu@example.com", item("MUG", 1))
	req.Client = "2001:db8:1:2::/64"
	o := e.order(req)
	ctx := t.Context()
	replay := func(s *orders.Service, id, client string) orders.Replay {
		t.Helper()
		r, err := s.ReplayFor(ctx, id, client)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got := replay(e.s, o.ID, "2001:db8:1:2::/64"); got != (orders.Replay{Own: true, Token: o.AccessToken}) {
		t.Errorf("the order's own client: %+v, want the order and its token %q", got, o.AccessToken)
	}
	for what, client := range map[string]string{"another client": "2001:db8:1:3::/64", "no client": ""} {
		if got := replay(e.s, o.ID, client); got != (orders.Replay{}) {
			t.Errorf("%s: %+v, want nothing", what, got)
		}
	}
	if got := replay(e.s, models.NewOrderID(e.clock.Now()), "2001:db8:1:2::/64"); got != (orders.Replay{}) {
		t.Errorf("an unknown order: %+v, want nothing", got)
	}
	rotated := orders.NewService(e.db, testenv.Logger(t), e.clock.Now, ttl, jobs.Tasks{}) // a key of its own
	if got := replay(rotated, o.ID, "2001:db8:1:2::/64"); got != (orders.Replay{Own: true}) {
		t.Errorf("under another key: %+v, want the order without a token (it would not open the order)", got)
	}
	e.exec("UPDATE orders SET access_token_hash = ?, access_token_nonce = '' WHERE id = ?",
		orders.HashAccessToken("a random token of an older order"), o.ID)
	if got := replay(e.s, o.ID, "2001:db8:1:2::/64"); got != (orders.Replay{Own: true}) {
		t.Errorf("an order from before derived tokens: %+v, want the order without a token", got)
	}
	e.exec("UPDATE orders SET client_addr = '' WHERE id = ?", o.ID)
	if got := replay(e.s, o.ID, "2001:db8:1:2::/64"); got != (orders.Replay{}) {
		t.Errorf("an order kept without its client: %+v, want nothing: nobody is known to be its client", got)
	}
}

// Get returns the order's items sorted by SKU and its payments sorted by
// id, whatever order the rows were written in; an unknown or malformed id
// is not_found.
func TestGetSortsItemsAndPayments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, sku := range []string{"AAA", "BBB", "CCC"} {
		e.product(sku, 1_000, 10)
	}
	o := e.order(request("ayu@example.com", item("CCC", 1), item("BBB", 1)))
	// Written last, sorted first: an unsorted read would put it at the end.
	e.exec("INSERT INTO order_items (order_id, sku, qty, unit_price) VALUES (?, 'AAA', 1, 1000)", o.ID)
	for _, id := range []int{30, 10, 20} {
		e.exec("INSERT INTO payments (id, provider, provider_reference, order_id, amount, currency, status) VALUES (?, 'sandbox', ?, ?, 2000, 'IDR', 'failed')",
			id, fmt.Sprintf("tx-%d", id), o.ID)
	}

	got, err := e.s.Get(t.Context(), o.ID)
	if err != nil {
		t.Fatal(err)
	}
	var skus []string
	for _, it := range got.Items {
		skus = append(skus, it.SKU)
	}
	var ids []int64
	for _, p := range got.Payments {
		ids = append(ids, p.ID)
	}
	if fmt.Sprint(skus) != "[AAA BBB CCC]" || fmt.Sprint(ids) != "[10 20 30]" {
		t.Errorf("items %v and payments %v; want items by SKU [AAA BBB CCC] and payments by id [10 20 30]", skus, ids)
	}

	_, err = e.s.Get(t.Context(), models.NewOrderID(e.clock.Now()))
	wantCode(t, err, models.ENotFound, "Get of an unknown id")
	_, err = e.s.Get(t.Context(), "42")
	wantCode(t, err, models.ENotFound, "Get of a malformed id")
}

// Cancel moves a pending order to cancelled, records the transition with
// its cause, and gives every item's units back with one release movement
// each. Cancelling it again succeeds and releases nothing more. An
// unknown id is not_found.
func TestCancelReleasesStockOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 75_000, 10)
	e.product("TEE", 150_000, 5)
	o := e.order(request("ayu@example.com", item("MUG", 3), item("TEE", 2)))

	for i := range 2 {
		got, err := e.s.Cancel(t.Context(), o.ID, models.CauseCustomer)
		if err != nil || got.Status != models.OrderCancelled {
			t.Fatalf("cancel #%d: %+v, %v; want the cancelled order", i+1, got, err)
		}
		e.wantStock(map[string]int64{"MUG": 10, "TEE": 5})
		if n := e.movements(o.ID, models.MovementRelease); n != 2 {
			t.Errorf("after cancel #%d: %d release movements, want 2 (one per item)", i+1, n)
		}
	}
	if s := e.status(o.ID); s != models.OrderCancelled {
		t.Errorf("stored status %s, want cancelled", s)
	}
	var tr []models.OrderTransition
	e.db.Find(&tr, "order_id = ?", o.ID)
	if len(tr) != 1 || tr[0].FromStatus != models.OrderPending || tr[0].ToStatus != models.OrderCancelled || tr[0].Cause != models.CauseCustomer {
		t.Errorf("transitions %+v; want one, pending → cancelled by the customer", tr)
	}

	_, err := e.s.Cancel(t.Context(), models.NewOrderID(e.clock.Now()), models.CauseAdmin)
	wantCode(t, err, models.ENotFound, "cancel of an unknown id")
}

// An order that has left pending for any state but cancelled (paid,
// expired) cannot be cancelled: invalid_transition, and neither its
// status nor the stock changes.
func TestCancelRefusesAnOrderThatIsNoLongerPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 75_000, 10)
	paid := e.order(request("ayu@example.com", item("MUG", 2)))
	e.pay(paid.ID)
	expired := e.order(request("budi@example.com", item("MUG", 3)))
	if _, err := e.s.Expire(t.Context(), expired.ID); err != nil {
		t.Fatal(err)
	}

	for _, o := range []struct {
		id   string
		want models.OrderStatus
	}{{paid.ID, models.OrderPaid}, {expired.ID, models.OrderExpired}} {
		_, err := e.s.Cancel(t.Context(), o.id, models.CauseCustomer)
		wantCode(t, err, models.EInvalidTransition, "cancel of a "+string(o.want)+" order")
		if s := e.status(o.id); s != o.want {
			t.Errorf("status after the refused cancel: %s, want %s", s, o.want)
		}
	}
	e.wantStock(map[string]int64{"MUG": 8}) // the paid order's 2 stay taken
	if n := e.movements(paid.ID, models.MovementRelease); n != 0 {
		t.Errorf("the paid order has %d release movements, want none", n)
	}
}

// Once the clock is past expires_at, Expire and ExpireTx expire a pending
// order, releasing its stock, and report true; each records its own cause
// (the sweep's, the job's). An order that is no longer pending (paid,
// cancelled, already expired) is left as it is, with no further release,
// and they report false. An unknown id is not_found.
func TestExpireEndsOnlyPendingOrders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 75_000, 10)
	bySweep := e.order(request("ayu@example.com", item("MUG", 1)))
	byJob := e.order(request("budi@example.com", item("MUG", 2)))
	paid := e.order(request("citra@example.com", item("MUG", 3)))
	e.pay(paid.ID)
	cancelled := e.order(request("dewi@example.com", item("MUG", 4)))
	if _, err := e.s.Cancel(t.Context(), cancelled.ID, models.CauseAdmin); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(ttl + time.Second)

	expired, err := e.s.Expire(t.Context(), bySweep.ID)
	if err != nil || !expired {
		t.Fatalf("Expire of a pending order: %v, %v; want true", expired, err)
	}
	err = e.db.Transaction(func(tx *gorm.DB) error {
		expired, err = e.s.ExpireTx(tx, byJob.ID)
		return err
	})
	if err != nil || !expired {
		t.Fatalf("ExpireTx of a pending order: %v, %v; want true", expired, err)
	}
	for id, cause := range map[string]string{bySweep.ID: models.CauseExpirySweep, byJob.ID: models.CauseExpiryJob} {
		if s := e.status(id); s != models.OrderExpired {
			t.Errorf("%s is %s, want expired", id, s)
		}
		if n := e.count("order_transitions", "order_id = ? AND to_status = 'expired' AND cause = ?", id, cause); n != 1 {
			t.Errorf("%s: %d transitions to expired by %q, want 1", id, n, cause)
		}
	}
	e.wantStock(map[string]int64{"MUG": 7}) // only the paid order's 3 stay taken

	for _, o := range []struct {
		id   string
		want models.OrderStatus
	}{{bySweep.ID, models.OrderExpired}, {paid.ID, models.OrderPaid}, {cancelled.ID, models.OrderCancelled}} {
		expired, err := e.s.Expire(t.Context(), o.id)
		if err != nil || expired {
			t.Errorf("Expire of a %s order: %v, %v; want false, no error", o.want, expired, err)
		}
		if s := e.status(o.id); s != o.want {
			t.Errorf("status after Expire: %s, want %s", s, o.want)
		}
		if n := e.movements(o.id, models.MovementRelease); n > 1 {
			t.Errorf("%s order has %d release movements, want at most 1", o.want, n)
		}
	}
	e.wantStock(map[string]int64{"MUG": 7})

	_, err = e.s.Expire(t.Context(), models.NewOrderID(e.clock.Now()))
	wantCode(t, err, models.ENotFound, "Expire of an unknown id")
}

// List returns the newest orders first and filters them by status, by
// the customer's exact email (spaces around it trimmed), and by id
// prefix, with LIKE's wildcards in the prefix taken literally. Pages of
// Limit rows chain through Before: together they are every order once,
// and the last page's cursor is "".
func TestListFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 1_000, 100)
	var ids []string // oldest first
	for i, email := range []string{"ayu@example.com", "budi@example.com", "ayu@example.com", "citra@example.com", "ayu@example.com"} {
		e.clock.Advance(time.Second) // ids sort by creation time
		ids = append(ids, e.order(request(email, item("MUG", int64(i+1)))).ID)
	}
	if _, err := e.s.Cancel(t.Context(), ids[1], models.CauseCustomer); err != nil {
		t.Fatal(err)
	}
	e.pay(ids[3])
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)

	list := func(f orders.Filter) ([]string, string) {
		t.Helper()
		rows, next, err := e.s.List(t.Context(), f)
		if err != nil {
			t.Fatalf("List %+v: %v", f, err)
		}
		var got []string
		for _, o := range rows {
			got = append(got, o.ID)
		}
		return got, next
	}
	for _, c := range []struct {
		name string
		f    orders.Filter
		want []string
	}{
		{"everything", orders.Filter{}, newestFirst},
		{"pending", orders.Filter{Status: models.OrderPending}, []string{ids[4], ids[2], ids[0]}},
		{"cancelled", orders.Filter{Status: models.OrderCancelled}, []string{ids[1]}},
		{"paid", orders.Filter{Status: models.OrderPaid}, []string{ids[3]}},
		{"one email", orders.Filter{Email: "ayu@example.com"}, []string{ids[4], ids[2], ids[0]}},
		{"one email, padded", orders.Filter{Email: "  budi@example.com "}, []string{ids[1]}},
		{"one email, other case", orders.Filter{Email: "AYU@example.com"}, nil},
		{"email and status", orders.Filter{Email: "ayu@example.com", Status: models.OrderPaid}, nil},
		{"a whole id as prefix", orders.Filter{IDPrefix: ids[2]}, []string{ids[2]}},
		{"the common prefix", orders.Filter{IDPrefix: "ORD-"}, newestFirst},
		{"a wildcard %", orders.Filter{IDPrefix: "ORD%"}, nil},
		{"a wildcard _", orders.Filter{IDPrefix: "ORD_"}, nil},
		{"created from the third on", orders.Filter{From: e.clock.Now().Add(-2 * time.Second)}, []string{ids[4], ids[3], ids[2]}},
	} {
		if got, _ := list(c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	var pages [][]string
	before := ""
	for range len(ids) {
		page, next := list(orders.Filter{Limit: 2, Before: before})
		pages = append(pages, page)
		if next == "" {
			break
		}
		before = next
	}
	if want := [][]string{newestFirst[:2], newestFirst[2:4], newestFirst[4:]}; fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Errorf("pages of 2: %v, want %v", pages, want)
	}
}

// With OpenPerClient set, a client holding that many unpaid, unexpired
// orders is refused the next with too_many_requests and nothing is
// written. Another client, and a request without a client, are not
// counted against it. Cancelling one of its orders frees a place, and so
// does the clock passing an order's expires_at, before any sweep has
// expired it.
func TestOpenOrdersPerClientAreCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.s.OpenPerClient = 2
	e.product("MUG", 1_000, 100)
	from := func(client string) orders.CreateRequest {
		r := request("ayu@example.com", item("MUG", 1))
		r.Client = client
		return r
	}
	first := e.order(from("203.0.113.7"))
	e.clock.Advance(time.Minute)
	e.order(from("203.0.113.7"))

	_, err := e.s.Create(t.Context(), from("203.0.113.7"))
	wantCode(t, err, models.ETooManyRequests, "a third unpaid order from one client")
	if n := e.count("orders", "client_addr = ?", "203.0.113.7"); n != 2 {
		t.Errorf("the client has %d orders, want its 2", n)
	}
	if s := e.stock("MUG"); s != 98 {
		t.Errorf("stock %d after the refused order, want 98", s)
	}
	e.order(from("198.51.100.1"))
	e.order(from(""))
	e.order(from(""))

	if _, err := e.s.Cancel(t.Context(), first.ID, models.CauseCustomer); err != nil {
		t.Fatal(err)
	}
	e.order(from("203.0.113.7")) // in the cancelled order's place
	_, err = e.s.Create(t.Context(), from("203.0.113.7"))
	wantCode(t, err, models.ETooManyRequests, "a third unpaid order after a cancel and a new one")

	e.clock.Advance(ttl + time.Second) // both open orders are past expires_at, still pending
	e.order(from("203.0.113.7"))
	e.order(from("203.0.113.7"))
	_, err = e.s.Create(t.Context(), from("203.0.113.7"))
	wantCode(t, err, models.ETooManyRequests, "a third order once the first two places were taken again")
}

// Orders sent at once from one client are counted one after the other:
// of 10 concurrent orders against a cap of 3, exactly 3 are written and
// the other 7 get too_many_requests.
func TestOpenOrdersPerClientHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.s.OpenPerClient = 3
	e.product("MUG", 1_000, 100)
	const buyers = 10
	errs := make([]error, buyers)
	var fns []func()
	for i := range buyers {
		fns = append(fns, func() {
			req := request(fmt.Sprintf("buyer%d@example.com", i), item("MUG", 1))
			req.Client = "203.0.113.7"
			_, errs[i] = e.s.Create(t.Context(), req)
		})
	}
	testenv.AtOnce(fns...)

	refused := 0
	for _, err := range errs {
		switch models.ErrorCode(err) {
		case "":
		case models.ETooManyRequests:
			refused++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if n := e.count("orders", "client_addr = ?", "203.0.113.7"); n != 3 || refused != buyers-3 {
		t.Errorf("%d orders written and %d refused, want 3 and %d", n, refused, buyers-3)
	}
}

// moveSummary is "SKU kind qty" per movement, for messages.
func moveSummary(ms []models.StockMovement) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %s %d", m.SKU, m.Kind, m.Qty))
	}
	return out
}

// itemSummary is "SKU×qty@price" per item, for messages.
func itemSummary(items []models.OrderItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprintf("%s×%d@%d", it.SKU, it.Qty, it.UnitPrice))
	}
	return out
}

// Create gives each product the quantity asked for it and charges for
// exactly that, whatever the database's collation: 1 mug and 5 Tee take
// 1 mug and 5 Tee from stock and cost 1×75,000 + 5×150,000. (Pairing the
// products, as the database sorts them, with the items, as Go sorts
// them, gives under postgres:16's usual en_US collation 5 mugs and 1
// Tee for 525,000.)
func TestCreateKeepsEachQuantityWithItsSKUUnderAnyCollation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`ALTER TABLE products ALTER COLUMN sku TYPE text COLLATE "en-x-icu"`) // "mug" < "Tee" here, "Tee" < "mug" in Go
	e.product("Tee", 150_000, 10)
	e.product("mug", 75_000, 10)
	o := e.order(request("ayu@example.com", item("mug", 1), item("Tee", 5)))
	e.wantStock(map[string]int64{"mug": 9, "Tee": 5})
	if want := int64(75_000 + 5*150_000); o.TotalAmount != want {
		t.Errorf("total %d, want %d", o.TotalAmount, want)
	}
}
