package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// checkout posts the order form of sku as a browser would.
func (c *console) checkout(key, sku, qty, email string) page {
	return c.post("/checkout", url.Values{"idempotency_key": {key}, "sku": {sku}, "qty": {qty}, "email": {email}})
}

// formKey is the Idempotency-Key the catalogue rendered into sku's form.
func (c *console) formKey(t *testing.T, sku string) string {
	t.Helper()
	key, ok := c.get("/").Doc(t).Find("#product-" + sku + " input[name=idempotency_key]").Attr("value")
	if !ok || key == "" {
		t.Fatalf("no idempotency key in %s's form", sku)
	}
	return key
}

// The catalogue shows each product with its price and what is left; the
// order form, however often it is posted (a double click, a resubmit, a
// duplicated tab), creates one order and sends every post to its page.
func TestShopCheckoutCreatesOneOrder(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "SHOP-MUG", 75000, 10)
	doc := c.get("/").Doc(t)
	card := doc.Find("#product-SHOP-MUG")
	if price := card.Find(".price").Text(); price != "Rp 75.000" {
		t.Errorf("price shown %q", price)
	}
	if left := strings.TrimSpace(card.Find("#stock-SHOP-MUG").Text()); left != "10 left" {
		t.Errorf("stock shown %q", left)
	}
	key := c.formKey(t, "SHOP-MUG")
	var wg sync.WaitGroup
	start := make(chan struct{})
	locations := make([]string, 5)
	for i := range locations {
		wg.Go(func() {
			<-start
			p := c.checkout(key, "SHOP-MUG", "2", "buyer@example.com")
			if p.StatusCode == http.StatusSeeOther {
				locations[i] = p.Header.Get("Location")
			} else {
				locations[i] = p.Status
			}
		})
	}
	close(start)
	wg.Wait()
	var orders int64
	c.db.Model(&models.Order{}).Count(&orders)
	if orders != 1 {
		t.Fatalf("%d orders from 5 posts of one form, want 1", orders)
	}
	// Every post that got an answer was sent to the one order's page (one
	// may find the first still running: 409 request_in_progress).
	var order string
	for _, loc := range locations {
		if strings.HasPrefix(loc, "/orders/") {
			if order != "" && loc != order {
				t.Errorf("posts went to %q and %q", order, loc)
			}
			order = loc
		} else if !strings.Contains(loc, "409") {
			t.Errorf("a post answered %q", loc)
		}
	}
	if !strings.Contains(order, "?t=") {
		t.Fatalf("the order page %q carries no token", order)
	}
	// A resubmit after the first finished is a replay: the same page.
	if p := c.checkout(key, "SHOP-MUG", "2", "buyer@example.com"); p.Header.Get("Location") != order {
		t.Errorf("resubmit went to %q, want %q", p.Header.Get("Location"), order)
	}
	if stock := c.get("/").Doc(t).Find("#stock-SHOP-MUG").Text(); !strings.Contains(stock, "8 left") {
		t.Errorf("stock after the order: %q", stock)
	}
}

// A refused order form comes back with the message next to its field, in
// the customer's words (no field names, SKUs or codes), and a new key;
// nothing is reserved.
func TestCheckoutErrorsNextToTheField(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "SHOP-LTD", 250000, 3)
	for _, tt := range []struct {
		name, qty, email, field, want string
		status                        int
	}{
		{"bad email", "1", "not-an-email", "email", "Enter an email address such as name@example.com: letters, digits and . _ + - before the @, a domain name after it.", 422},
		{"not a number", "two", "a@example.com", "qty", "Enter how many you want: 1 or more.", 422},
		{"more than the stock", "5", "a@example.com", "qty", "Sorry, only 3 left.", 409},
	} {
		key := c.formKey(t, "SHOP-LTD")
		p := c.checkout(key, "SHOP-LTD", tt.qty, tt.email)
		if p.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, p.StatusCode, tt.status)
		}
		form := p.Doc(t).Find("#product-SHOP-LTD")
		if msg := form.Find("input[name=" + tt.field + "] + .field-error").Text(); msg != tt.want {
			t.Errorf("%s: the %s field says %q, want %q", tt.name, tt.field, msg, tt.want)
		}
		if v, _ := form.Find("input[name=email]").Attr("value"); v != tt.email {
			t.Errorf("%s: the email typed is gone (%q)", tt.name, v)
		}
		if k, _ := form.Find("input[name=idempotency_key]").Attr("value"); k == key {
			t.Errorf("%s: the form comes back with the key whose refusal is stored", tt.name)
		}
	}
	var stock int64
	c.db.Model(&models.Product{}).Where("sku = 'SHOP-LTD'").Pluck("stock", &stock)
	if stock != 3 {
		t.Errorf("stock %d after refused forms, want 3", stock)
	}
	// A product that caps its units per order says so at the quantity.
	testenv.MustCreateProduct(t, c.db, "SHOP-CAP", 1000, 50)
	c.db.Model(&models.Product{}).Where("sku = 'SHOP-CAP'").Update("max_per_order", 2)
	p := c.checkout(c.formKey(t, "SHOP-CAP"), "SHOP-CAP", "3", "a@example.com")
	if msg := p.Doc(t).Find("#product-SHOP-CAP input[name=qty] + .field-error").Text(); p.StatusCode != 422 || msg != "You can order at most 2 of these at once." {
		t.Errorf("3 of a product capped at 2 per order: %d, the quantity says %q", p.StatusCode, msg)
	}
}

// The order page opens only with the order's token; it shows the status,
// the time the stock is held, and a way to pay while pending.
func TestShopOrderPageNeedsItsToken(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "SHOP-TEE", 150000, 5)
	loc := c.checkout(c.formKey(t, "SHOP-TEE"), "SHOP-TEE", "1", "buyer@example.com").Header.Get("Location")
	path, _, _ := strings.Cut(loc, "?")
	for _, bad := range []string{path, path + "?t=wrong"} {
		p := c.get(bad)
		if p.StatusCode != 404 || strings.Contains(p.Body, "buyer@example.com") {
			t.Errorf("%s: %d, want 404 without the order", bad, p.StatusCode)
		}
		if href, _ := p.Doc(t).Find(".card a").Attr("href"); href != "/" {
			t.Errorf("%s: the error page links to %q, want the shop", bad, href)
		}
	}
	p := c.get(loc)
	if p.StatusCode != 200 || p.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the order page: %d Cache-Control=%q", p.StatusCode, p.Header.Get("Cache-Control"))
	}
	doc := p.Doc(t)
	if got := doc.Find(".stat:contains('Status') .badge").Text(); got != "pending" {
		t.Errorf("status shown %q", got)
	}
	if held := doc.Find(".stat:contains('Stock held') .value").Text(); !strings.HasSuffix(held, "s") {
		t.Errorf("countdown shown %q", held)
	}
	pay, _ := doc.Find("form:has(button:contains('Pay now'))").Attr("action")
	if !strings.HasPrefix(pay, "/orders/") || !strings.HasSuffix(strings.Split(pay, "?")[0], "/pay") || !strings.Contains(pay, "?t=") {
		t.Errorf("Pay posts to %q, want /orders/{id}/pay?t=…", pay)
	}
	if live, _ := doc.Find("#order-status").Attr("hx-get"); live != loc {
		t.Errorf("the page refreshes from %q, want %q", live, loc)
	}
}

// The shop's pages answer a whole page or, for htmx, a fragment on one
// URL: they say so to caches.
func TestShopPagesVaryOnHXRequest(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	for _, h := range []http.Header{nil, {"HX-Request": {"true"}}} {
		p := c.do(c.client, "GET", "/", nil, h)
		if p.StatusCode != 200 || !strings.Contains(strings.Join(p.Header.Values("Vary"), ","), "HX-Request") {
			t.Errorf("GET / (%v): %d, Vary %q; want HX-Request in Vary", h, p.StatusCode, p.Header.Values("Vary"))
		}
	}
}

// The shop speaks to customers: the order page names products, not SKUs;
// an order opened with a wrong link is a plain page without status or
// problem codes.
func TestShopSpeaksToCustomers(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "SHOP-NAMED", 1000, 10)
	c.db.Model(&models.Product{}).Where("sku = 'SHOP-NAMED'").Update("name", "Blue enamel mug")
	p := c.checkout(c.formKey(t, "SHOP-NAMED"), "SHOP-NAMED", "1", "a@example.com")
	order := c.get(p.Header.Get("Location")).Doc(t)
	if item := order.Find("table tbody tr td").First().Text(); item != "Blue enamel mug" {
		t.Errorf("the order page lists %q, want the product's name", item)
	}
	missing := c.get("/orders/ORD-01M8S0ATBZHJQZ11VF588GNGT9?t=wrong")
	text := missing.Doc(t).Find("main").Text()
	if missing.StatusCode != 404 || strings.Contains(text, "not_found") || strings.Contains(text, "HTTP 404") || !strings.Contains(text, "We cannot find this page") {
		t.Errorf("an order behind a wrong link: %d %q; want a plain 404 page", missing.StatusCode, text)
	}
}

// Two tabs post the same order form while the first post still runs:
// both land on the one order, the second after waiting for the first,
// not on a bare 409 request_in_progress.
func TestCheckoutPostedTwiceAtOnceLandsOnTheOrder(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "SHOP-TABS", 1000, 10)
	key := c.formKey(t, "SHOP-TABS")
	// Hold the product's row, so that the first post holds its key and
	// waits in the middle of creating the order.
	hold := c.db.Begin()
	if err := hold.Exec("SELECT 1 FROM products WHERE sku = 'SHOP-TABS' FOR UPDATE").Error; err != nil {
		t.Fatal(err)
	}
	locations := make([]string, 2)
	var wg sync.WaitGroup
	first := func() {
		p := c.checkout(key, "SHOP-TABS", "1", "a@example.com")
		locations[0] = p.Header.Get("Location")
	}
	wg.Go(first)
	testenv.Eventually(t, "the first post to wait for the product's row", func() bool {
		var n int64
		c.db.Raw("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return n > 0
	})
	wg.Go(func() {
		p := c.checkout(key, "SHOP-TABS", "1", "a@example.com")
		if p.StatusCode != http.StatusSeeOther {
			t.Errorf("the second post: %d, want 303 to the order", p.StatusCode)
		}
		locations[1] = p.Header.Get("Location")
	})
	// The second post is on its way while the first cannot finish: it
	// finds the key held, and waits for the first instead of answering 409.
	hold.Rollback()
	wg.Wait()
	if locations[0] == "" || locations[0] != locations[1] {
		t.Errorf("the two posts went to %q and %q, want the same order", locations[0], locations[1])
	}
	var n int64
	c.db.Model(&models.Order{}).Count(&n)
	if n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}

// The order page says what the customer was emailed: an order cancelled
// or expired says so, and a refund they were told of that failed since
// says it did not go through — one they were never told of says nothing.
func TestShopOrderPageAgreesWithTheEmails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "SHOP-TOLD", 100000, 10)
	open := func() (string, string) {
		loc := c.checkout(c.formKey(t, "SHOP-TOLD"), "SHOP-TOLD", "1", "buyer@example.com").Header.Get("Location")
		path, _, _ := strings.Cut(strings.TrimPrefix(loc, "/orders/"), "?")
		return path, loc
	}
	flash := func(loc string) string { return c.get(loc).Doc(t).Find("#order-status .flash").Text() }

	cancelled, cancelledPage := open()
	if _, err := c.orders.Cancel(ctx, cancelled, models.CauseCustomer); err != nil {
		t.Fatal(err)
	}
	expired, expiredPage := open()
	if _, err := c.orders.Expire(ctx, expired); err != nil {
		t.Fatal(err)
	}
	if got := flash(cancelledPage); !strings.Contains(got, "This order was cancelled") {
		t.Errorf("a cancelled order's page says %q", got)
	}
	if got := flash(expiredPage); !strings.Contains(got, "expired") {
		t.Errorf("an expired order's page says %q", got)
	}

	paid, paidPage := open()
	tell := func(event string, body string) {
		if code := c.deliver(event, []byte(body)); code != 200 {
			t.Fatalf("%s: %d", event, code)
		}
	}
	tell("evt_pay_"+paid, `{"order_id":"`+paid+`","transaction_id":"tx-`+paid+`","payment_status":"paid","paid_amount":100000,"currency":"IDR"}`)
	refund := func(event, id string, amount int, state models.RefundStatus) {
		tell(event, fmt.Sprintf(`{"order_id":%q,"transaction_id":%q,"payment_status":"refunded","paid_amount":%d,"currency":"IDR","refund_id":%q,"refund_status":%q}`,
			paid, "tx-"+paid, amount, id, state))
	}
	refund("evt_told_"+paid, "r-told", 20000, models.RefundSucceeded)
	refund("evt_quiet_"+paid, "r-quiet", 30000, models.RefundSucceeded)
	// Only r-told's email went out before both failed.
	var told models.Refund
	c.db.Take(&told, "refund_key = ?", "r-told")
	e, err := mail.RefundSucceededIntent(ctx, c.db, paid, told.ID)
	if err == nil {
		err = mail.Deliver(ctx, c.db, mail.LogMailer{Log: testenv.Logger(t)}, "shop@example.com", e)
	}
	if sent, merr := mail.MarkSentTx(c.db, e.Key, time.Now(), false); err != nil || merr != nil || !sent {
		t.Fatalf("r-told's email: %v, %v, %v", sent, err, merr)
	}
	refund("evt_told_failed_"+paid, "r-told", 20000, models.RefundFailed)
	refund("evt_quiet_failed_"+paid, "r-quiet", 30000, models.RefundFailed)
	undone := c.get(paidPage).Doc(t).Find("#order-status .refund-undone")
	if undone.Length() != 1 || !strings.Contains(undone.Text(), "Your refund of Rp 20.000 did not go through") {
		t.Errorf("the paid order's page says of its refunds %q (%d); want r-told's only, undone", undone.Text(), undone.Length())
	}
}
