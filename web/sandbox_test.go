package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// newShopOrder places an order through the shop and returns its id and
// token.
func (c *console) newShopOrder(t *testing.T, sku string) (id, token string) {
	t.Helper()
	loc := c.checkout(c.formKey(t, sku), sku, "1", "buyer@example.com").Header.Get("Location")
	u, err := url.Parse(loc)
	if err != nil || !strings.HasPrefix(u.Path, "/orders/") {
		t.Fatalf("checkout went to %q", loc)
	}
	return strings.TrimPrefix(u.Path, "/orders/"), u.Query().Get("t")
}

// pay posts the payment page's form.
func (c *console) pay(id, token string, fields url.Values) page {
	fields.Set("t", token)
	return c.post("/sandbox/pay/"+id, fields)
}

// gatewayResults reads the deliveries the payment page lists: result by
// result, counted.
func (c *console) gatewayResults(t *testing.T, id, token string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	c.get("/sandbox/pay/" + id + "?t=" + url.QueryEscape(token)).Doc(t).Find("#deliveries tbody td .badge").Each(func(_ int, s *goquery.Selection) {
		counts[s.Text()]++
	})
	return counts
}

// Ten copies of the payment, sent at once over HTTP to /callbacks/sandbox,
// pay the order once: one processed, nine duplicates, one payment.
func TestSandboxGatewayConcurrentCopiesPayOnce(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "GW-MUG", 75000, 5)
	id, token := c.newShopOrder(t, "GW-MUG")
	p := c.pay(id, token, url.Values{"outcome": {"paid"}, "copies": {"10"}, "mode": {"concurrent"}, "provider": {"sandbox"}})
	if p.StatusCode != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/sandbox/pay/"+id) {
		t.Fatalf("pay: %d %q", p.StatusCode, p.Header.Get("Location"))
	}
	testenv.Eventually(t, "ten deliveries listed", func() bool {
		r := c.gatewayResults(t, id, token)
		return r["processed"]+r["duplicate"] == 10
	})
	if r := c.gatewayResults(t, id, token); r["processed"] != 1 || r["duplicate"] != 9 {
		t.Errorf("results %v, want 1 processed and 9 duplicate", r)
	}
	var o models.Order
	c.db.Preload("Payments").Take(&o, "id = ?", id)
	if o.Status != models.OrderPaid || len(o.Payments) != 1 || o.Payments[0].Status != models.PaymentSucceeded {
		t.Errorf("order %s with payments %+v, want paid once", o.Status, o.Payments)
	}
}

// Conflict mode: the first copy pays; the others, with a changed body
// under the same event id, are 409s — retried like a gateway would, and
// listed — and change nothing. Out of order: a failure after the payment
// is stale.
func TestSandboxGatewayConflictAndOutOfOrder(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "GW-TEE", 150000, 5)
	id, token := c.newShopOrder(t, "GW-TEE")
	c.pay(id, token, url.Values{"outcome": {"paid"}, "copies": {"3"}, "mode": {"conflict"}, "provider": {"sandbox"}})
	// 1 processed; 2 conflicting deliveries, each tried 3 times (two retries).
	testenv.Eventually(t, "the conflicting deliveries and their retries", func() bool { return c.gatewayResults(t, id, token)["conflict"] == 6 })
	if r := c.gatewayResults(t, id, token); r["processed"] != 1 {
		t.Errorf("results %v, want 1 processed", r)
	}
	doc := c.get("/sandbox/pay/" + id + "?t=" + url.QueryEscape(token)).Doc(t)
	if n := doc.Find("#deliveries tr.marked").Length(); n != 6 {
		t.Errorf("%d marked rows, want the 6 conflicts", n)
	}
	if !strings.Contains(doc.Find("#deliveries").Text(), "retry in") {
		t.Error("the retries are not shown")
	}

	other, otherToken := c.newShopOrder(t, "GW-TEE")
	c.pay(other, otherToken, url.Values{"outcome": {"paid"}, "copies": {"2"}, "mode": {"out_of_order"}, "provider": {"sandbox"}})
	testenv.Eventually(t, "the paid and the late failed events", func() bool {
		r := c.gatewayResults(t, other, otherToken)
		return r["processed"]+r["duplicate"]+r["stale"] == 4
	})
	if r := c.gatewayResults(t, other, otherToken); r["processed"] != 1 || r["stale"] != 1 || r["duplicate"] != 2 {
		t.Errorf("out of order: %v, want 1 processed, 1 duplicate of it, then 1 stale failure and 1 duplicate of that", r)
	}
	var o models.Order
	c.db.Take(&o, "id = ?", other)
	if o.Status != models.OrderPaid {
		t.Errorf("a failure after the payment changed the order to %s", o.Status)
	}
}

// The QA panel speaks each configured gateway's format: five concurrent
// copies of a Midtrans settlement go to /callbacks/midtrans, signed with
// the server key, keyed transaction:status — one processed, four
// duplicates, one Midtrans payment. Each is confirmed with the gateway's
// emulation of Midtrans's status API, which answers only to the server
// key.
func TestSandboxGatewaySpeaksMidtrans(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "GW-MID", 120000, 5)
	id, token := c.newShopOrder(t, "GW-MID")
	if opts := c.get("/sandbox/pay/" + id + "?t=" + url.QueryEscape(token)).Doc(t).Find("select[name=provider] option").Text(); opts != "sandboxmidtrans" {
		t.Errorf("formats offered %q, want sandbox and midtrans", opts)
	}
	sent := c.pay(id, token, url.Values{"outcome": {"paid"}, "copies": {"5"}, "mode": {"sequential"}, "provider": {"midtrans"}})
	// Back on the payment page, the QA panel shows what was sent, ready
	// to send again.
	panel := c.get(sent.Header.Get("Location")).Doc(t)
	chosen := map[string]string{}
	panel.Find("select option[selected]").Each(func(_ int, o *goquery.Selection) {
		chosen[o.Parent().AttrOr("name", "")] = o.AttrOr("value", "")
	})
	if copies := panel.Find("form.filters input[name=copies]").AttrOr("value", ""); copies != "5" || chosen["outcome"] != "paid" || chosen["mode"] != "sequential" || chosen["provider"] != "midtrans" {
		t.Errorf("after sending, the QA panel shows %v and %s copies; want the plan sent: paid, 5, sequential, midtrans", chosen, copies)
	}
	testenv.Eventually(t, "five deliveries listed", func() bool {
		r := c.gatewayResults(t, id, token)
		return r["processed"]+r["duplicate"] == 5
	})
	if r := c.gatewayResults(t, id, token); r["processed"] != 1 || r["duplicate"] != 4 {
		t.Errorf("results %v, want 1 processed and 4 duplicate", r)
	}
	var cb models.PaymentCallback
	c.db.Take(&cb, "order_id = ?", id)
	var o models.Order
	c.db.Preload("Payments").Take(&o, "id = ?", id)
	if cb.Provider != "midtrans" || !strings.HasSuffix(cb.IdempotencyKey, ":settlement") || o.Status != models.OrderPaid ||
		len(o.Payments) != 1 || o.Payments[0].Provider != "midtrans" || o.Payments[0].Amount != 120000 {
		t.Errorf("callback %s %q, order %s, payments %+v: want one Midtrans settlement paying 120000", cb.Provider, cb.IdempotencyKey, o.Status, o.Payments)
	}
	statusURL := c.URL + midtrans.SandboxAPIPath + "/v2/" + cb.TransactionID + "/status"
	if res, err := http.Get(statusURL); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the status API without the server key: %v %v, want 401", res.StatusCode, err)
	}
	client, _ := midtrans.NewStatusClient(midtransKey, c.URL+midtrans.SandboxAPIPath)
	for _, ask := range []string{cb.TransactionID, id} { // by transaction, and by order
		ev, found, err := client.Transaction(context.Background(), ask)
		if err != nil || !found || ev.Key != cb.IdempotencyKey || ev.Amount != 120000 {
			t.Errorf("the status API on %s: %+v %v %v, want the settlement", ask, ev, found, err)
		}
	}
	if _, found, err := client.Transaction(context.Background(), "tx-nobody-made"); found || err != nil {
		t.Errorf("the status API on an unknown transaction: found %v, %v; want Midtrans's 404", found, err)
	}
}

// Lost mode: the gateway takes the payment and never sends its
// notification. The order stays pending until the status poll asks the
// gateway's status endpoint; the answer carries the notification's event
// id, and the poll pays the order once — a second poll is a duplicate.
func TestSandboxGatewayLostNotificationFoundByThePoll(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "GW-CAP", 90000, 5)
	id, token := c.newShopOrder(t, "GW-CAP")
	if p := c.get("/sandbox/status/" + id); p.StatusCode != http.StatusNotFound {
		t.Errorf("status of an order the gateway never charged: %d, want 404", p.StatusCode)
	}
	c.pay(id, token, url.Values{"outcome": {"paid"}, "copies": {"1"}, "mode": {"lost"}, "provider": {"sandbox"}})
	testenv.Eventually(t, "the lost delivery listed", func() bool { return c.gatewayResults(t, id, token)["lost"] == 1 })
	var o models.Order
	c.db.Take(&o, "id = ?", id)
	if o.Status != models.OrderPending {
		t.Fatalf("order %s before the poll, want pending: nothing was sent", o.Status)
	}
	// The status API answers the merchant (the sandbox secret) and the
	// order's customer (its token); to anyone else the order does not
	// exist, so that no one else learns the amount and the event id.
	if p := c.get("/sandbox/status/" + id); p.StatusCode != http.StatusNotFound {
		t.Errorf("the status of a paid order without a credential: %d, want 404", p.StatusCode)
	}
	if p := c.get("/sandbox/status/" + id + "?t=" + url.QueryEscape(token)); p.StatusCode != http.StatusOK {
		t.Errorf("the status with the order's token: %d, want 200", p.StatusCode)
	}
	if _, found, _ := sandbox.NewStatusClient(c.URL, []byte("another key entirely")).Status(context.Background(), id); found {
		t.Error("the status API answered a client with another secret")
	}
	status := sandbox.NewStatusClient(c.URL, testenv.SandboxKey)
	for poll, want := range []int{1, 0} {
		applied, err := c.payments.Poll(context.Background(), []payments.StatusClient{status}, time.Hour)
		if err != nil || applied != want {
			t.Fatalf("poll %d: applied %d (%v), want %d", poll+1, applied, err, want)
		}
	}
	c.db.Preload("Payments").Take(&o, "id = ?", id)
	if o.Status != models.OrderPaid || len(o.Payments) != 1 {
		t.Errorf("order %s with %d payments after the poll, want paid once", o.Status, len(o.Payments))
	}
	var keys []string
	c.db.Model(&models.PaymentCallback{}).Where("order_id = ?", id).Pluck("idempotency_key", &keys)
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "evt_sbx_") {
		t.Errorf("callback keys %v, want the gateway's one event id", keys)
	}
}

// The customer's buttons send one event and go back to the order page;
// the page and the form open only with the order's token; a bad plan is
// a 422.
func TestSandboxGatewayButtonsAndChecks(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "GW-LTD", 250000, 5)
	id, token := c.newShopOrder(t, "GW-LTD")
	if p := c.get("/sandbox/pay/" + id + "?t=nope"); p.StatusCode != 404 {
		t.Errorf("the payment page with a wrong token: %d", p.StatusCode)
	}
	for _, bad := range []url.Values{
		{"outcome": {"paid"}, "copies": {"0"}, "mode": {"sequential"}, "provider": {"sandbox"}},
		{"outcome": {"paid"}, "copies": {"101"}, "mode": {"sequential"}, "provider": {"sandbox"}},
		{"outcome": {"refunded"}, "copies": {"1"}, "mode": {"sequential"}, "provider": {"sandbox"}},
		{"outcome": {"paid"}, "copies": {"1"}, "mode": {"sideways"}, "provider": {"sandbox"}},
		{"outcome": {"paid"}, "copies": {"1"}, "mode": {"sequential"}, "provider": {"acmepay"}}, // a format it does not speak
	} {
		if p := c.pay(id, token, bad); p.StatusCode != 422 {
			t.Errorf("plan %v: %d, want 422", bad, p.StatusCode)
		}
	}
	if p := c.pay(id, "wrong", url.Values{"outcome": {"paid"}, "copies": {"1"}, "mode": {"sequential"}, "provider": {"sandbox"}}); p.StatusCode != 404 {
		t.Errorf("pay with a wrong token: %d, want 404", p.StatusCode)
	}
	page := c.get("/sandbox/pay/" + id + "?t=" + url.QueryEscape(token)).Doc(t)
	if amount := page.Find(".gateway-amount").Text(); amount != "Rp 250.000" {
		t.Errorf("amount shown %q", amount)
	}
	orderURL := "/orders/" + id + "?t=" + url.QueryEscape(token)
	press := func(label string, attempt int) {
		t.Helper()
		form := page.Find("form:has(button:contains('" + label + "'))")
		fields := url.Values{}
		form.Find("input[type=hidden]").Each(func(_ int, s *goquery.Selection) { fields.Set(s.AttrOr("name", ""), s.AttrOr("value", "")) })
		p := c.post("/sandbox/pay/"+id, fields)
		if loc, want := p.Header.Get("Location"), orderURL+"&attempt="+strconv.Itoa(attempt); loc != want {
			t.Fatalf("%s went to %q, want the order page as attempt %d: %q", label, loc, attempt, want)
		}
	}
	// A declined card is one failed attempt: the order stays pending with
	// its stock, and its page offers another try.
	press("Decline the card", 1)
	testenv.Eventually(t, "the declined attempt to be recorded", func() bool {
		var n int64
		c.db.Model(&models.Payment{}).Where("order_id = ? AND status = ?", id, models.PaymentFailed).Count(&n)
		return n == 1
	})
	order := c.get(orderURL).Doc(t)
	if status := order.Find(".stat .badge").First().Text(); status != "pending" {
		t.Errorf("after a declined card the order is %q, want pending", status)
	}
	if !strings.Contains(order.Find(".flash").Text(), "declined") || order.Find("form button:contains('Try again')").Length() != 1 {
		t.Errorf("the order page after a declined card says %q and offers no Try again", order.Find(".flash").Text())
	}
	// Back from attempt 1, whose answer (declined) has landed: the same.
	if order := c.get(orderURL + "&attempt=1").Doc(t); order.Find("form button:contains('Try again')").Length() != 1 {
		t.Errorf("back from the declined attempt 1, the page offers no Try again: %q", order.Find("#order-status").Text())
	}
	// Back from attempt 2, before the gateway has said anything about it:
	// the payment is being confirmed, the page refreshes every second,
	// and offers no second payment — only a way back to the gateway's
	// page for a customer who left it without paying.
	confirming := c.get(orderURL + "&attempt=2").Doc(t)
	live := confirming.Find("#order-status")
	if !strings.Contains(live.Find(".flash").Text(), "Confirming your payment") || live.Find(".button").Length() != 0 {
		t.Errorf("back from attempt 2, the page says %q with buttons %q; want it confirming the payment, without buttons",
			live.Find(".flash").Text(), live.Find(".button").Text())
	}
	if trigger, u := live.AttrOr("hx-trigger", ""), live.AttrOr("hx-get", ""); trigger != "every 1s" || !strings.HasSuffix(u, "&attempt=2") {
		t.Errorf("while confirming, the status refreshes with %q from %q; want every 1s, as attempt 2", trigger, u)
	}
	if live.Find("form button:contains('Back to the payment page')").Length() != 1 {
		t.Error("while confirming, there is no way back to the payment page")
	}
	// Cancelling the payment ends it: the order fails, and its page says
	// why and leads back to the shop.
	press("Cancel the payment", 2)
	testenv.Eventually(t, "the order to fail", func() bool {
		var o models.Order
		c.db.Take(&o, "id = ?", id)
		return o.Status == models.OrderFailed
	})
	failed := c.get(orderURL + "&attempt=2").Doc(t).Find("#order-status")
	if !strings.Contains(failed.Find(".flash").Text(), "Nothing was charged") || failed.Find("a.button[href='/']").Length() != 1 ||
		strings.Contains(failed.Text(), "Confirming") {
		t.Errorf("the failed order's page says %q; want why it closed and a way back to the shop", failed.Text())
	}
}
