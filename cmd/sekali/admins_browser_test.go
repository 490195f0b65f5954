package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

	"github.com/sekali/sekali/models"
)

// TestBrowserInviteAndSecondFactor: an owner invites an operator on the
// Admins page; the operator opens the one-time link, chooses a password,
// logs in, sets up a TOTP second factor on their account page, and the
// next log-in asks for its code after the password.
func TestBrowserInviteAndSecondFactor(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	owner := loggedInBrowser(t, a)
	if st := owner.open("/admin/admins"); st != http.StatusOK {
		t.Fatalf("GET /admin/admins: %d", st)
	}
	owner.do("fill in the invitation",
		chromedp.SendKeys(chromedp.CSS(`form[action="/admin/admins/invite"] input[name="email"]`), "op@example.com"),
		chromedp.SetValue(chromedp.CSS(`form[action="/admin/admins/invite"] select[name="role"]`), "operator"))
	if st := owner.follow("invite", chromedp.Click(chromedp.CSS(`form[action="/admin/admins/invite"] button[type="submit"]`))); st != http.StatusOK {
		t.Fatalf("invite: %d", st)
	}
	link := browserRun(owner, "read the link", chromedp.Value(chromedp.CSS(`input[aria-label="Invitation link"]`)))
	if !strings.Contains(link, "/admin/invite/") {
		t.Fatalf("the invitation link: %q", link)
	}
	owner.screenshot("admins")

	op := newBrowser(t, a)
	if st := op.open(link); st != http.StatusOK {
		t.Fatalf("open the invitation: %d", st)
	}
	op.do("choose a password", chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "operator's long password"),
		chromedp.SendKeys(chromedp.CSS(`input[name="confirm"]`), "operator's long password"))
	if st := op.follow("accept", chromedp.Click(chromedp.CSS(`button[type="submit"]`))); st != http.StatusOK || op.location() != "/admin/login" {
		t.Fatalf("accept: %d at %s", st, op.location())
	}
	if n := browserEval[int](op, "look for the seed's words", `document.body.innerText.includes('sekali seed') ? 1 : 0`); n != 0 {
		t.Error("the invited admin's log-in page talks about sekali seed")
	}
	if st := op.logIn("op@example.com", "operator's long password"); st != http.StatusOK || op.location() != "/admin" {
		t.Fatalf("the operator's log-in: %d at %s", st, op.location())
	}
	if n := browserEval[int](op, "look for the Admins link", `document.querySelectorAll('nav a[href="/admin/admins"]').length`); n != 0 {
		t.Error("an operator's navigation shows Admins")
	}
	if st := op.follow("open the account", chromedp.Click(chromedp.CSS(`.topbar a.who`))); st != http.StatusOK || op.location() != "/admin/account" {
		t.Fatalf("the account page: %d at %s", st, op.location())
	}
	op.do("see the QR code", chromedp.WaitVisible(chromedp.CSS(`img[alt^="QR code"]`)))
	if w := browserEval[int](op, "the QR code's width", `document.querySelector('img[alt^="QR code"]').naturalWidth`); w == 0 {
		t.Fatal("the QR code did not load (a data: URL the CSP refused?)")
	}
	op.screenshot("account")
	secret := op.text("code.mono")
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	op.do("type the code", chromedp.SendKeys(chromedp.CSS(`form[action="/admin/account/mfa"] input[name="code"]`), code))
	if st := op.follow("set up", chromedp.Click(chromedp.CSS(`form[action="/admin/account/mfa"] button`))); st != http.StatusOK {
		t.Fatalf("set up the second factor: %d", st)
	}
	if msg := op.text(".flash"); !strings.Contains(msg, "second factor is set up") {
		t.Fatalf("after the set-up: %q", msg)
	}
	op.follow("log out", chromedp.Click(chromedp.CSS(`form[action="/admin/logout"] button`)))
	if st := op.logIn("op@example.com", "operator's long password"); st != http.StatusOK || !strings.HasPrefix(op.location(), "/admin/login/code") {
		t.Fatalf("the password step: %d at %s", st, op.location())
	}
	// The set-up used this step's code; the next step's is accepted.
	next, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	op.do("type the code", chromedp.SendKeys(chromedp.CSS(`input[name="code"]`), next))
	if st := op.follow("log in", chromedp.Click(chromedp.CSS(`button[type="submit"]`))); st != http.StatusOK || op.location() != "/admin" {
		t.Fatalf("the code step: %d at %s", st, op.location())
	}
	if n := a.count(t, "SELECT count(*) FROM admin_users WHERE email = 'op@example.com' AND role = 'operator' AND totp_secret IS NOT NULL"); n != 1 {
		t.Fatalf("the operator's row: %d with a second factor, want 1", n)
	}
}

// TestBrowserRefundApprovedByASecondOwner: above REFUND_APPROVAL_ABOVE a
// refund one owner asks for waits, its money held back and nothing sent;
// the owner who asked sees no Approve button; a second owner approves it
// from the order's page and the refund is sent once.
func TestBrowserRefundApprovedByASecondOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a, first, id := paidSandboxMug(t, map[string]string{"REFUND_APPROVAL_ABOVE": "IDR:50000"})
	ensureAdmin(t, a)
	if st := first.logIn(testAdminEmail, testAdminPassword); st != http.StatusOK {
		t.Fatalf("log in: %d", st)
	}
	orderPage := "/admin/orders/" + id
	first.open(orderPage)
	first.do("fill in the refund form",
		chromedp.SendKeys(chromedp.CSS(`#refund-form input[name="amount"]`), "75000"),
		chromedp.SendKeys(chromedp.CSS(`#refund-form input[name="reason"]`), "the whole order came back"))
	first.follow("press Refund…", chromedp.Click(chromedp.CSS(`#refund-form button[type="submit"]`)))
	if warn := first.text("main .flash.warn"); !strings.Contains(warn, "REFUND_APPROVAL_ABOVE") {
		t.Fatalf("the page that asks first does not say the refund will wait: %q", warn)
	}
	first.follow("press Refund", chromedp.Click(chromedp.CSS(`form[method="post"][action$="/refund"] button.danger`)))
	if f := first.text(".flash"); !strings.Contains(f, "awaits approval") {
		t.Fatalf("flash after the refund: %q", f)
	}
	if n := browserEval[int](first, "look for Approve", `document.querySelectorAll('form[action$="/approve"]').length`); n != 0 {
		t.Fatal("the owner who asked is offered Approve")
	}
	a.expectCounts(t, []countCheck{
		{"refunds waiting", "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund' AND phase = 'awaiting_approval'", 1},
		{"refund jobs written", "SELECT count(*) FROM outbox_messages WHERE task_type = 'refund:send' AND convert_from(payload, 'UTF8') LIKE '%' || ? || '%'", 0},
		{"refunds at the gateway", "SELECT count(*) FROM refunds WHERE order_id = ?", 0},
	}, id)

	addAdmin(t, a, "second@example.com", models.RoleOwner)
	second := newBrowser(t, a)
	if st := second.logIn("second@example.com", testAdminPassword); st != http.StatusOK {
		t.Fatalf("the second owner's log-in: %d", st)
	}
	second.open(orderPage + "#refunds")
	if by := second.text("#refund-list"); !strings.Contains(by, "awaiting approval — asked by "+testAdminEmail) {
		t.Fatalf("the refunds say %q", by)
	}
	second.screenshot("refund-awaiting-approval")
	second.follow("approve", chromedp.Click(chromedp.CSS(`form[action$="/approve"] button`)))
	// The order's page refreshes itself until the gateway has answered.
	second.waitFor("the refund done, approved by the second owner",
		`(() => { const t = document.querySelector("#refund-list").innerText; return t.includes("approved by second@example.com") && t.includes("sbx-rf-"); })()`,
		`document.querySelector("#refund-list").innerText`)
	a.expectCounts(t, []countCheck{
		{"refunds sent once, approved by the second owner", "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund' AND phase = 'done' AND attempts = 1 AND approved_by = 'second@example.com' AND requested_by = '" + testAdminEmail + "'", 1},
		{"refunds at the gateway", "SELECT count(*) FROM refunds WHERE order_id = ?", 1},
	}, id)
	a.verify(t)
}

// TestBrowserViewerLooksWithoutActing: a viewer sees an order with the
// customer's email masked and no refund form; the refund they post all
// the same (from the page, as a form would) is refused (403), nothing
// written.
func TestBrowserViewerLooksWithoutActing(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a, b, id := paidSandboxMug(t, nil)
	addAdmin(t, a, "viewer@example.com", models.RoleViewer)
	if st := b.logIn("viewer@example.com", testAdminPassword); st != http.StatusOK {
		t.Fatalf("the viewer's log-in: %d", st)
	}
	b.open("/admin/orders/" + id)
	page := browserEval[string](b, "read the page", `document.body.innerText`)
	if strings.Contains(page, "ayu@example.com") || !strings.Contains(page, "a***@e***.com") {
		t.Fatal("the viewer's order page does not mask the customer's email")
	}
	if n := browserEval[int](b, "count the refund forms", `document.querySelectorAll('form[action$="/refund"]').length`); n != 0 {
		t.Fatalf("the viewer is shown %d refund forms", n)
	}
	b.expectNetworkError(http.StatusForbidden)
	status := browserRun(b, "post a refund", chromedp.Evaluate[int](`fetch(location.pathname + "/refund", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "confirm=yes&amount=75000&reason=a+viewer+tries&idempotency_key=viewer-tries-0123456789"}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if status != http.StatusForbidden {
		t.Fatalf("a viewer's refund: %d, want 403", status)
	}
	a.expectCounts(t, []countCheck{{"refunds asked", "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund'", 0}}, id)
}
