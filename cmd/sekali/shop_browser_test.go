package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/models"
)

// TestBrowserShopBuyAndPay is the whole flow a person sees, without a
// terminal: the shop, an order placed with a double click (one order),
// the sandbox gateway's page sending ten copies of the payment at once
// over HTTP, and the order page turning paid and showing its invoice and
// email on its own. Then a second order paid in conflict mode shows the
// 409s. The database has one payment, one reservation per item, one
// invoice, and the audit is green.
func TestBrowserShopBuyAndPay(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, map[string]string{"SANDBOX_GATEWAY": "on"})
	if _, err := catalog.Seed(context.Background(), a.DB); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, a)

	if st := b.open("/"); st != http.StatusOK {
		t.Fatalf("the shop: %d", st)
	}
	if price := b.text("#product-DEMO-MUG .price"); price != "Rp 75.000" {
		t.Fatalf("the mug's price: %q", price)
	}
	b.screenshot("shop")
	b.do("fill in the mug's order form",
		chromedp.SetValue(chromedp.CSS(`#product-DEMO-MUG input[name="qty"]`), "2"),
		chromedp.SendKeys(chromedp.CSS(`#product-DEMO-MUG input[name="email"]`), "ayu@example.com"))
	st := b.follow("double-click Place order", chromedp.DoubleClick(chromedp.CSS(`#product-DEMO-MUG button[type="submit"]`)))
	if st != http.StatusOK || !strings.HasPrefix(b.location(), "/orders/ORD-") {
		t.Fatalf("after Place order: %d at %s", st, b.location())
	}
	if n := a.count(t, "SELECT count(*) FROM orders"); n != 1 {
		t.Fatalf("a double click made %d orders, want 1", n)
	}
	orderPage := b.location()
	id := strings.TrimPrefix(strings.SplitN(orderPage, "?", 2)[0], "/orders/")
	if s := b.text(".stat .badge"); s != "pending" {
		t.Fatalf("the new order's status: %q", s)
	}
	b.screenshot("shop-order")

	b.follow("click Pay now", chromedp.Click(chromedp.CSS(`form button.button`)))
	if !strings.HasPrefix(b.location(), "/sandbox/pay/"+id) {
		t.Fatalf("Pay now went to %s", b.location())
	}
	b.do("ask for ten copies at once",
		chromedp.SetValue(chromedp.CSS(`input[name="copies"]`), "10"),
		chromedp.SetValue(chromedp.CSS(`select[name="mode"]`), "concurrent"))
	b.follow("send the callbacks", chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
	b.markPage()
	b.waitFor("ten deliveries, one processed and nine duplicates",
		`document.querySelectorAll("#deliveries tbody .badge.ok").length === 1 && document.querySelectorAll("#deliveries tbody .badge.info").length === 9`,
		`document.querySelector("#deliveries").innerText`)
	b.assertNotReloaded()
	b.screenshot("sandbox")
	// On a phone each delivery is a block whose fields wrap, in sight
	// whole: no row cut at the screen's edge, no sideways scroll.
	b.onAPhone("the sandbox gateway's page", "#deliveries, #deliveries tbody tr, .gateway-card")

	b.open(orderPage)
	b.markPage()
	// The invoice and the email are jobs: on a machine busy with every
	// other test they may fail a first time and come back after a retry
	// delay (1 s, 2 s, 4 s, …), so this waits longer than a page update.
	// No SMTP_URL here: the email goes to the log, and the page must not
	// say it was sent.
	b.waitFor("the order paid, with its invoice and its email logged, not sent",
		`document.querySelector("#order-status .badge") && document.querySelector("#order-status .badge").innerText === "paid" &&
		 /INV-\d{4}-\d{6}/.test(document.querySelector("#order-status").innerText) &&
		 `+jsStat("Confirmation email")+` === "logged" &&
		 document.querySelector("#order-status").innerText.includes("not sent: SMTP_URL is unset")`,
		`document.querySelector("#order-status").innerText`)
	b.assertNotReloaded()
	b.screenshot("shop-paid")

	a.expectCounts(t, []countCheck{
		{"payments", "SELECT count(*) FROM payments WHERE order_id = ?", 1},
		{"succeeded payments", "SELECT count(*) FROM payments WHERE order_id = ? AND status = 'succeeded'", 1},
		{"reservations of the mug", "SELECT count(*) FROM stock_movements WHERE order_id = ? AND kind = 'reserve'", 1},
		{"invoices", "SELECT count(*) FROM invoices WHERE order_id = ?", 1},
		{"emails done, to the log", "SELECT count(*) FROM outbound_emails WHERE key = 'order_paid:' || ? AND status = 'sent' AND logged", 1},
	}, id)
	if a.stock(t, "DEMO-MUG") != 48 {
		t.Errorf("the mug's stock: %d, want 48", a.stock(t, "DEMO-MUG"))
	}

	// A second order, paid in conflict mode: the 409s are listed.
	b.open("/")
	b.do("fill in the T-shirt's order form",
		chromedp.SendKeys(chromedp.CSS(`#product-DEMO-TSHIRT input[name="email"]`), "budi@example.com"))
	b.follow("Place order", chromedp.Click(chromedp.CSS(`#product-DEMO-TSHIRT button[type="submit"]`)))
	b.follow("click Pay now", chromedp.Click(chromedp.CSS(`form button.button`)))
	b.do("ask for conflicting copies",
		chromedp.SetValue(chromedp.CSS(`input[name="copies"]`), "3"),
		chromedp.SetValue(chromedp.CSS(`select[name="mode"]`), "conflict"))
	b.follow("send the callbacks", chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
	b.waitFor("the conflicting deliveries answered 409",
		`[...document.querySelectorAll("#deliveries tbody tr.marked")].some(r => r.innerText.includes("409"))`,
		`document.querySelector("#deliveries").innerText`)
	a.verify(t)
}

// TestBrowserShopCardsLineUp: at 1280 px the products share the whole row,
// and their "Place order" buttons line up although one name wraps onto a
// second line.
func TestBrowserShopCardsLineUp(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, map[string]string{"SANDBOX_GATEWAY": "on"})
	if _, err := catalog.Seed(context.Background(), a.DB); err != nil {
		t.Fatal(err)
	}
	long := models.Product{SKU: "LONG-NAME", Name: "A limited print whose name is long enough to wrap onto a second line", Price: 90000, Currency: "IDR", Stock: 5}
	if err := a.DB.Create(&long).Error; err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, a)
	if st := b.open("/"); st != http.StatusOK {
		t.Fatalf("the shop: %d", st)
	}
	layout := browserEval[struct {
		Tops       []float64 `json:"tops"`
		NameLines  float64   `json:"nameLines"`
		UsedWidth  float64   `json:"usedWidth"`
		TotalWidth float64   `json:"totalWidth"`
	}](b, "the cards' layout", `(() => {
		const cards = [...document.querySelectorAll("#catalog .product")];
		const rects = cards.map(c => c.getBoundingClientRect());
		const name = document.querySelector("#product-LONG-NAME h2");
		return {
			tops: cards.map(c => Math.round(c.querySelector("button").getBoundingClientRect().top)),
			nameLines: name.getBoundingClientRect().height / parseFloat(getComputedStyle(name).lineHeight),
			usedWidth: Math.max(...rects.map(r => r.right)) - Math.min(...rects.map(r => r.left)),
			totalWidth: document.querySelector("#catalog").getBoundingClientRect().width,
		};
	})()`)
	if layout.NameLines < 1.5 {
		t.Fatalf("the long name takes %.1f line(s): the test needs it to wrap", layout.NameLines)
	}
	for _, top := range layout.Tops[1:] {
		if top != layout.Tops[0] {
			t.Errorf("the Place order buttons start at %v px: not in line", layout.Tops)
			break
		}
	}
	if layout.UsedWidth < 0.95*layout.TotalWidth {
		t.Errorf("the cards use %.0f of the row's %.0f px", layout.UsedWidth, layout.TotalWidth)
	}
}

// TestBrowserPayOnEachGatewaysPage: with PAYMENT_GATEWAY naming each
// paid gateway of the registry (its API answered by the sandbox
// gateway's emulation), a customer buys, presses Pay now, lands on the
// hosted page the gateway made, pays there, comes back to the shop's host, and sees the order paid;
// Sekali asked the gateway once.
func TestBrowserPayOnEachGatewaysPage(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	for _, gw := range gateways.Paid() {
		t.Run(gw, func(t *testing.T) {
			t.Parallel()
			_, env := gatewayEnv(t, gw)
			a := startApp(t, env)
			if _, err := catalog.Seed(context.Background(), a.DB); err != nil {
				t.Fatal(err)
			}
			b := newBrowser(t, a)
			id := b.buyAndPayOnGatewaysPage(gw, "")
			if n := a.count(t, "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND provider = ? AND phase = 'done' AND attempts = 1", id, gw); n != 1 {
				t.Errorf("done %s requests of the order: %d, want 1", gw, n)
			}
		})
	}
}

// buyAndPayOnGatewaysPage buys one demo mug in the shop (catalog.Seed),
// presses Pay now, pays on the hosted page of gw — the app's
// PAYMENT_GATEWAY (gatewayEnv) — and waits on the shop's order page for
// the order to be paid. It returns the order's id.
//
// With format "", it presses the page's Pay button, as a customer does:
// the sandbox gateway reports that payment in the sandbox's format. With
// a format (a gateway whose notifications the app reads), the page's QA
// panel sends one paid notification in that format instead, so that the
// payment is that gateway's charge.
func (b *browser) buyAndPayOnGatewaysPage(gw, format string) string {
	t := b.t
	t.Helper()
	b.open("/")
	b.do("fill in the mug's order form",
		chromedp.SendKeys(chromedp.CSS(`#product-DEMO-MUG input[name="email"]`), "ayu@example.com"))
	b.follow("Place order", chromedp.Click(chromedp.CSS(`#product-DEMO-MUG button[type="submit"]`)))
	id := strings.TrimPrefix(strings.SplitN(b.location(), "?", 2)[0], "/orders/")
	b.follow("click Pay now", chromedp.Click(chromedp.CSS(`form button.button`)))
	// A gateway's page is on its own origin: the emulated API's
	// (127.0.0.1), not the shop's (localhost). The sandbox's is the
	// shop's own.
	loc := b.location()
	if onShop := strings.HasPrefix(loc, "/"); !strings.Contains(loc, "/sandbox/pay/"+id) || onShop != (gw == "sandbox") {
		t.Fatalf("Pay now went to %s, want %s's page of %s", loc, gw, id)
	}
	if format == "" {
		b.follow("pay on the gateway's page", chromedp.Click(chromedp.CSS(`.gateway-buttons button:not(.secondary)`)))
		// Back where the customer left the shop (localhost), as the return
		// URL the shop gave says, not on the gateway's origin.
		if loc := b.location(); !strings.HasPrefix(loc, "/orders/"+id+"?") {
			t.Errorf("the gateway's page sent the customer back to %s, want the shop's page of %s", loc, id)
		}
	} else {
		orderPage := browserEval[string](b, "read the link back to the order", `document.querySelector(".gateway-card a").href`)
		b.do("ask the QA panel for one payment in "+format+"'s format",
			chromedp.SetValue(chromedp.CSS(`form.filters select[name="outcome"]`), "paid"),
			chromedp.SetValue(chromedp.CSS(`form.filters input[name="copies"]`), "1"),
			chromedp.SetValue(chromedp.CSS(`form.filters select[name="mode"]`), "sequential"),
			chromedp.SetValue(chromedp.CSS(`form.filters select[name="provider"]`), format))
		b.follow("send the payment", chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
		b.waitFor("the payment delivered in "+format+"'s format and processed",
			`[...document.querySelectorAll("#deliveries tbody tr")].some(tr => tr.innerText.includes(`+jsString(format)+`) && tr.innerText.includes("processed"))`,
			`document.querySelector("#deliveries").innerText`)
		b.open(orderPage)
	}
	b.markPage()
	b.waitFor("the order paid",
		`document.querySelector("#order-status .badge") && document.querySelector("#order-status .badge").innerText === "paid"`,
		`document.querySelector("#order-status").innerText`)
	return id
}
