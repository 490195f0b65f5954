package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/testenv"
)

// TestBrowserAskAboutAnUnknownRefund: an admin refunds half of a mug
// paid through Stripe while the line to Stripe is down. "Send again now"
// gets no answer: the refund is sent and its outcome unknown, and its
// row — on the order's page and in the list of calls — says it has not
// been asked about yet and when it will be, with "Ask now". Pressed while
// Stripe is still out of reach, "Ask now" asks once: "asked once, next
// at … (in 5m)", the first wait of Stripe's schedule. Pressed once Stripe
// is back, Stripe refunds: the refund is done, its schedule gone, one
// refund at the gateway. The app runs its web role only, so that no one
// but the admin asks: the refund's job and the janitor's runs are the
// worker's.
func TestBrowserAskAboutAnUnknownRefund(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	addr, env := gatewayEnv(t, "stripe")
	env["STRIPE_WEBHOOK_SECRET"] = "whsec_sekali_janitor_browser_0123"
	line := testenv.NewLine(t, "http://"+addr)
	env["STRIPE_API_URL"] = line.URL + "/sandbox/stripe"
	a := startServe(t, env, "--roles=web")
	if _, err := catalog.Seed(context.Background(), a.DB); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, a)
	id := b.buyAndPayOnGatewaysPage("stripe", "stripe") // one mug: Rp 75.000
	ensureAdmin(t, a)
	if st := b.logIn(testAdminEmail, testAdminPassword); st != http.StatusOK {
		t.Fatalf("log in: status %d", st)
	}
	b.refund(id, "stripe", "37500", "one mug arrived chipped", "Rp 37.500", "Rp 37.500", false)
	orderPage := "/admin/orders/" + id

	// Stripe out of reach: sent, and no answer.
	line.Cut(true)
	b.follow("press Send again now", chromedp.Click(chromedp.CSS(`#refund-list form[action$="/retry"] button`)))
	if f := b.text(".flash"); !strings.HasPrefix(f, "The gateway did not answer") {
		t.Fatalf("flash after sending with Stripe out of reach: %q", f)
	}
	schedule := regexp.MustCompile(`^not asked yet, next at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((in \d+s|due now)\)$`)
	if s := b.text("#refund-list .asked"); !schedule.MatchString(s) {
		t.Fatalf("the unknown refund's schedule reads %q", s)
	}

	// Its call's lease passes (20 s), as the clock would let it; then
	// "Ask now", Stripe still out of reach: asked once, still unknown.
	a.passLeases(t, id)
	b.follow("press Ask now", chromedp.Click(chromedp.CSS(`#refund-list form[action$="/retry"] button`)))
	if loc := b.location(); loc != orderPage+"#refunds" {
		t.Fatalf("Ask now went back to %s, want the order's refunds", loc)
	}
	if f := b.text(".flash"); !strings.Contains(f, "is still not known") || !strings.Contains(f, "asked once, next at") {
		t.Fatalf("flash after asking with Stripe out of reach: %q", f)
	}
	schedule = regexp.MustCompile(`^asked once, next at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in [45]m\)$`)
	if s := b.text("#refund-list .asked"); !schedule.MatchString(s) {
		t.Fatalf("after one ask, the schedule reads %q; want asked once, the next ask in Stripe's first wait", s)
	}
	if label := b.text(`#refund-list form[action$="/retry"] button`); label != "Ask now" {
		t.Errorf("the refund's button reads %q, want Ask now", label)
	}
	png := browserRun(b, "screenshot where the page landed", chromedp.CaptureScreenshot())
	b.mu.Lock()
	b.shots["refund-asked-again"] = png
	b.mu.Unlock()

	b.open("/admin/gateway-requests?phase=open")
	row := b.text("#list tbody tr")
	if !strings.Contains(row, id) || !strings.Contains(row, "sent, answer unknown") || !strings.Contains(row, "asked once, next at") || !strings.Contains(row, "Ask now") {
		t.Fatalf("the open calls list: %q; want the refund, sent, asked once, its next ask and Ask now", row)
	}
	b.screenshot("gateway-requests-unknown")

	// Stripe back: "Ask now" sends it again with its key, and Stripe
	// refunds.
	line.Cut(false)
	a.passLeases(t, id)
	b.follow("press Ask now", chromedp.Click(chromedp.CSS(`#list form[action$="/retry"] button`)))
	if f := b.text(".flash"); !strings.HasPrefix(f, "The gateway answered: stripe refund ") || !strings.HasSuffix(f, "of order "+id+" is done.") {
		t.Fatalf("flash after asking with Stripe back: %q", f)
	}
	if n := browserEval[int](b, "count the open calls", `document.querySelectorAll("#list tbody tr form").length`); n != 0 {
		t.Errorf("the open calls still offer %d button(s)", n)
	}
	b.open(orderPage)
	b.waitForRefunds("partially_refunded", "Rp 37.500 refunded", 1)
	if n := browserEval[int](b, "count schedules", `document.querySelectorAll("#refund-list .asked").length`); n != 0 {
		t.Errorf("the done refund still shows %d schedule(s)", n)
	}
	a.expectCounts(t, []countCheck{
		{"the refund, done, asked twice, its schedule over",
			"SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund' AND phase = 'done' AND asks = 2 AND next_ask_at IS NULL AND unknown_since IS NULL", 1},
		{"refunds at the gateway", "SELECT count(*) FROM refunds WHERE order_id = ? AND NOT refund_key LIKE '%:refunded:%'", 1},
		{"the payment's refunded amount", "SELECT refunded_amount FROM payments WHERE order_id = ?", 37500},
		{"Ask now in the action log, still unknown then final", `SELECT count(*) FROM admin_actions WHERE action = 'ask gateway now' AND detail IN ('unknown', 'final')
			AND target = (SELECT 'gateway request ' || id FROM gateway_requests WHERE order_id = ? AND kind = 'refund')`, 2},
	}, id)
}

// passLeases ends the leases of the calls to the gateway of order id: the
// time a call's lease takes to pass, without waiting for it.
func (a *testApp) passLeases(t *testing.T, id string) {
	t.Helper()
	if err := a.DB.Exec("UPDATE gateway_requests SET locked_until = now() - interval '1 second' WHERE order_id = ? AND locked_until IS NOT NULL", id).Error; err != nil {
		t.Fatal(err)
	}
}
