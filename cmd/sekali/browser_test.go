package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// TestBrowserLogIn: a visitor who opens the console is sent to the log-in
// form; a wrong password is refused there with one message and no
// session; the right one leads to the dashboard.
func TestBrowserLogIn(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	ensureAdmin(t, a)
	b := newBrowser(t, a)
	b.expectNetworkError(http.StatusUnauthorized) // the answer to the wrong password

	if st := b.open("/admin"); st != http.StatusOK || b.location() != "/admin/login?next=%2Fadmin" {
		t.Fatalf("GET /admin logged out: status %d at %s; want the log-in form at /admin/login?next=%%2Fadmin", st, b.location())
	}
	b.screenshot("login")

	b.do("type a wrong password",
		chromedp.SendKeys(chromedp.CSS(`input[name="email"]`), testAdminEmail),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "not the password"))
	st := b.follow("submit a wrong password", chromedp.Click(chromedp.CSS(`form[action="/admin/login"] button[type="submit"]`)))
	if st != http.StatusUnauthorized || b.location() != "/admin/login" {
		t.Fatalf("wrong password: status %d at %s; want 401 at /admin/login", st, b.location())
	}
	if msg := b.text(".login .flash.bad"); msg != "Wrong email or password." {
		t.Fatalf("wrong password: message %q, want %q", msg, "Wrong email or password.")
	}
	if h := b.text("h1"); h != "Sekali admin" {
		t.Fatalf("wrong password: h1 %q, want the log-in form's", h)
	}
	if n := browserEval[int](b, "count top bars", `document.querySelectorAll(".topbar").length`); n != 0 {
		t.Fatalf("wrong password: the page has the console's top bar")
	}
	if n := a.count(t, "SELECT count(*) FROM admin_login_failures WHERE email = ?", testAdminEmail); n != 1 {
		t.Fatalf("failed log-ins recorded = %d, want 1", n)
	}
	if n := a.count(t, "SELECT count(*) FROM admin_actions WHERE action = 'login' AND result = 'refused'"); n != 1 {
		t.Fatalf("refused log-ins in the action log = %d, want 1", n)
	}
	if n := a.count(t, "SELECT count(*) FROM sessions"); n != 0 {
		t.Fatalf("sessions after a wrong password = %d, want 0", n)
	}

	// The form kept the email and where the admin was going; the password
	// is typed again.
	if v := browserRun(b, "read the email field", chromedp.Value(chromedp.CSS(`input[name="email"]`))); v != testAdminEmail {
		t.Fatalf("email field after the refusal = %q, want %q", v, testAdminEmail)
	}
	if v := browserRun(b, "read the password field", chromedp.Value(chromedp.CSS(`input[name="password"]`))); v != "" {
		t.Fatalf("the password field kept the wrong password")
	}
	b.do("type the right password", chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), testAdminPassword))
	st = b.follow("submit the right password", chromedp.Click(chromedp.CSS(`form[action="/admin/login"] button[type="submit"]`)))
	if st != http.StatusOK || b.location() != "/admin" {
		t.Fatalf("right password: status %d at %s; want 200 at /admin", st, b.location())
	}
	if h := b.text("h1"); h != "Dashboard" {
		t.Fatalf("after log-in: h1 %q, want Dashboard", h)
	}
	if who := b.text(".topbar .who"); who != testAdminEmail {
		t.Fatalf("after log-in: top bar names %q, want %q", who, testAdminEmail)
	}
	b.do("see the dashboard's figures", chromedp.WaitVisible(chromedp.CSS("#dashboard .stat .value")))
	if n := a.count(t, "SELECT count(*) FROM admin_actions WHERE action = 'login' AND result = 'ok' AND admin_email = ?", testAdminEmail); n != 1 {
		t.Fatalf("successful log-ins in the action log = %d, want 1", n)
	}
	if n := a.count(t, "SELECT count(*) FROM sessions"); n != 1 {
		t.Fatalf("sessions after the log-in = %d, want 1", n)
	}
}

// TestBrowserDashboardLive: with the dashboard open, a paid callback, three
// duplicate deliveries and one conflicting delivery show up in its figures
// within a refresh, without a reload.
func TestBrowserDashboardLive(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	b := loggedInBrowser(t, a)
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})

	deliveries, conflicts := jsStat("Deliveries, 1 h"), jsStat("Conflicts, 24 h")
	before := browserEval[[]string](b, "read the figures", "["+deliveries+", "+conflicts+"]")
	if len(before) != 2 || before[0] != "0" || before[1] != "0" {
		t.Fatalf("dashboard before any callback: deliveries, conflicts = %q; want 0, 0", before)
	}
	b.markPage()

	event, body := "evt_dash_"+id, testenv.SandboxBody(id, "tx-dash", models.EventPaid, 150000)
	if r := a.callback(t, event, body); r.Status != http.StatusOK || r.str("result") != "processed" {
		t.Fatalf("paid callback: %d %s", r.Status, r.Body)
	}
	for range 3 {
		if r := a.callback(t, event, body); r.Status != http.StatusOK || r.str("result") != "duplicate" {
			t.Fatalf("duplicate delivery: %d %s", r.Status, r.Body)
		}
	}
	other := testenv.SandboxBody(id, "tx-dash", models.EventPaid, 150001)
	if r := a.callback(t, event, other); r.Status != http.StatusConflict || r.str("result") != "conflict" {
		t.Fatalf("conflicting delivery: %d %s; want 409 conflict", r.Status, r.Body)
	}

	b.waitFor("the dashboard to count 5 deliveries and 1 conflict",
		deliveries+` === "5" && `+conflicts+` === "1"`, "["+deliveries+", "+conflicts+"]")
	b.assertNotReloaded()
	if share := b.text("#dashboard .grid .stat .sub"); share != "60.0% duplicates" {
		t.Fatalf("last hour's duplicate share = %q, want %q (3 of 5)", share, "60.0% duplicates")
	}
	row := b.text("#dashboard tr.marked")
	if !strings.Contains(row, event) || !strings.Contains(row, id) {
		t.Fatalf("conflicts to look at: %q; want the callback %s of %s", row, event, id)
	}
}

// callbackRowsJS reads the deliveries table of a callback's page: one
// outcome per row, and which rows are marked.
const callbackRowsJS = `(() => {
	const t = document.querySelector("#callback table");
	if (!t) return null;
	return [...t.querySelectorAll("tbody tr")].map(tr =>
		(tr.classList.contains("marked") ? "marked " : "") + (tr.querySelector(".badge") || {textContent: "?"}).textContent.trim());
})()`

// TestBrowserCallbackLive: a callback's page, left open, shows the
// deliveries that arrive after it was loaded, with the conflicting one
// marked, without a reload.
func TestBrowserCallbackLive(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	b := loggedInBrowser(t, a)
	sku := a.newProduct(t, 90000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	event, body := "evt_cb_"+id, testenv.SandboxBody(id, "tx-cb", models.EventPaid, 90000)
	if r := a.callback(t, event, body); r.str("result") != "processed" {
		t.Fatalf("paid callback: %d %s", r.Status, r.Body)
	}
	for range 3 {
		if r := a.callback(t, event, body); r.str("result") != "duplicate" {
			t.Fatalf("duplicate delivery: %d %s", r.Status, r.Body)
		}
	}
	a.eventually(t, 4, "SELECT attempts FROM payment_callbacks WHERE idempotency_key = ?", event)
	a.eventually(t, 4, "SELECT count(*) FROM callback_deliveries")
	cb := a.count(t, "SELECT id FROM payment_callbacks WHERE idempotency_key = ?", event)

	if st := b.open(fmt.Sprintf("/admin/callbacks/%d", cb)); st != http.StatusOK {
		t.Fatalf("GET /admin/callbacks/%d: %d", cb, st)
	}
	if h := b.text("h1"); h != "Callback "+event {
		t.Fatalf("h1 = %q, want %q", h, "Callback "+event)
	}
	deliveries, conflicts := jsStat("Deliveries"), jsStat("Conflicts")
	rows := browserEval[[]string](b, "read the deliveries", callbackRowsJS)
	if got := browserEval[string](b, "read the deliveries figure", deliveries); got != "4" ||
		!slices.Equal(rows, []string{"processed", "duplicate", "duplicate", "duplicate"}) {
		t.Fatalf("callback page: %s deliveries, rows %q; want 4: processed and 3 duplicates, none marked", got, rows)
	}
	b.markPage()

	if r := a.callback(t, event, body); r.str("result") != "duplicate" {
		t.Fatalf("one more duplicate: %d %s", r.Status, r.Body)
	}
	other := testenv.SandboxBody(id, "tx-cb", models.EventPaid, 1)
	if r := a.callback(t, event, other); r.Status != http.StatusConflict {
		t.Fatalf("conflicting delivery: %d %s; want 409", r.Status, r.Body)
	}
	want := `["processed","duplicate","duplicate","duplicate","duplicate","marked conflict"]`
	b.waitFor("the callback page to show 6 deliveries, the conflicting one marked",
		deliveries+` === "6" && `+conflicts+` === "1" && JSON.stringify(`+callbackRowsJS+`) === `+jsString(want),
		"["+deliveries+", "+conflicts+", "+callbackRowsJS+"]")
	b.assertNotReloaded()
	if n := a.count(t, "SELECT count(*) FROM payments WHERE order_id = ?", id); n != 1 {
		t.Fatalf("payments of %s = %d, want 1", id, n)
	}
}

// timelineJS is the text of each event of an order's story.
const timelineJS = `[...document.querySelectorAll("ol.timeline li .what")].map(e => e.textContent.trim())`

// TestBrowserOrderStory: an order's page, open while the order is paid,
// tells its story as it happens: created, the callback, pending → paid,
// the invoice and the email, in that order.
func TestBrowserOrderStory(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	b := loggedInBrowser(t, a)
	sku := a.newProduct(t, 125000, 5)
	id := a.createOrder(t, map[string]int{sku: 2})

	if st := b.open("/admin/orders/" + id); st != http.StatusOK {
		t.Fatalf("GET /admin/orders/%s: %d", id, st)
	}
	story := browserEval[[]string](b, "read the story", timelineJS)
	if len(story) == 0 || story[0] != "order created" || slices.Contains(story, "status pending → paid") {
		t.Fatalf("story of a new order: %q; want it to start with \"order created\", unpaid", story)
	}
	b.markPage()

	a.jobsPay(t, id, 250000)
	paidCallback := fmt.Sprintf("callback sandbox %q: processed", "evt_paid_"+id)
	email := "email " + mail.Key(mail.OrderPaid, id) + ": sent"
	b.waitFor("the story to reach the invoice and the email", `(s => s.includes(`+jsString(paidCallback)+`) &&
		s.includes("status pending → paid") && s.some(w => /^invoice INV-\S+ issued$/.test(w)) && s.includes(`+jsString(email)+`))(`+timelineJS+`)`, timelineJS)
	b.assertNotReloaded()

	story = browserEval[[]string](b, "read the story", timelineJS)
	var number string
	if err := a.DB.Raw("SELECT number FROM invoices WHERE order_id = ?", id).Scan(&number).Error; err != nil || number == "" {
		t.Fatalf("invoice of %s: %q, %v", id, number, err)
	}
	at := func(what string) int {
		i := slices.Index(story, what)
		if i < 0 {
			t.Fatalf("the story has no %q: %q", what, story)
		}
		return i
	}
	created, callback, paid := at("order created"), at(paidCallback), at("status pending → paid")
	invoice, sent := at("invoice "+number+" issued"), at(email)
	if created != 0 || callback <= created || paid <= callback || invoice <= paid || sent <= paid {
		t.Fatalf("story out of order: %q", story)
	}
	for _, job := range []string{jobs.TaskInvoiceGenerate + ":" + id, jobs.TaskEmailSend + ":" + mail.Key(mail.OrderPaid, id)} {
		at("job " + job + ": succeeded")
	}
	if got := browserEval[string](b, "read the invoice figure", jsStat("Invoice")); got != number {
		t.Fatalf("invoice figure = %q, want %q", got, number)
	}
	if n := a.count(t, "SELECT count(*) FROM outbound_emails WHERE key = ? AND status = 'sent'", mail.Key(mail.OrderPaid, id)); n != 1 {
		t.Fatalf("sent emails of %s = %d, want 1", id, n)
	}
}

// jobRowJS finds a job's row in the jobs page's table of executions.
const jobRowJS = `(key => {
	const t = document.querySelector("#list table");
	for (const tr of t ? t.querySelectorAll("tbody tr") : []) {
		const a = tr.cells[0] && tr.cells[0].querySelector("a");
		if (a && a.textContent.trim() === key)
			return {status: tr.cells[1].querySelector(".badge").textContent.trim(), attempts: Number(tr.cells[2].textContent.trim())};
	}
	return null;
})`

// jobRowView is what jobRowJS reads.
type jobRowView struct {
	Status   string `json:"status"`
	Attempts int64  `json:"attempts"`
}

// rerunButton is the Re-run button of key's row in the table of
// executions (the first form on the page for that key).
func rerunButton(key string) chromedp.JSPath {
	return chromedp.JSPath(`document.querySelector('#list form[action="/admin/jobs/rerun"] input[name="key"][value=` +
		jsString(key) + `]').form.querySelector("button")`)
}

// TestBrowserJobsRerun: email jobs fail while the mail server refuses and
// are archived by the queue; once the server is back, the admin re-runs
// one with its button, then the others with the filtered bulk re-run.
// Each runs once more through the guard and each email is sent once.
func TestBrowserJobsRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	rs := testenv.StartRedis(t)
	mailServer := testenv.StartSMTP(t)
	smtp := startSMTPSwitch(t, mailServer.Addr) // refusing
	a := startApp(t, map[string]string{"REDIS_URL": rs.URL(), "SMTP_URL": smtp.URL()})
	insp := asynq.NewInspectorFromRedisClient(rs.Client()) // shares the client, which testenv closes

	sku := a.newProduct(t, 80000, 10)
	ids, keys := make([]string, 3), make([]string, 3)
	for i := range ids {
		ids[i] = a.createOrder(t, map[string]int{sku: 1})
		a.jobsPay(t, ids[i], 80000)
		keys[i] = jobs.TaskEmailSend + ":" + mail.Key(mail.OrderPaid, ids[i])
	}
	// Asynq would retry each for hours (25 times, backing off). Archive
	// them once they have failed, as the queue does after the last retry,
	// so that only the console runs them again.
	attempts := make([]int64, len(keys))
	for i, key := range keys {
		testenv.Eventually(t, key+" to fail and be archived", func() bool {
			return a.count(t, "SELECT count(*) FROM job_executions WHERE idempotency_key = ? AND status = 'failed'", key) == 1 &&
				insp.ArchiveTask(jobs.QueueDefault, key) == nil
		})
		attempts[i] = a.count(t, "SELECT attempts FROM job_executions WHERE idempotency_key = ?", key)
		if e := a.count(t, "SELECT count(*) FROM job_executions WHERE idempotency_key = ? AND last_error LIKE '%554%'", key); e != 1 {
			t.Fatalf("job %s: last error does not show the refusal", key)
		}
	}
	testenv.Eventually(t, "the invoices", func() bool { return a.count(t, "SELECT count(*) FROM invoices") == 3 })
	if n := len(mailServer.Messages()); n != 0 {
		t.Fatalf("messages at the mail server while it refused = %d", n)
	}
	smtp.heal()

	b := loggedInBrowser(t, a)
	if st := b.open("/admin/jobs"); st != http.StatusOK {
		t.Fatalf("GET /admin/jobs: %d", st)
	}
	for i, key := range keys {
		row := browserEval[*jobRowView](b, "read the row of "+key, jobRowJS+"("+jsString(key)+")")
		if row == nil || row.Status != "failed" || row.Attempts != attempts[i] {
			t.Fatalf("jobs page: row of %s = %+v, want failed after %d attempt(s)", key, row, attempts[i])
		}
	}
	archived := browserEval[[]string](b, "read the archived tasks",
		`[...document.querySelectorAll("#list .table-wrap")[1].querySelectorAll("tbody tr td.mono")].map(td => td.textContent.trim())`)
	if !sameStringSet(archived, keys) {
		t.Fatalf("archived tasks on the jobs page: %q, want %q", archived, keys)
	}
	// Each row's buttons on screen, on a desktop and on a phone.
	for _, width := range []int64{desktopWidth, phoneWidth} {
		b.atWidth(width)
		if off := browserEval[[]string](b, "the jobs' buttons off screen", offScreenJS+`("#list")`); len(off) != 0 {
			t.Errorf("at %d px these buttons of the jobs list are off screen: %q", width, off)
		}
	}
	b.screenshot("jobs-390")
	b.atWidth(desktopWidth)
	b.screenshot("jobs")

	// One job, with its button.
	st := b.follow("re-run "+keys[0], chromedp.Click(rerunButton(keys[0])))
	if st != http.StatusOK || !strings.HasPrefix(b.location(), "/admin/jobs?key=") {
		t.Fatalf("re-run %s: status %d at %s; want the jobs page filtered by its key", keys[0], st, b.location())
	}
	if f := b.text(".flash"); !strings.HasPrefix(f, "Job "+keys[0]+": queued") {
		t.Fatalf("flash after the re-run: %q; want %q", f, "Job "+keys[0]+": queued…")
	}
	b.markPage()
	want := fmt.Sprintf(`{"status":"succeeded","attempts":%d}`, attempts[0]+1)
	b.waitFor(keys[0]+" to show succeeded after one more attempt",
		`JSON.stringify(`+jobRowJS+`(`+jsString(keys[0])+`)) === `+jsString(want), jobRowJS+"("+jsString(keys[0])+")")
	b.assertNotReloaded()
	if n := len(mailServer.Messages()); n != 1 {
		t.Fatalf("messages at the mail server after one re-run = %d, want 1", n)
	}

	// The others, with the bulk re-run of the email jobs.
	b.open("/admin/jobs?type=" + url.QueryEscape(jobs.TaskEmailSend))
	st = b.follow("open the bulk re-run", chromedp.Click(chromedp.CSS(`#list a[href^="/admin/jobs/rerun-matching"]`)))
	if st != http.StatusOK || b.location() != "/admin/jobs/rerun-matching?type=email%3Asend" {
		t.Fatalf("bulk re-run link: status %d at %s", st, b.location())
	}
	if h := b.text("h1"); h != "Re-run 2 job(s)?" {
		t.Fatalf("confirmation: h1 %q, want %q", h, "Re-run 2 job(s)?")
	}
	listed := browserEval[[]string](b, "read the listed keys", `[...document.querySelectorAll("main table td.mono")].map(td => td.textContent.trim())`)
	if !sameStringSet(listed, keys[1:]) {
		t.Fatalf("confirmation lists %q, want %q", listed, keys[1:])
	}
	st = b.follow("confirm the bulk re-run", chromedp.Click(chromedp.CSS(`form[action="/admin/jobs/rerun-matching"] button[type="submit"]`)))
	if st != http.StatusOK || b.location() != "/admin/jobs?type=email%3Asend" {
		t.Fatalf("bulk re-run: status %d at %s", st, b.location())
	}
	if f := b.text(".flash"); f != "Re-run: 2 queued." {
		t.Fatalf("flash after the bulk re-run: %q, want %q", f, "Re-run: 2 queued.")
	}
	b.markPage()
	var cond, state []string
	for i, key := range keys {
		row := jobRowJS + "(" + jsString(key) + ")"
		cond = append(cond, `JSON.stringify(`+row+`) === `+jsString(fmt.Sprintf(`{"status":"succeeded","attempts":%d}`, attempts[i]+1)))
		state = append(state, row)
	}
	b.waitFor("every email job to show succeeded after one more attempt", strings.Join(cond, " && "), "["+strings.Join(state, ", ")+"]")
	b.assertNotReloaded()

	// The effects: each email sent once, with the Message-ID recorded.
	msgs := mailServer.Messages()
	var recorded []string
	if err := a.DB.Raw("SELECT message_id FROM outbound_emails WHERE status = 'sent' ORDER BY id").Scan(&recorded).Error; err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(msgs))
	for i, m := range msgs {
		got[i] = m.MessageID
	}
	if len(msgs) != 3 || !sameStringSet(got, recorded) {
		t.Fatalf("messages at the mail server: %q; want one per order, the sent ones recorded: %q", got, recorded)
	}
	for i, key := range keys {
		if n := a.count(t, "SELECT attempts FROM job_executions WHERE idempotency_key = ? AND status = 'succeeded'", key); n != attempts[i]+1 {
			t.Fatalf("job %s: %d attempts, want %d", key, n, attempts[i]+1)
		}
	}
	if n := a.count(t, "SELECT count(*) FROM admin_actions WHERE action IN ('re-run job', 'bulk re-run') AND result = 'ok'"); n != 2 {
		t.Fatalf("re-runs in the action log = %d, want 2", n)
	}
	a.verify(t)
}

// sameStringSet reports whether a and b hold the same strings, in any order.
func sameStringSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestBrowserCrossOriginPostRefused: a page of another origin (same site:
// localhost on another port, so the SameSite=Lax cookie goes along) makes
// the logged-in admin's browser post the cancel form of a pending order.
// The console refuses it with 403; the order stays pending and the session
// still works — the same cancel from the console's own page goes through.
func TestBrowserCrossOriginPostRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	b := loggedInBrowser(t, a)
	b.expectNetworkError(http.StatusForbidden)
	sku := a.newProduct(t, 70000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	cancelURL := b.base + "/admin/orders/" + id + "/cancel"

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>Win a prize</title><script src="/go.js" defer></script></head>
<body><form id="f" method="post" action=%q><input type="hidden" name="confirm" value="yes"></form></body></html>`, cancelURL)
		case "/go.js":
			w.Header().Set("Content-Type", "text/javascript")
			io.WriteString(w, `document.getElementById("f").submit();`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	ctx, cancel := context.WithTimeout(b.ctx, testenv.Budget(b.t))
	defer cancel()
	sent := chromedp.Events(ctx, network.RequestWillBeSentExtraInfo)
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	responses := chromedp.Events(ctx, network.ResponseReceived)
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.FrameNavigated,
		func(e page.EventFrameNavigated) bool { return e.Frame.ParentID == "" && e.Frame.URL == cancelURL },
		chromedp.Navigate(evilURL))); err != nil {
		t.Fatalf("open the other origin's page and wait for its post: %v", err)
	}
	var post network.RequestID
	for ev, err := range requests {
		if err != nil {
			t.Fatalf("waiting for the post: %v", err)
		}
		if ev.Request.URL == cancelURL {
			if ev.Request.Method != http.MethodPost {
				t.Fatalf("the other origin's page sent %s %s, want POST", ev.Request.Method, cancelURL)
			}
			post = ev.RequestID
			break
		}
	}
	for ev, err := range responses {
		if err != nil {
			t.Fatalf("waiting for the answer to the post: %v", err)
		}
		if ev.RequestID == post {
			if ev.Response.Status != http.StatusForbidden {
				t.Fatalf("cross-origin POST %s: %d, want 403", cancelURL, ev.Response.Status)
			}
			break
		}
	}
	// The browser sent it as a same-site request, with the session
	// cookie: only the console's origin check stood in the way.
	for ev, err := range sent {
		if err != nil {
			t.Fatalf("waiting for the post's headers: %v", err)
		}
		if ev.RequestID != post {
			continue
		}
		if site := fmt.Sprint(ev.Headers["Sec-Fetch-Site"]); site != "same-site" {
			t.Fatalf("Sec-Fetch-Site of the post = %q, want same-site", site)
		}
		withCookie := slices.ContainsFunc(ev.AssociatedCookies, func(c *network.AssociatedCookie) bool {
			return c.Cookie.Name == "sekali_admin" && len(c.BlockedReasons) == 0
		})
		if !withCookie {
			t.Fatalf("the post went without the session cookie: %+v", ev.AssociatedCookies)
		}
		break
	}
	b.waitFor("the refusal page", `document.readyState === "complete" && document.body.innerText.includes("cross-origin requests to the admin console are refused")`,
		`document.body.innerText`)

	if o := a.order(t, id); o.Status != models.OrderPending {
		t.Fatalf("order after the refused post: %s, want pending", o.Status)
	}
	if n := a.count(t, "SELECT count(*) FROM admin_actions WHERE action = 'cancel order'"); n != 0 {
		t.Fatalf("cancels in the action log = %d, want 0", n)
	}

	// Still logged in; the console's own pages do cancel: the order
	// page's link, then the confirmation page's button.
	if st := b.open("/admin/orders/" + id); st != http.StatusOK || b.location() != "/admin/orders/"+id {
		t.Fatalf("order page after the refusal: status %d at %s; want the page, still logged in", st, b.location())
	}
	if st := b.follow("ask to cancel", chromedp.Click(chromedp.CSS(`a[href$="/cancel"]`))); st != http.StatusOK || b.location() != "/admin/orders/"+id+"/cancel" {
		t.Fatalf("the order page's cancel link: status %d at %s, want the confirmation page", st, b.location())
	}
	st := b.follow("cancel from the console", chromedp.Click(chromedp.CSS(`form[action$="/cancel"] button[type="submit"]`)))
	if st != http.StatusOK || b.location() != "/admin/orders/"+id {
		t.Fatalf("cancel from the console: status %d at %s", st, b.location())
	}
	if f := b.text(".flash"); f != "Order "+id+" is cancelled and its stock released." {
		t.Fatalf("flash after the cancel: %q", f)
	}
	if o := a.order(t, id); o.Status != models.OrderCancelled {
		t.Fatalf("order after the console's cancel: %s, want cancelled", o.Status)
	}
}

// TestBrowserLoggedOutCookieOpensNothing: the session cookie, copied out of
// the browser, opens the console until the admin logs out, and nothing
// after.
func TestBrowserLoggedOutCookieOpensNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	b := loggedInBrowser(t, a)

	ctx, cancel := context.WithTimeout(b.ctx, testenv.Budget(b.t))
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{b.base + "/admin"}})
	if err != nil {
		t.Fatalf("read the browser's cookies: %v", err)
	}
	var session *network.Cookie
	for _, c := range res.Cookies {
		if c.Name == "sekali_admin" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("no sekali_admin cookie in the browser: %+v", res.Cookies)
	}
	if !session.HTTPOnly || !session.Secure || !session.Session || session.Path != "/admin" || session.SameSite != network.CookieSameSiteLax {
		t.Fatalf("session cookie %+v; want HttpOnly, Secure, a session cookie, path /admin, SameSite=Lax", session)
	}

	client := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	get := func() (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, a.URL+"/admin", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET /admin with the copied cookie: %v", err)
		}
		defer res.Body.Close()
		io.Copy(io.Discard, res.Body)
		return res.StatusCode, res.Header.Get("Location")
	}
	if st, _ := get(); st != http.StatusOK {
		t.Fatalf("GET /admin with the copied cookie while logged in: %d, want 200", st)
	}

	st := b.follow("log out", chromedp.Click(chromedp.CSS(`.topbar form[action="/admin/logout"] button`)))
	if st != http.StatusOK || b.location() != "/admin/login" {
		t.Fatalf("log out: status %d at %s; want the log-in form", st, b.location())
	}
	if st, loc := get(); st != http.StatusSeeOther || loc != "/admin/login?next=%2Fadmin" {
		t.Fatalf("GET /admin with the cookie of the ended session: %d to %q; want 303 to /admin/login?next=%%2Fadmin", st, loc)
	}
	if n := a.count(t, "SELECT count(*) FROM sessions"); n != 0 {
		t.Fatalf("sessions left in the store after the log-out = %d, want 0", n)
	}
	if st := b.open("/admin"); st != http.StatusOK || b.location() != "/admin/login?next=%2Fadmin" {
		t.Fatalf("the browser after its log-out: status %d at %s; want the log-in form", st, b.location())
	}
}

// TestBrowserScreenshots fills a shop with a realistic hour — paid orders
// with duplicate and conflicting deliveries, a payment that went from
// pending to paid, a failed one, a refused signature, a cancelled order, a
// failed email job — checks that each main page of the console shows it,
// and keeps a full-page screenshot of each for docs/screenshots.
func TestBrowserScreenshots(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	rs := testenv.StartRedis(t)
	mailServer := testenv.StartSMTP(t)
	smtp := startSMTPSwitch(t, mailServer.Addr)
	smtp.heal()
	a := startApp(t, map[string]string{"REDIS_URL": rs.URL(), "SMTP_URL": smtp.URL()})
	testenv.MustCreateProduct(t, a.DB, "DEMO-TSHIRT", 150000, 100)
	testenv.MustCreateProduct(t, a.DB, "DEMO-MUG", 75000, 50)
	testenv.MustCreateProduct(t, a.DB, "DEMO-LIMITED", 250000, 3)
	order := func(email, items string) string {
		t.Helper()
		r := a.postOrder(t, randomKey(), `{"customer_email":"`+email+`","items":[`+items+`]}`)
		if r.Status != http.StatusCreated {
			t.Fatalf("create order: %d %s", r.Status, r.Body)
		}
		return r.str("id")
	}
	deliver := func(event string, body []byte, want string) {
		t.Helper()
		if r := a.callback(t, event, body); r.str("result") != want {
			t.Fatalf("callback %s: %d %s; want %s", event, r.Status, r.Body, want)
		}
	}

	// Paid, delivered four times, then once more with another amount.
	ayu := order("ayu@example.com", `{"sku":"DEMO-TSHIRT","qty":1},{"sku":"DEMO-MUG","qty":2}`)
	paid := testenv.SandboxBody(ayu, "tx-7731", models.EventPaid, 300000)
	deliver("evt_2Qf81kLm", paid, "processed")
	for range 3 {
		deliver("evt_2Qf81kLm", paid, "duplicate")
	}
	deliver("evt_2Qf81kLm", testenv.SandboxBody(ayu, "tx-7731", models.EventPaid, 30000), "conflict")
	// Pending first, then paid, and the paid event once more.
	budi := order("budi@example.com", `{"sku":"DEMO-MUG","qty":1}`)
	deliver("evt_2Qf8Bx01", testenv.SandboxBody(budi, "tx-7732", models.EventPending, 0), "processed")
	deliver("evt_2Qf8Bx02", testenv.SandboxBody(budi, "tx-7732", models.EventPaid, 75000), "processed")
	deliver("evt_2Qf8Bx02", testenv.SandboxBody(budi, "tx-7732", models.EventPaid, 75000), "duplicate")
	// A failed payment, an order still waiting, a cancelled one.
	citra := order("citra@example.com", `{"sku":"DEMO-LIMITED","qty":1}`)
	deliver("evt_2Qf8Cz77", testenv.SandboxBody(citra, "tx-7733", models.EventFailed, 0), "processed")
	dewi := order("dewi@example.com", `{"sku":"DEMO-TSHIRT","qty":1}`)
	// A payment of the wrong amount, refused: kept, for a dry run.
	deliver("evt_2Qf8Dw05", testenv.SandboxBody(dewi, "tx-7734", models.EventPaid, 100000), "rejected")
	eko := order("eko@example.com", `{"sku":"DEMO-MUG","qty":3}`)
	if r := a.do(t, "POST", a.orderAction(eko, "cancel"), nil, nil); r.Status != http.StatusOK {
		t.Fatalf("cancel %s: %d %s", eko, r.Status, r.Body)
	}
	// A delivery signed with another secret.
	forged := testenv.SandboxBody(ayu, "tx-6666", models.EventPaid, 300000)
	h := testenv.SandboxHeaders("evt_forged", forged, time.Now())
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
	if r := a.do(t, "POST", "/callbacks/sandbox", h, forged); r.Status != http.StatusUnauthorized {
		t.Fatalf("forged delivery: %d %s; want 401", r.Status, r.Body)
	}
	testenv.Eventually(t, "the invoices and emails of the paid orders, and the cancelled one's email", func() bool {
		return a.count(t, "SELECT count(*) FROM invoices") == 2 &&
			a.count(t, "SELECT count(*) FROM outbound_emails WHERE status = 'sent' AND key LIKE 'order_paid:%'") == 2 &&
			a.count(t, "SELECT count(*) FROM outbound_emails WHERE status = 'sent' AND key = ?", mail.Key(mail.OrderCancelled, eko)) == 1
	})
	// The mail server goes away: the next paid order's email fails, and
	// the queue gives up on it (archived by hand, so that no retry runs
	// while the pages are read).
	smtp.refuse()
	fajar := order("fajar@example.com", `{"sku":"DEMO-TSHIRT","qty":1}`)
	deliver("evt_2Qf8Fj10", testenv.SandboxBody(fajar, "tx-7736", models.EventPaid, 150000), "processed")
	emailJob := jobs.TaskEmailSend + ":" + mail.Key(mail.OrderPaid, fajar)
	insp := asynq.NewInspectorFromRedisClient(rs.Client())
	testenv.Eventually(t, emailJob+" to fail and be archived", func() bool {
		return a.count(t, "SELECT count(*) FROM job_executions WHERE idempotency_key = ? AND status = 'failed'", emailJob) == 1 &&
			insp.ArchiveTask(jobs.QueueDefault, emailJob) == nil
	})
	const deliveries = 5 + 3 + 1 + 1 + 1 + 1
	a.eventually(t, deliveries, "SELECT count(*) FROM callback_deliveries")

	b := loggedInBrowser(t, a)
	visit := func(path, h1 string) {
		t.Helper()
		if st := b.open(path); st != http.StatusOK {
			t.Fatalf("GET %s: %d", path, st)
		}
		if got := b.text("h1"); got != h1 {
			t.Fatalf("GET %s: h1 %q, want %q", path, got, h1)
		}
	}

	visit("/admin/audit", "Integrity audit")
	b.do("run the audit", chromedp.Click(chromedp.CSS(`form[action="/admin/audit"] button[type="submit"]`)))
	b.waitFor("the audit's verdict", `!!document.querySelector("#audit .flash")`, `document.querySelector("#audit").innerText`)
	if v := b.text("#audit .flash"); !strings.HasPrefix(v, "Green.") {
		t.Fatalf("audit verdict: %q, want green", v)
	}
	b.screenshot("audit")

	visit("/admin", "Dashboard")
	if got := browserEval[[]string](b, "read the dashboard", "["+jsStat("Deliveries, 1 h")+", "+jsStat("Conflicts, 24 h")+", "+
		jsStat("Failed")+", "+jsStat("Archived tasks")+", "+jsStat("Last audit")+"]"); !slices.Equal(got, []string{fmt.Sprint(deliveries), "1", "1", "1", "green"}) {
		t.Fatalf("dashboard: deliveries, conflicts, failed jobs, archived tasks, last audit = %q; want %d, 1, 1, 1, green", got, deliveries)
	}
	b.atWidth(desktopWidth)
	b.screenshot("dashboard")
	b.atWidth(phoneWidth)
	b.screenshot("dashboard-390")
	b.atWidth(desktopWidth)

	visit("/admin/callbacks", "Callbacks")
	if n := browserEval[int](b, "count callbacks", `document.querySelectorAll("#list tbody tr").length`); n != 6 {
		t.Fatalf("callbacks listed: %d, want 6", n)
	}
	if row := b.text("#list tr.marked"); !strings.Contains(row, "evt_2Qf81kLm") {
		t.Fatalf("marked callback row: %q, want evt_2Qf81kLm", row)
	}
	b.screenshot("callbacks")

	cb := a.count(t, "SELECT id FROM payment_callbacks WHERE idempotency_key = 'evt_2Qf81kLm'")
	visit(fmt.Sprintf("/admin/callbacks/%d", cb), "Callback evt_2Qf81kLm")
	want := []string{"processed", "duplicate", "duplicate", "duplicate", "marked conflict"}
	if rows := browserEval[[]string](b, "read the deliveries", callbackRowsJS); !slices.Equal(rows, want) {
		t.Fatalf("deliveries of evt_2Qf81kLm: %q, want %q", rows, want)
	}
	// The conflict's two bodies side by side, and the paths that differ.
	if changes := browserEval[[]string](b, "read the conflict's changes",
		`[...document.querySelectorAll("table.changes tbody tr td:first-child")].map(e => e.textContent.trim())`); len(changes) == 0 ||
		browserEval[int](b, "count the bodies side by side", `document.querySelectorAll(".pair .kept").length`) != 2 {
		t.Fatalf("the conflict's page: changed paths %q, want some, beside the two bodies", changes)
	}
	b.screenshot("callback")

	visit("/admin/orders/"+ayu, "Order "+ayu)
	story := browserEval[[]string](b, "read the story", timelineJS)
	if !slices.Contains(story, "status pending → paid") || !slices.ContainsFunc(story, func(s string) bool { return strings.HasPrefix(s, "invoice INV-") }) {
		t.Fatalf("story of %s: %q", ayu, story)
	}
	b.screenshot("order")

	visit("/admin/deliveries", "Deliveries")
	outcomes := browserEval[[]string](b, "read the deliveries", `[...document.querySelectorAll("#list tbody tr .badge")].map(e => e.textContent.trim())`)
	if len(outcomes) != deliveries || !slices.Contains(outcomes, "conflict") || !slices.Contains(outcomes, "invalid_signature") {
		t.Fatalf("deliveries page: outcomes %q; want %d, a conflict and an invalid signature among them", outcomes, deliveries)
	}
	b.atWidth(desktopWidth)
	b.screenshot("deliveries")
	b.atWidth(phoneWidth)
	b.screenshot("deliveries-390")
	b.atWidth(desktopWidth)

	// The rejected delivery: what it carried, and what it would do now.
	rejected := a.count(t, "SELECT id FROM callback_deliveries WHERE outcome = 'rejected'")
	visit(fmt.Sprintf("/admin/deliveries/%d", rejected), fmt.Sprintf("Delivery #%d", rejected))
	if n := browserEval[int](b, "find apply again", `document.querySelectorAll('form[action$="/apply"]').length`); n != 1 {
		t.Fatalf("the rejected delivery's page: %d apply-again forms, want 1", n)
	}
	b.screenshot("delivery")
	visit(fmt.Sprintf("/admin/deliveries/%d/dry-run", rejected), fmt.Sprintf("What delivery #%d would do now", rejected))
	if v := b.text(".stat .badge"); v != "rejected" {
		t.Fatalf("the dry run's result: %q, want rejected (the amount is still wrong)", v)
	}
	b.screenshot("dry-run")

	// The email job that failed: its attempts, its task in the queue.
	visit("/admin/jobs/"+url.PathEscape(emailJob), emailJob)
	b.screenshot("job")
}

// TestBrowserQueuesUI: the queue's own UI (asynqmon), behind the console,
// loads nothing from another origin (not even fonts) and
// has a way back to the console.
func TestBrowserQueuesUI(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	b := loggedInBrowser(t, a)
	if st := b.open("/admin/queues"); st != http.StatusOK {
		t.Fatalf("/admin/queues: status %d", st)
	}
	b.waitFor("the queue UI to render its queues", `document.querySelector("#root") && document.querySelector("#root").innerText.toLowerCase().includes("queues")`,
		`document.body.innerText`)
	others := browserEval[[]string](b, "the page's resources",
		`performance.getEntriesByType("resource").map(e => e.name).filter(u => !u.startsWith(location.origin))`)
	if len(others) != 0 {
		t.Errorf("the queue UI loaded from other origins: %q", others)
	}
	if st := b.follow("back to the console", chromedp.Click(chromedp.CSS(`#back-to-console`))); st != http.StatusOK || b.location() != "/admin" {
		t.Fatalf("the queue UI's way back: status %d at %s, want the console's dashboard", st, b.location())
	}
}

// topbarRowsJS counts the rows the console's top bar takes: what is
// visible in it (the brand, Menu, each section, the admin, Log out),
// taken by the height of its middle, starts a row where its middle lies
// below the row's first.
const topbarRowsJS = `(() => {
	const rects = [...document.querySelectorAll(".topbar > a, .topbar > label, .topbar > form, .topbar nav a")]
		.map(e => e.getBoundingClientRect()).filter(r => r.width > 0 && r.height > 0)
		.sort((a, b) => (a.top + a.bottom) - (b.top + b.bottom));
	let rows = 0, bottom = -Infinity;
	for (const r of rects) {
		if ((r.top + r.bottom) / 2 > bottom) { rows++; bottom = r.bottom; }
	}
	return rows;
})()`

// TestBrowserConsoleNavigationOnAPhone: the console's top bar is one row
// on a 1280 px screen, every section in it; on a 390 px screen it is at
// most two rows, the sections behind Menu, which shows every one of them
// in sight (wrapping, none behind a sideways scroll); the page never
// scrolls sideways.
func TestBrowserConsoleNavigationOnAPhone(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	// An owner (every section) with a long address: the top bar's widest.
	const owner = "operations.lead.on.call@payments.sekali-shop.example.com"
	addAdmin(t, a, owner, models.RoleOwner)
	b := newBrowser(t, a)
	if st := b.logIn(owner, testAdminPassword); st != http.StatusOK {
		t.Fatalf("log in: %d", st)
	}
	outOfSight := `[...document.querySelectorAll("nav a")]
		.filter(a => { const r = a.getBoundingClientRect(); return r.left < 0 || r.right > window.innerWidth || r.width === 0; })
		.map(a => a.textContent)`
	// A window lower than the page: its scroll bar takes from the width.
	b.do("a desktop's window", chromedp.EmulateViewport(1280, 300))
	if st := b.open("/admin/orders"); st != http.StatusOK {
		t.Fatalf("/admin/orders: %d", st)
	}
	if scrolls := browserEval[bool](b, "the page's height", `document.documentElement.scrollHeight > window.innerHeight`); !scrolls {
		t.Fatal("the page fits a window 300 px high: no scroll bar takes from the top bar's width")
	}
	if rows := browserEval[int](b, "count the top bar's rows", topbarRowsJS); rows != 1 {
		t.Errorf("at 1280 px the top bar takes %d rows, want 1", rows)
	}
	if hidden := browserEval[[]string](b, "the sections out of sight", outOfSight); len(hidden) != 0 {
		t.Errorf("at 1280 px these sections are out of sight: %q", hidden)
	}

	b.do("turn the window into a phone's", chromedp.EmulateViewport(390, 844))
	if st := b.open("/admin/orders"); st != http.StatusOK {
		t.Fatalf("/admin/orders: %d", st)
	}
	if rows := browserEval[int](b, "count the top bar's rows", topbarRowsJS); rows > 2 {
		t.Errorf("at 390 px the top bar takes %d rows, want at most 2", rows)
	}
	b.do("open the menu", chromedp.Click(chromedp.CSS(".topbar .menu-button")))
	if hidden := browserEval[[]string](b, "the sections out of sight", outOfSight); len(hidden) != 0 {
		t.Errorf("on a 390 px screen, the menu open, these sections are out of sight: %q", hidden)
	}
	if wide := browserEval[float64](b, "the page's width", `document.documentElement.scrollWidth`); wide > 390 {
		t.Errorf("the page is %.0f px wide on a 390 px screen: it scrolls sideways", wide)
	}
	if st := b.follow("go to the jobs", chromedp.Click(chromedp.CSS(`nav a[href="/admin/jobs"]`))); st != http.StatusOK || b.location() != "/admin/jobs" {
		t.Errorf("the menu's Jobs: %d at %s", st, b.location())
	}
}

// TestBrowserGatewayCalls: after a customer pressed Pay, the console shows
// the call made to the gateway on the order's page and in the list of
// calls, done at the first attempt.
func TestBrowserGatewayCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, map[string]string{"SANDBOX_GATEWAY": "on"})
	id := a.createOrder(t, map[string]int{a.newProduct(t, 75000, 5): 2})
	if r := a.do(t, "POST", a.orderAction(id, "payment"), nil, nil); r.Status != http.StatusOK {
		t.Fatalf("payment page: %d %s", r.Status, r.Body)
	}
	b := loggedInBrowser(t, a)
	b.open("/admin/orders/" + id)
	calls := browserEval[[]string](b, "read the order's gateway calls",
		`[...document.querySelectorAll("h2")].filter(h => h.innerText === "Calls to the gateway").map(h => h.nextElementSibling.querySelector("tbody").innerText)`)
	if len(calls) != 1 || !strings.Contains(calls[0], "sandbox: create_payment") || !strings.Contains(calls[0], "done") {
		t.Errorf("the order's calls to the gateway: %q, want the one done sandbox create_payment", calls)
	}
	b.open("/admin/gateway-requests")
	if row := b.text("#list tbody tr"); !strings.Contains(row, id) || !strings.Contains(row, "done") {
		t.Errorf("the list of calls: %q, want the order's done call", row)
	}
	b.screenshot("gateway-requests")
}
