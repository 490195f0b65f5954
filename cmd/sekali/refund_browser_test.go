package main

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestBrowserRefundHalfThenTheRest: on each gateway, a customer buys a
// mug and pays on the gateway's hosted page; an admin then refunds half
// of it from the order's page — the form, the page that asks first, the
// button — and sees the order turn partially_refunded once the gateway
// has answered, then refunds the rest and sees it refunded. The page
// shows the amounts, both refunds done and the calls in the order's
// story; the database has one refund call and one refund per press, and
// the charge refunded in full.
func TestBrowserRefundHalfThenTheRest(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	for _, gw := range gateways.Names() {
		t.Run(gw, func(t *testing.T) {
			t.Parallel()
			_, env := gatewayEnv(t, gw)
			// The sandbox's Pay button reports the payment in the
			// sandbox's format, whatever page it is on: on another
			// gateway's page, the QA panel reports it in that gateway's
			// format, so that the charge — and its refunds — are that
			// gateway's. The app reads it with the gateway's secret.
			format := gw
			if gw == sandbox.Name {
				format = ""
			}
			a := startApp(t, env)
			if _, err := catalog.Seed(context.Background(), a.DB); err != nil {
				t.Fatal(err)
			}
			b := newBrowser(t, a)
			id := b.buyAndPayOnGatewaysPage(gw, format) // one mug: Rp 75.000
			if n := a.count(t, "SELECT count(*) FROM payments WHERE order_id = ? AND provider = ? AND status = 'succeeded'", id, gw); n != 1 {
				t.Fatalf("%s payments of the order: %d, want 1", gw, n)
			}
			ensureAdmin(t, a)
			if st := b.logIn(testAdminEmail, testAdminPassword); st != http.StatusOK || b.location() != "/admin" {
				t.Fatalf("log in: status %d at %s; want 200 at /admin", st, b.location())
			}
			orderPage := "/admin/orders/" + id
			if st := b.open(orderPage); st != http.StatusOK {
				t.Fatalf("GET %s: %d", orderPage, st)
			}
			if left := b.text("#refund-form p.muted"); left != "Up to Rp 75.000 is left to refund through "+gw+". The next page asks before anything is sent." {
				t.Fatalf("the refund form says %q", left)
			}

			// Half, with a reason.
			b.refund(id, gw, "37500", "one mug arrived chipped", "Rp 37.500", "Rp 37.500", gw == "sandbox")
			b.waitForRefunds("partially_refunded", "Rp 37.500 refunded", 1)
			if left := b.text("#refund-form p.muted"); left != "Up to Rp 37.500 is left to refund through "+gw+". The next page asks before anything is sent." {
				t.Fatalf("after half is refunded, the refund form says %q", left)
			}
			if gw == "sandbox" {
				b.screenshot("order-partially-refunded")
				b.onAPhone("the order's refunds", "#refunds, #refund-form, #refund-list")
			}

			// The rest.
			b.refund(id, gw, "37500", "the customer sent the other back", "Rp 37.500", "Rp 0", false)
			b.waitForRefunds("refunded", "Rp 75.000 refunded", 2)
			rows := browserEval[[]refundRowView](b, "read the refunds", refundRowsJS)
			if len(rows) != 2 {
				t.Fatalf("refunds on the page: %+v, want 2", rows)
			}
			for i, want := range []refundRowView{
				{Amount: "Rp 37.500", Reason: "one mug arrived chipped", By: testAdminEmail, Phase: "done"},
				{Amount: "Rp 37.500", Reason: "the customer sent the other back", By: testAdminEmail, Phase: "done"},
			} {
				if got := rows[i]; got.Amount != want.Amount || got.Reason != want.Reason || got.By != want.By || got.Phase != want.Phase ||
					!strings.HasPrefix(got.Refund, gw+":") || len(got.Refund) <= len(gw+": ") {
					t.Errorf("refund %d on the page: %+v, want %+v and the gateway's refund", i+1, got, want)
				}
			}
			if n := browserEval[int](b, "count refund forms", `document.querySelectorAll("#refund-form form").length`); n != 0 {
				t.Errorf("a refunded order still shows %d refund form(s)", n)
			}

			// The story tells both calls — who asked, why, the key — and
			// both changes of status.
			story := browserEval[[]string](b, "read the story", timelineItemsJS)
			for _, want := range []string{
				"refund of 37500 IDR asked of " + gw + ": done\nby " + testAdminEmail + ": one mug arrived chipped; key " + id + "-R1, 1 attempt(s), object ",
				"refund of 37500 IDR asked of " + gw + ": done\nby " + testAdminEmail + ": the customer sent the other back; key " + id + "-R2, 1 attempt(s), object ",
				"status paid → partially_refunded", "status partially_refunded → refunded",
			} {
				if !slices.ContainsFunc(story, func(s string) bool { return strings.HasPrefix(s, want) }) {
					t.Errorf("the story has no %q: %q", want, story)
				}
			}

			a.expectCounts(t, []countCheck{
				{"refund calls", "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund'", 2},
				{"refund calls done, once each, half each", "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund' AND phase = 'done' AND attempts = 1 AND amount = 37500", 2},
				{"refunds", "SELECT count(*) FROM refunds WHERE order_id = ?", 2},
				{"what the refunds add up to", "SELECT coalesce(sum(amount), 0) FROM refunds WHERE order_id = ?", 75000},
				{"the payment's refunded amount", "SELECT refunded_amount FROM payments WHERE order_id = ? AND amount = 75000", 75000},
				{"refunds in the action log", "SELECT count(*) FROM admin_actions WHERE action = 'refund order' AND target = ? AND result = 'ok'", 2},
			}, id)
			a.verify(t)
		})
	}
}

// paidSandboxMug starts an app on the sandbox gateway, with env added to
// its settings and the demo products, and buys and pays one mug (Rp
// 75.000, by ayu@example.com) in a browser: the app, the browser, the
// order's id.
func paidSandboxMug(t *testing.T, env map[string]string) (*testApp, *browser, string) {
	t.Helper()
	_, appEnv := gatewayEnv(t, "sandbox")
	maps.Copy(appEnv, env)
	a := startApp(t, appEnv)
	if _, err := catalog.Seed(context.Background(), a.DB); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, a)
	return a, b, b.buyAndPayOnGatewaysPage("sandbox", "")
}

// refund asks for a refund of amount (major units) of order id, paid
// through gw, with the order page's form and the page that asks first —
// which must name the refund (amountText) and what is left to refund
// after it (leftText) — and lands back on the order's refunds. With
// screenshot, it keeps the page that asks first as refund-confirm.
func (b *browser) refund(id, gw, amount, reason, amountText, leftText string, screenshot bool) {
	t := b.t
	t.Helper()
	orderPage := "/admin/orders/" + id
	if loc := b.location(); loc != orderPage && loc != orderPage+"#refunds" {
		b.open(orderPage)
	}
	// The order's page refreshes itself every 5 s: what is typed in
	// the form stays through a refresh.
	b.do("fill in the refund form",
		chromedp.SendKeys(chromedp.CSS(`#refund-form input[name="amount"]`), amount),
		chromedp.SendKeys(chromedp.CSS(`#refund-form input[name="reason"]`), reason))
	b.markRegion("order")
	b.waitFor("the order's page to refresh itself", regionReplacedJS("order"), `document.querySelector("#order").innerText`)
	if got := browserEval[[]string](b, "read the refund form",
		`[...document.querySelectorAll("#refund-form input[type=text]")].map(i => i.value)`); len(got) != 2 || got[0] != amount || got[1] != reason {
		t.Fatalf("after the page refreshed itself, the refund form holds %q; want what was typed: %q, %q", got, amount, reason)
	}

	st := b.follow("press Refund…", chromedp.Click(chromedp.CSS(`#refund-form button[type="submit"]`)))
	if loc := b.location(); st != http.StatusOK || !strings.HasPrefix(loc, orderPage+"/refund?") {
		t.Fatalf("Refund…: status %d at %s; want the page that asks first", st, loc)
	}
	if h := b.text("h1"); h != "Refund "+amountText+" of order "+id+"?" {
		t.Fatalf("the page that asks first: h1 %q", h)
	}
	fields := browserEval[map[string]string](b, "read what the refund does", `Object.fromEntries([...document.querySelectorAll("main dl.fields dt")]
		.map(dt => [dt.textContent.trim(), dt.nextElementSibling.textContent.trim()]))`)
	if fields["Refund"] != amountText || fields["Left to refund after it"] != leftText || fields["Reason"] != reason || !strings.HasSuffix(fields["Paid"], "through "+gw) {
		t.Fatalf("the page that asks first says %q; want a refund of %s, %s left, the reason and the gateway", fields, amountText, leftText)
	}
	if screenshot {
		b.screenshot("refund-confirm")
		b.onAPhone("the page that asks first", "main")
	}

	st = b.follow("press Refund "+amountText, chromedp.Click(chromedp.CSS(`form[method="post"][action$="/refund"] button.danger`)))
	if loc := b.location(); st != http.StatusOK || loc != orderPage+"#refunds" {
		t.Fatalf("the refund button: status %d at %s; want the order's refunds", st, loc)
	}
	if f := b.text(".flash"); !strings.HasPrefix(f, "Refund of "+amountText+" asked of "+gw+".") {
		t.Fatalf("flash after the refund: %q", f)
	}
	// The page lands on the refunds: the message saying what happened is
	// in sight there, and so is the heading it landed on.
	if out := browserEval[[]string](b, "find what is out of sight", `["#flash .flash", "#refunds"].filter(css => {
		const r = document.querySelector(css).getBoundingClientRect();
		return r.height === 0 || r.top < 0 || r.bottom > window.innerHeight;
	})`); len(out) != 0 {
		t.Fatalf("after the refund, out of sight where the page landed: %q", out)
	}
	if r := browserEval[[]float64](b, "see whether the flash covers the heading", `(() => {
		const f = document.querySelector("#flash .flash").getBoundingClientRect(), h = document.querySelector("#refunds").getBoundingClientRect();
		return [f.top, f.bottom, h.top, h.bottom, window.scrollY];
	})()`); r[1] > r[2] {
		t.Fatalf("after the refund, the message (%.0f–%.0f px) covers the refunds' heading (%.0f–%.0f px), scrolled %.0f px", r[0], r[1], r[2], r[3], r[4])
	}
	if screenshot { // what the window shows where the page landed, not the whole page
		png := browserRun(b, "screenshot where the page landed", chromedp.CaptureScreenshot())
		b.mu.Lock()
		b.shots["order-refund-asked"] = png
		b.mu.Unlock()
	}
}

// waitForRefunds waits on the order's page for the order to be status,
// its total and its payment to show refunded (as "Rp 37.500 refunded")
// and n refunds listed, all done.
func (b *browser) waitForRefunds(status, refunded string, n int) {
	b.t.Helper()
	b.markPage()
	b.waitFor("the order "+status+", "+refunded,
		`document.querySelector("#order .stat .badge").innerText === `+jsString(status)+` &&
		 `+totalSubJS+` === `+jsString(refunded)+` && `+paymentsJS+`.includes(`+jsString(refunded)+`) &&
		 (rows => rows.length === `+strconv.Itoa(n)+` && rows.every(r => r.phase === "done"))(`+refundRowsJS+`)`,
		`[document.querySelector("#order .stat .badge").innerText, `+totalSubJS+`, `+paymentsJS+`, `+refundRowsJS+`]`)
	b.assertNotReloaded()
}

// totalSubJS is the line under the order page's total.
const totalSubJS = `(s => s ? s.innerText.trim() : null)([...document.querySelectorAll("#order .stat")]
	.find(s => s.querySelector(".label").innerText.trim().toLowerCase() === "total").querySelector(".sub"))`

// paymentsJS is the text of the order page's payments table.
const paymentsJS = `[...document.querySelectorAll("#order h2")].find(h => h.innerText === "Payments").nextElementSibling.innerText`

// refundRowsJS reads the order page's refunds table.
const refundRowsJS = `[...document.querySelectorAll("#refund-list tbody tr")].map(tr => ({
	amount: tr.cells[1].innerText.trim(), reason: tr.cells[2].innerText.trim(), by: tr.cells[3].innerText.trim(),
	phase: tr.cells[4].innerText.trim(), refund: tr.cells[5].innerText.trim()}))`

// refundRowView is what refundRowsJS reads of one row.
type refundRowView struct {
	Amount string `json:"amount"`
	Reason string `json:"reason"`
	By     string `json:"by"`
	Phase  string `json:"phase"`
	Refund string `json:"refund"`
}

// timelineItemsJS is the text of each event of an order's story, what
// happened and its detail on their own lines.
const timelineItemsJS = `[...document.querySelectorAll("ol.timeline li")].map(li =>
	[...li.querySelectorAll(".what, .small")].map(e => e.textContent.trim()).join("\n"))`

// markRegion marks the live region id, so that regionReplacedJS tells
// when it was replaced by its next refresh.
func (b *browser) markRegion(id string) {
	b.t.Helper()
	if !browserEval[bool](b, "mark #"+id, `(e => !!e && (e.__sekaliOld = true))(document.getElementById(`+jsString(id)+`))`) {
		b.t.Fatalf("the page has no #%s", id)
	}
}

// regionReplacedJS is true once the live region id marked by markRegion
// was replaced by a newer copy.
func regionReplacedJS(id string) string {
	return `(e => !!e && !e.__sekaliOld)(document.getElementById(` + jsString(id) + `))`
}

// onAPhone checks the current page on a 390 px screen: it does not
// scroll sideways, and the elements matching css are in sight (a table
// may scroll inside its own frame). Then the window is as it was.
func (b *browser) onAPhone(what, css string) {
	b.t.Helper()
	b.do("turn the window into a phone's", chromedp.EmulateViewport(390, 844))
	defer b.do("turn the window back", chromedp.EmulateReset())
	got := browserEval[struct {
		Width float64  `json:"width"`
		Out   []string `json:"out"`
	}](b, "measure "+what, `(() => ({
		width: document.documentElement.scrollWidth,
		out: [...document.querySelectorAll(`+jsString(css)+`)].filter(e => {
			const r = e.getBoundingClientRect();
			return r.width === 0 || r.left < 0 || r.right > window.innerWidth;
		}).map(e => e.tagName + (e.id ? "#" + e.id : "")),
	}))()`)
	if got.Width > 390 || len(got.Out) != 0 {
		b.t.Errorf("%s on a 390 px screen: %.0f px wide, out of sight: %q", what, got.Width, got.Out)
	}
}

// TestBrowserRefundASecondCharge: a customer pays for a mug, then the
// gateway reports a second charge of the same order (the customer paid
// twice). The admin's order page offers that charge back in a card of
// its own; one click refunds it, all of it, once: the page shows the
// charge refunded and the refund done, the order stays paid, and its own
// charge keeps all that can be refunded of it.
func TestBrowserRefundASecondCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a, b, id := paidSandboxMug(t, nil)
	second := "tx-again-" + id
	if r := a.callback(t, "evt_paid_again_"+id, testenv.SandboxBody(id, second, models.EventPaid, 75000)); r.Status != http.StatusOK {
		t.Fatalf("the second charge: %d %s", r.Status, r.Body)
	}
	ensureAdmin(t, a)
	if st := b.logIn(testAdminEmail, testAdminPassword); st != http.StatusOK {
		t.Fatalf("log in: status %d", st)
	}
	orderPage := "/admin/orders/" + id
	b.open(orderPage)
	card := "#refund-form-" + second
	if says := b.text(card + " p"); says != "This order was charged again after it was paid: the customer is owed Rp 75.000 of the charge "+second+"." {
		t.Fatalf("the second charge's card says %q", says)
	}
	b.screenshot("order-second-charge")
	st := b.follow("press Refund in full", chromedp.Click(chromedp.CSS(card+` button.danger`)))
	if loc := b.location(); st != http.StatusOK || loc != orderPage+"#refunds" {
		t.Fatalf("Refund in full: status %d at %s; want the order's refunds", st, loc)
	}
	b.markPage()
	b.waitFor("the second charge refunded",
		`(rows => rows.length === 1 && rows[0].phase === "done" && rows[0].reason === "charged twice")(`+refundRowsJS+`) &&
		 !document.querySelector(`+jsString(card)+`) && /refunded/.test(`+paymentsJS+`)`,
		`[`+refundRowsJS+`, `+paymentsJS+`]`)
	b.assertNotReloaded()
	if badge := b.text("#order .stat .badge"); badge != "paid" {
		t.Errorf("the order is %q after its second charge's refund, want paid", badge)
	}
	if left := b.text("#refund-form p.muted"); !strings.HasPrefix(left, "Up to Rp 75.000 is left to refund through sandbox.") {
		t.Errorf("the order's own refund form says %q; want all of its charge", left)
	}
	a.expectCounts(t, []countCheck{
		{"refund calls, done", "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund' AND phase = 'done'", 1},
		{"the second charge refunded in full", "SELECT count(*) FROM payments WHERE order_id = ? AND status = 'refunded' AND refunded_amount = 75000", 1},
		{"the order's own charge untouched", "SELECT count(*) FROM payments WHERE order_id = ? AND status = 'succeeded' AND refunded_amount = 0", 1},
	}, id)
	a.verify(t)
}

// TestBrowserRefundFailedAtTheGateway: a refund the gateway accepted and
// then failed (the sandbox's refund notification says so, with the
// bank's reason) turns the order back to paid on its page, without a
// reload: the refund record failed, the gateway's reason beside it, and
// "Send again…", which leads to the page that asks first with the same
// amount and reason — pressing it asks a new refund, under a new key.
func TestBrowserRefundFailedAtTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a, b, id := paidSandboxMug(t, nil)
	ensureAdmin(t, a)
	if st := b.logIn(testAdminEmail, testAdminPassword); st != http.StatusOK {
		t.Fatalf("log in: status %d", st)
	}
	b.refund(id, "sandbox", "75000", "the mug arrived broken", "Rp 75.000", "Rp 0", false)
	b.waitForRefunds("refunded", "Rp 75.000 refunded", 1)

	// The bank refuses the refund days later; the gateway says so.
	var key, charge string
	a.DB.Raw("SELECT idempotency_key FROM gateway_requests WHERE order_id = ? AND kind = 'refund'", id).Scan(&key)
	a.DB.Raw("SELECT provider_reference FROM payments WHERE order_id = ?", id).Scan(&charge)
	body := `{"order_id":"` + id + `","transaction_id":"` + charge + `","payment_status":"refunded","paid_amount":75000,` +
		`"currency":"IDR","refund_id":"` + key + `","refund_status":"failed","failure_reason":"the customer's card account is closed"}`
	if r := a.callback(t, "evt_refund_failed_"+id, []byte(body)); r.Status != http.StatusOK {
		t.Fatalf("the refund's failure: %d %s", r.Status, r.Body)
	}
	b.markPage()
	b.waitFor("the order paid again, the refund failed",
		`document.querySelector("#order .stat .badge").innerText === "paid" &&
		 (rows => rows.length === 1 && rows[0].phase === "failed")(`+refundRowsJS+`) &&
		 document.querySelector("#refund-list").innerText.includes("card account is closed")`,
		`[document.querySelector("#order .stat .badge").innerText, `+refundRowsJS+`]`)
	b.assertNotReloaded()
	b.screenshot("order-refund-failed")

	orderPage := "/admin/orders/" + id
	st := b.follow("press Send again…", chromedp.Click(chromedp.CSS(`#refund-list a.button`)))
	if loc := b.location(); st != http.StatusOK || !strings.HasPrefix(loc, orderPage+"/refund?") || b.text("h1") != "Refund Rp 75.000 of order "+id+"?" {
		t.Fatalf("Send again…: status %d at %s (%q); want the page that asks first, for Rp 75.000", st, loc, b.text("h1"))
	}
	st = b.follow("press Refund Rp 75.000", chromedp.Click(chromedp.CSS(`form[method="post"][action$="/refund"] button.danger`)))
	if loc := b.location(); st != http.StatusOK || loc != orderPage+"#refunds" {
		t.Fatalf("the refund button: status %d at %s", st, loc)
	}
	b.waitFor("the second refund done",
		`(rows => rows.length === 2 && rows[1].phase === "done")(`+refundRowsJS+`) && document.querySelector("#order .stat .badge").innerText === "refunded"`,
		refundRowsJS)
	a.expectCounts(t, []countCheck{
		{"refund records: one failed after acceptance, one done", "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund' AND (phase = 'done' OR last_error LIKE 'the gateway accepted the refund%')", 2},
		{"refunds at the gateway: one failed, one succeeded", "SELECT count(*) FROM refunds WHERE order_id = ? AND status IN ('failed', 'succeeded')", 2},
	}, id)
	a.verify(t)
}
