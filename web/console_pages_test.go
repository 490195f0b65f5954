package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// texts returns the trimmed text of every match.
func texts(s *goquery.Selection) []string {
	var out []string
	s.Each(func(_ int, e *goquery.Selection) { out = append(out, strings.Join(strings.Fields(e.Text()), " ")) })
	return out
}

// A callback's page shows the event as parsed, its fingerprint, every
// delivery (the conflicting one marked), and what it caused: the status
// change, the payment, and the tasks it wrote.
func TestCallbackPageShowsDeliveriesAndEffect(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "CB-PAGE", 50000, 10)
	o := c.newOrder("CB-PAGE", 2)
	body := testenv.SandboxBody(o.ID, "tx-page", models.EventPaid, o.TotalAmount)
	for i, want := range []int{200, 200, 200} {
		if got := c.deliver("evt_page", body); got != want {
			t.Fatalf("delivery %d: %d", i, got)
		}
	}
	if got := c.deliver("evt_page", testenv.SandboxBody(o.ID, "tx-page", models.EventPaid, 1)); got != http.StatusConflict {
		t.Fatalf("conflicting delivery: %d", got)
	}
	var cb models.PaymentCallback
	c.db.Take(&cb, "idempotency_key = 'evt_page'")
	// The rows of deliveries that applied nothing are written just after
	// their response.
	testenv.Eventually(t, "four delivery rows", func() bool {
		var n int64
		c.db.Model(&models.CallbackDelivery{}).Where("callback_id = ?", cb.ID).Count(&n)
		return n == 4
	})
	doc := c.get(fmt.Sprintf("/admin/callbacks/%d", cb.ID)).Doc(t)
	fields := strings.Join(texts(doc.Find("dl.fields dd")), " | ")
	for _, want := range []string{"evt_page", o.ID, "tx-page", "paid", cb.PayloadHash} {
		if !strings.Contains(fields, want) {
			t.Errorf("the event's fields %q lack %q", fields, want)
		}
	}
	outcomes := texts(doc.Find("h2:contains('Deliveries') + .table-wrap tbody td .badge"))
	if strings.Join(outcomes, ",") != "processed,duplicate,duplicate,conflict" {
		t.Errorf("deliveries' outcomes = %v, want processed, 2 duplicates, conflict", outcomes)
	}
	if n := doc.Find("h2:contains('Deliveries') + .table-wrap tr.marked").Length(); n != 1 {
		t.Errorf("%d marked delivery rows, want the conflicting one", n)
	}
	effect := doc.Find("h2:contains('What it caused') + .table-wrap").Text()
	if !strings.Contains(effect, "pending") || !strings.Contains(effect, "paid") || !strings.Contains(effect, "callback") {
		t.Errorf("the effect table %q does not show pending → paid by the callback", effect)
	}
	tasks := strings.Join(texts(doc.Find("h3:contains('outbox') + .table-wrap td a.mono")), " ")
	for _, want := range []string{"invoice:generate:" + o.ID, "email:send:order_paid:" + o.ID} {
		if !strings.Contains(tasks, want) {
			t.Errorf("tasks %q lack %s", tasks, want)
		}
	}
	if !strings.Contains(doc.Find("h3:contains('Payment') + .table-wrap").Text(), "succeeded") {
		t.Error("the payment is not shown as succeeded")
	}
	// The list shows the callback with its counts, conflicts marked.
	list := c.get("/admin/callbacks?result=conflict").Doc(t)
	row := list.Find("#list tbody tr.marked")
	if row.Length() != 1 || !strings.Contains(row.Text(), "evt_page") {
		t.Errorf("the conflict filter shows %q", list.Find("#list tbody").Text())
	}
}

// An order's page tells its story in time order, from creation to the
// status change its callback made, and offers cancel only while pending.
func TestOrderPageTellsTheStory(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "STORY", 1000, 10)
	paid := c.newOrder("STORY", 1)
	c.deliver("evt_story", testenv.SandboxBody(paid.ID, "tx-story", models.EventPaid, paid.TotalAmount))
	doc := c.get("/admin/orders/" + paid.ID).Doc(t)
	timeline := texts(doc.Find("ol.timeline li .what"))
	wantInOrder := []string{"order created", "stock reserve: STORY × 1", "task written: order:expire:" + paid.ID,
		`callback sandbox "evt_story": processed`, "status pending → paid"}
	at := 0
	for _, line := range timeline {
		if at < len(wantInOrder) && line == wantInOrder[at] {
			at++
		}
	}
	if at != len(wantInOrder) {
		t.Errorf("timeline %q lacks, in order, %q", timeline, wantInOrder[at:])
	}
	if doc.Find("a[href$='/cancel']").Length() != 0 {
		t.Error("a paid order offers to be cancelled")
	}
	pending := c.newOrder("STORY", 1)
	if c.get("/admin/orders/"+pending.ID).Doc(t).Find("a[href$='/cancel']").Length() != 1 {
		t.Error("a pending order offers no cancel")
	}
	// The JSON twin carries the same story.
	var v struct {
		Order    struct{ Status string }
		Timeline []struct{ What string }
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin/orders/"+paid.ID).Body), &v); err != nil || v.Order.Status != "paid" || len(v.Timeline) != len(timeline) {
		t.Errorf("JSON twin: %+v, %v", v, err)
	}
}

// Cancelling from the console asks first, then is the API's cancel: once,
// logged; a paid order refuses, and the refusal is logged too.
func TestConsoleCancel(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "CANCEL", 1000, 10)
	o := c.newOrder("CANCEL", 3)
	// The order page's "Cancel this order…" is a link to a page that
	// asks; a POST without its confirmation cancels nothing and goes there.
	ask := c.get("/admin/orders/"+o.ID).Doc(t).Find("a:contains('Cancel this order')").AttrOr("href", "")
	if ask != "/admin/orders/"+o.ID+"/cancel" {
		t.Fatalf("the order page's cancel leads to %q, want the confirmation page", ask)
	}
	if p := c.post("/admin/orders/"+o.ID+"/cancel", nil); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != ask {
		t.Errorf("a cancel without confirm=yes: %d %q, want 303 to the confirmation page", p.StatusCode, p.Header.Get("Location"))
	}
	var got models.Order
	c.db.Take(&got, "id = ?", o.ID)
	if got.Status != models.OrderPending {
		t.Fatalf("a cancel without confirmation left the order %s", got.Status)
	}
	confirm := c.get(ask).Doc(t)
	form := confirm.Find("form[action='" + ask + "']")
	if !strings.Contains(confirm.Text(), "cannot be undone") || form.Find("input[name=confirm][value=yes]").Length() != 1 ||
		confirm.Find("a:contains('Keep it')").AttrOr("href", "") != "/admin/orders/"+o.ID {
		t.Fatalf("the confirmation page lacks the warning, the confirming form or the way back: %q", confirm.Find("main").Text())
	}
	p := c.post(ask, url.Values{"confirm": {"yes"}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/orders/"+o.ID {
		t.Fatalf("cancel: %d %q", p.StatusCode, p.Header.Get("Location"))
	}
	flash := c.get("/admin/orders/" + o.ID).Doc(t).Find("#flash .flash.ok").Text()
	if !strings.Contains(flash, "cancelled") {
		t.Errorf("flash after cancel: %q", flash)
	}
	var stock int64
	c.db.Model(&models.Product{}).Where("sku = 'CANCEL'").Pluck("stock", &stock)
	var tr models.OrderTransition
	c.db.Take(&tr, "order_id = ?", o.ID)
	if stock != 10 || tr.ToStatus != models.OrderCancelled || tr.Cause != models.CauseAdmin {
		t.Errorf("after cancel: stock %d, transition %+v", stock, tr)
	}
	// Twice is fine (cancelled → cancelled); a paid order is refused.
	c.post("/admin/orders/"+o.ID+"/cancel", url.Values{"confirm": {"yes"}})
	paid := c.newOrder("CANCEL", 1)
	c.deliver("evt_cancel", testenv.SandboxBody(paid.ID, "tx-c", models.EventPaid, paid.TotalAmount))
	if page := c.get("/admin/orders/" + paid.ID + "/cancel").Doc(t); page.Find("form[action$='/cancel']").Length() != 0 {
		t.Error("the confirmation page of a paid order offers to cancel it")
	}
	c.post("/admin/orders/"+paid.ID+"/cancel", url.Values{"confirm": {"yes"}})
	flash = c.get("/admin/orders/" + paid.ID).Doc(t).Find("#flash .flash.bad").Text()
	if !strings.Contains(flash, "can no longer be cancelled") {
		t.Errorf("flash after cancelling a paid order: %q", flash)
	}
	var results []string
	c.db.Model(&models.AdminAction{}).Where("action = 'cancel order'").Order("id").Pluck("result", &results)
	if strings.Join(results, ",") != "ok,ok,refused" {
		t.Errorf("cancel actions logged: %v, want ok, ok, refused", results)
	}
}

// The action log shows a page of rows, newest first, not one row: the
// list without a limit gets the page size, like every other list.
func TestActionsPageListsAPage(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login() // one action: the log-in
	for i := range 3 {
		c.post("/admin/jobs/rerun", url.Values{"key": {fmt.Sprintf("invoice:generate:ORD-NONE%d", i)}}) // refused: no such job
	}
	rows := c.get("/admin/actions").Doc(t).Find("tbody tr")
	if rows.Length() != 4 {
		t.Fatalf("the action log shows %d row(s), want 4 (the log-in and three re-runs)", rows.Length())
	}
	if first := rows.First().Text(); !strings.Contains(first, "ORD-NONE2") {
		t.Errorf("the newest row is %q, want the last re-run", first)
	}
}

// A form posted twice with its Idempotency-Key (a double click) restocks
// once; the key with other values is refused.
func TestRestockFormRunsOnce(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "RESTOCK", 1000, 5)
	doc := c.get("/admin/products/RESTOCK").Doc(t)
	key, ok := doc.Find("input[name=idempotency_key]").Attr("value")
	if !ok || key == "" {
		t.Fatal("the restock form has no idempotency key")
	}
	form := url.Values{"idempotency_key": {key}, "qty": {"7"}}
	var wg sync.WaitGroup
	start := make(chan struct{})
	codes := make([]int, 5)
	for i := range codes {
		wg.Go(func() {
			<-start
			codes[i] = c.post("/admin/products/RESTOCK/restock", form).StatusCode
		})
	}
	close(start)
	wg.Wait()
	var p models.Product
	c.db.Take(&p, "sku = 'RESTOCK'")
	var moves int64
	c.db.Model(&models.StockMovement{}).Where("sku = 'RESTOCK' AND kind = 'adjust' AND qty = 7").Count(&moves)
	if p.Stock != 12 || moves != 1 {
		t.Errorf("after 5 posts of one form: stock %d, %d adjust movements; want 12 and 1 (statuses %v)", p.Stock, moves, codes)
	}
	form.Set("qty", "9")
	page := c.post("/admin/products/RESTOCK/restock", form)
	if page.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page.Doc(t).Find(".field-error").Text(), "different request") {
		t.Errorf("the same key with another qty: %d %q", page.StatusCode, page.Doc(t).Find(".field-error").Text())
	}
	c.db.Take(&p, "sku = 'RESTOCK'")
	if p.Stock != 12 {
		t.Errorf("stock %d after a refused form, want 12", p.Stock)
	}
}

// The new-product form shows a bad value next to its field and creates
// the product with its initial stock once.
func TestCreateProductForm(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	key, _ := c.get("/admin/products").Doc(t).Find("form[action='/admin/products'] input[name=idempotency_key]").Attr("value")
	bad := c.post("/admin/products", url.Values{"idempotency_key": {key}, "sku": {"NEW 1"}, "name": {"New"}, "price": {"100"}, "currency": {"IDR"}, "stock": {"4"}})
	if bad.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("a bad sku: status %d", bad.StatusCode)
	}
	if msg := bad.Doc(t).Find("input[name=sku] + .field-error").Text(); !strings.Contains(msg, "sku") {
		t.Errorf("the sku field's error: %q", msg)
	}
	key2, _ := bad.Doc(t).Find("input[name=idempotency_key]").Attr("value")
	if key2 == key {
		t.Error("a form shown again reuses the key whose refusal is stored")
	}
	good := url.Values{"idempotency_key": {key2}, "sku": {"NEW-1"}, "name": {"New"}, "price": {"100"}, "currency": {"IDR"}, "stock": {"4"}}
	for range 2 {
		if p := c.post("/admin/products", good); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/products/NEW-1" {
			t.Fatalf("create: %d %q\n%s", p.StatusCode, p.Header.Get("Location"), p.Body)
		}
	}
	var adjust int64
	c.db.Model(&models.StockMovement{}).Where("sku = 'NEW-1' AND kind = 'adjust' AND qty = 4").Count(&adjust)
	if adjust != 1 {
		t.Errorf("%d initial adjust movements, want 1", adjust)
	}
	if got := c.get("/admin/products/NEW-1").Doc(t).Find(".stat .value").First().Text(); got != "4" {
		t.Errorf("stock shown %q, want 4", got)
	}
}

// Lists are keyset-paginated: following "Older" walks every row once.
func TestListsPageByKeyset(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "PAGE", 1000, 100)
	var ids []string
	for range 5 {
		ids = append(ids, c.newOrder("PAGE", 1).ID)
	}
	var seen []string
	next := "/admin/orders?limit=2"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		doc := c.get(next).Doc(t)
		seen = append(seen, texts(doc.Find("#list tbody td:first-child a"))...)
		next, _ = doc.Find("a[rel=next]").Attr("href")
	}
	if len(seen) != 5 || seen[0] != ids[4] || seen[4] != ids[0] {
		t.Errorf("pages showed %v, want %v newest first, each once", seen, ids)
	}
}

// Errors answer in the form asked for: problem+json on the API, an HTML
// page to a browser, a fragment for #flash to htmx; a bad filter names
// its parameter.
func TestErrorsNegotiate(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	api := c.do(http.DefaultClient, "GET", "/api/orders/ORD-none", nil, http.Header{"Accept": {"text/html"}})
	if api.StatusCode != 404 || api.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("API 404: %d %s", api.StatusCode, api.Header.Get("Content-Type"))
	}
	html := c.get("/admin/orders/ORD-none")
	if html.StatusCode != 404 || !strings.HasPrefix(html.Header.Get("Content-Type"), "text/html") ||
		html.Doc(t).Find("h1").Text() != "Not found" || html.Doc(t).Find("nav").Length() != 1 {
		t.Errorf("browser 404: %d %s %q", html.StatusCode, html.Header.Get("Content-Type"), html.Doc(t).Find("h1").Text())
	}
	// An address the console does not have: a 404 in the console's frame.
	nope := c.get("/admin/nope")
	if nope.StatusCode != 404 || nope.Doc(t).Find("nav").Length() != 1 || !strings.Contains(nope.Doc(t).Find("main").Text(), "no page /admin/nope") {
		t.Errorf("/admin/nope: %d, with the console's navigation: %v", nope.StatusCode, nope.Doc(t).Find("nav").Length() == 1)
	}
	frag := c.do(c.client, "GET", "/admin/orders?status=lost", nil, http.Header{"HX-Request": {"true"}})
	if frag.StatusCode != 422 || frag.Header.Get("HX-Retarget") != "#flash" || strings.Contains(frag.Body, "<html") ||
		!strings.Contains(frag.Body, "status must be one of") {
		t.Errorf("htmx 422: %d retarget=%q %s", frag.StatusCode, frag.Header.Get("HX-Retarget"), frag.Body)
	}
	m := c.do(http.DefaultClient, "DELETE", "/callbacks/sandbox", nil, http.Header{"Accept": {"application/json"}})
	if m.StatusCode != 405 || !strings.Contains(m.Body, `"code":"method_not_allowed"`) {
		t.Errorf("405: %d %s", m.StatusCode, m.Body)
	}
	unknown := c.do(http.DefaultClient, "GET", "/nowhere", nil, http.Header{"Accept": {"text/html"}})
	if unknown.StatusCode != 404 || !strings.Contains(unknown.Body, "<html") {
		t.Errorf("a browser's unknown page: %d", unknown.StatusCode)
	}
}

// A re-run of a job that succeeded answers "already done" and changes
// nothing; the action is logged.
func TestRerunOfASucceededJobChangesNothing(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	now := time.Now().UTC()
	job := models.JobExecution{IdempotencyKey: "invoice:generate:ORD-RERUN", QueueName: jobs.QueueCritical, ExternalJobID: "invoice:generate:ORD-RERUN",
		BusinessKey: "ORD-RERUN", Status: models.JobSucceeded, Attempts: 1, Fence: 1, WorkerID: "w1", StartedAt: now, FinishedAt: &now}
	if err := c.db.Create(&job).Error; err != nil {
		t.Fatal(err)
	}
	p := c.post("/admin/jobs/rerun", url.Values{"key": {job.IdempotencyKey}})
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("re-run: %d %s", p.StatusCode, p.Body)
	}
	flash := c.get(p.Header.Get("Location")).Doc(t).Find("#flash").Text()
	if !strings.Contains(flash, "already done") {
		t.Errorf("flash %q, want already done", flash)
	}
	var after models.JobExecution
	c.db.Take(&after, "id = ?", job.ID)
	if after.Attempts != 1 || after.Fence != 1 || after.Status != models.JobSucceeded {
		t.Errorf("the job changed: %+v", after)
	}
	var n int64
	c.db.Model(&models.OutboxMessage{}).Count(&n)
	var action models.AdminAction
	c.db.Take(&action, "action = 're-run job'")
	if n != 0 || action.Result != models.ActionNoop || action.Target != job.IdempotencyKey {
		t.Errorf("outbox rows %d, action %+v", n, action)
	}
	// The bulk re-run asks first, with the count.
	confirm := c.get("/admin/jobs/rerun-matching?type=invoice:generate").Doc(t)
	if got := confirm.Find("h1").Text(); got != "Re-run 0 job(s)?" {
		t.Errorf("confirmation: %q", got)
	}
}

// The jobs page offers a re-run only where it can do something: on a
// failed or stuck job, not on one that succeeded or is running; and the
// bulk re-run only when a failed job (or an archived task) matches.
func TestJobsPageOffersReRunsOnlyWhereTheyDoSomething(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	now := time.Now().UTC()
	job := func(order string, status models.JobStatus, lockedUntil time.Time) string {
		key := "invoice:generate:" + order
		j := models.JobExecution{IdempotencyKey: key, QueueName: jobs.QueueCritical, ExternalJobID: key, BusinessKey: order,
			Status: status, Attempts: 1, Fence: 1, WorkerID: "w1", StartedAt: now, LockedUntil: &lockedUntil}
		if err := c.db.Create(&j).Error; err != nil {
			t.Fatal(err)
		}
		return key
	}
	succeeded := job("ORD-DONE", models.JobSucceeded, now)
	running := job("ORD-RUNNING", models.JobProcessing, now.Add(time.Hour))
	stuck := job("ORD-STUCK", models.JobProcessing, now.Add(-time.Hour))
	failed := job("ORD-FAILED", models.JobFailed, now)

	doc := c.get("/admin/jobs").Doc(t)
	for key, want := range map[string]int{succeeded: 0, running: 0, stuck: 1, failed: 1} {
		row := doc.Find("tr:has(td:contains('" + key + "'))")
		if got := row.Find("button:contains('Re-run')").Length(); got != want {
			t.Errorf("%s: %d Re-run button(s), want %d", key, got, want)
		}
	}
	if doc.Find("a:contains('Re-run every failed')").Length() != 1 {
		t.Error("a failed job matches, but the bulk re-run is not offered")
	}
	if c.get("/admin/jobs?key=ORD-DONE").Doc(t).Find("a:contains('Re-run every failed')").Length() != 0 {
		t.Error("nothing failed matches key=ORD-DONE, yet the bulk re-run is offered")
	}
}

// The live audit runs from the page, shows each invariant's verdict with
// the offending rows linked, in the order and with the numbers of `sekali
// verify`, and its verdict reaches the dashboard.
func TestAuditPageAndDashboardVerdict(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	if got := c.get("/admin").Doc(t).Find(".stat:contains('Last audit') .value").Text(); got != "never run" {
		t.Errorf("dashboard before any audit: %q", got)
	}
	testenv.MustCreateProduct(t, c.db, "AUDIT", 1000, 10)
	c.db.Exec("UPDATE products SET stock = 11 WHERE sku = 'AUDIT'") // a bug: stock without a movement
	doc := c.post("/admin/audit", url.Values{"drain_timeout": {"0s"}}).Doc(t)
	if !strings.Contains(doc.Find("#audit .flash.bad").Text(), "RED") {
		t.Errorf("audit verdict: %q", doc.Find("#audit .flash").Text())
	}
	link, _ := doc.Find("#audit li a").Attr("href")
	if link != "/admin/products/AUDIT" {
		t.Errorf("the violation links to %q, want the product", link)
	}
	// The invariants are numbered and ordered as `sekali verify` prints them.
	var rows []string
	doc.Find("#audit tbody tr").Each(func(_ int, tr *goquery.Selection) {
		rows = append(rows, strings.TrimSpace(tr.Find("td").First().Text())+". "+tr.Find("td strong").Text())
	})
	want := []string{"1. stock", "2. reservations", "3. payments", "4. callbacks", "5. refunds", "6. invoices", "7. emails", "8. jobs", "9. gateway refunds", "10. unknown outcomes"}
	if strings.Join(rows, ", ") != strings.Join(want, ", ") {
		t.Errorf("the audit page lists %q, want %q", rows, want)
	}
	if got := c.get("/admin").Doc(t).Find(".stat:contains('Last audit') .value").Text(); got != "RED" {
		t.Errorf("dashboard after a RED audit: %q", got)
	}
	// The action log says the run was red, with the checks that failed:
	// it ran; nothing refused it.
	var run models.AdminAction
	c.db.Take(&run, "action = 'run audit'")
	if run.Result != models.ActionRed || !strings.Contains(run.Detail, "failed checks: stock") || run.AdminEmail != adminEmail {
		t.Errorf("the red run is logged as %s by %q: %q; want red, by the admin, naming the failed check", run.Result, run.AdminEmail, run.Detail)
	}
	if p := c.post("/admin/audit", url.Values{"drain_timeout": {"1h"}}); p.StatusCode != 422 {
		t.Errorf("a drain beyond the limit: %d", p.StatusCode)
	}
}

// The dashboard counts deliveries from the per-minute rollup plus the
// minutes it has not reached, by result, with the duplicate share, and
// says how many deliveries were answered but not recorded (none here;
// app/payments' TestDroppedDeliveryRowsAreReported counts some).
func TestDashboardCountsDeliveries(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	now := time.Now().UTC()
	var rows []models.CallbackDelivery
	add := func(at time.Time, outcome string, n int) {
		for range n {
			rows = append(rows, models.CallbackDelivery{Provider: "sandbox", ReceivedAt: at, Outcome: outcome, ResponseCode: 200})
		}
	}
	add(now.Add(-30*time.Minute), models.OutcomeProcessed, 2)
	add(now.Add(-30*time.Minute), models.OutcomeDuplicate, 6)
	add(now.Add(-5*time.Hour), models.OutcomeDuplicate, 10)
	add(now.Add(-30*time.Second), models.OutcomeInvalidSignature, 2) // not rolled up yet
	add(now.Add(-30*time.Hour), models.OutcomeProcessed, 100)        // outside both windows
	if err := c.db.Create(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := stats.Rollup(context.Background(), c.db, now); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Deliveries []struct {
			Window         string
			Total          int64
			DuplicateShare float64          `json:"duplicate_share"`
			ByResult       map[string]int64 `json:"by_result"`
		}
		NotRecorded *int64 `json:"deliveries_not_recorded"`
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin").Body), &v); err != nil || len(v.Deliveries) != 2 {
		t.Fatalf("dashboard JSON: %+v %v", v, err)
	}
	if h, d := v.Deliveries[0], v.Deliveries[1]; h.Window != "last_hour" || h.Total != 10 || h.DuplicateShare != 0.6 ||
		h.ByResult["refused"] != 2 || d.Window != "last_24h" || d.Total != 20 || d.DuplicateShare != 0.8 {
		t.Errorf("windows: %+v, want the hour 10 (0.6 duplicates, 2 refused) and the day 20 (0.8)", v.Deliveries)
	}
	// None was dropped: every delivery above has its row.
	if v.NotRecorded == nil || *v.NotRecorded != 0 {
		t.Errorf("deliveries_not_recorded: %v, want 0", v.NotRecorded)
	}
	if got := strings.TrimSpace(c.get("/admin").Doc(t).Find("#not-recorded .value").Text()); got != "0" {
		t.Errorf("the page's deliveries not recorded: %q, want 0", got)
	}
	// The page says it for people.
	if page := c.get("/admin").Body; !strings.Contains(page, "60.0% duplicates") {
		t.Error(`the dashboard page does not say "60.0% duplicates" for the last hour`)
	}
	bars := c.get("/admin").Doc(t).Find(".chart svg rect.seg")
	if bars.Length() < 3 {
		t.Errorf("%d chart segments, want the 30-minute-old and the current minutes' stacks", bars.Length())
	}
	if _, err := strconv.Atoi(strings.ReplaceAll(c.get("/admin").Doc(t).Find(".stat .value").First().Text(), ",", "")); err != nil {
		t.Errorf("the first figure is not a number: %v", err)
	}
}

// The console shows what became of an order's money after it was paid:
// a partial refund (the order partially_refunded, the payment with what
// was refunded) and a dispute (a badge on the payment, the callback in
// the story).
func TestOrderPageShowsRefundsAndDisputes(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "AFTER", 100000, 10)
	o := c.newOrder("AFTER", 1)
	c.deliver("evt_after_pay", testenv.SandboxBody(o.ID, "tx-after", models.EventPaid, o.TotalAmount))
	c.deliver("evt_after_refund", testenv.SandboxBody(o.ID, "tx-after", models.EventRefunded, 25000))
	c.deliver("evt_after_dispute", testenv.SandboxBody(o.ID, "tx-after", models.EventDisputed, 0))
	doc := c.get("/admin/orders/" + o.ID).Doc(t)
	payment := doc.Find("table:has(th:contains('Reference')) tbody tr").First().Text()
	if !strings.Contains(payment, "Rp 25.000 refunded") || !strings.Contains(payment, "dispute open") {
		t.Errorf("the payment's row says %q; want what was refunded and the open dispute", payment)
	}
	timeline := strings.Join(texts(doc.Find("ol.timeline li .what")), "\n")
	for _, want := range []string{"status paid → partially_refunded", `callback sandbox "evt_after_dispute": processed`} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the story lacks %q:\n%s", want, timeline)
		}
	}
}

// A list asked for a parameter it does not take never ignores it in
// silence: the API answers 400 unknown_parameter naming the ones the
// list takes; a person gets the list with a notice saying the same. A
// bad value of a parameter it takes is still a 422.
func TestListsRefuseParametersTheyDoNotTake(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	for _, tc := range []struct{ list, takes string }{
		{"orders", "status"}, {"callbacks", "provider"}, {"deliveries", "outcome"}, {"jobs", "type"},
		{"outbox", "task_id"}, {"actions", "admin"}, {"gateway-requests", "phase"}, {"products", "no parameters"},
	} {
		query := "?txid=tx-1&limit=5"
		if tc.list == "products" { // one page of every product: not even limit
			query = "?txid=tx-1"
		}
		api := c.api("/api/admin/" + tc.list + query)
		var p struct{ Code, Detail string }
		if err := json.Unmarshal([]byte(api.Body), &p); err != nil || api.StatusCode != 400 || p.Code != "unknown_parameter" ||
			!strings.Contains(p.Detail, "does not take txid;") || !strings.Contains(p.Detail, tc.takes) {
			t.Errorf("%s?txid=: %d %s; want 400 unknown_parameter naming txid and %s", tc.list, api.StatusCode, api.Body, tc.takes)
		}
		if tc.list != "products" {
			if ok := c.api("/api/admin/" + tc.list + "?limit=5"); ok.StatusCode != 200 {
				t.Errorf("%s?limit=5: %d %s", tc.list, ok.StatusCode, ok.Body)
			}
		}
		page := c.get("/admin/" + tc.list + "?txid=tx-1")
		flash := page.Doc(t).Find("#flash .flash")
		if page.StatusCode != 200 || !flash.HasClass("warn") || !strings.Contains(flash.Text(), "does not take txid") {
			t.Errorf("the %s page with ?txid=: %d, notice %q (classes %q)", tc.list, page.StatusCode, flash.Text(), flash.AttrOr("class", ""))
		}
	}
	if bad := c.api("/api/admin/orders?status=lost&txid=tx-1"); bad.StatusCode != 422 || !strings.Contains(bad.Body, "status must be one of") {
		t.Errorf("a bad value and an unknown parameter: %d %s; want the value's 422 first", bad.StatusCode, bad.Body)
	}
}

// A list's page size is at most 200: limit=201 is a 422 that says so,
// not 200 rows; a parameter given twice (?body=a&body=b) is a 422
// naming it, not read as one of the two.
func TestListsRefuseALimitTooLargeAndRepeatedParameters(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	for _, tc := range []struct{ query, want string }{
		{"/api/admin/orders?limit=201", "limit must be from 1 to 200"},
		{"/api/admin/callbacks?limit=201", "limit must be from 1 to 200"},
		{"/api/admin/deliveries?limit=1000000", "limit must be from 1 to 200"},
		{"/api/admin/callbacks?body=a.b%3D1&body=a.b%3D2", "body must be given once"},
		{"/api/admin/orders?status=paid&status=pending", "status must be given once"},
		{"/api/admin/jobs?status=failed&status=failed", "status must be given once"},
		{"/api/admin/orders?limit=5&limit=5", "limit must be given once"},
	} {
		got := c.api(tc.query)
		var p struct{ Code, Detail string }
		if err := json.Unmarshal([]byte(got.Body), &p); err != nil || got.StatusCode != 422 || p.Code != "invalid_request" ||
			!strings.Contains(p.Detail, tc.want) {
			t.Errorf("%s: %d %s; want 422 invalid_request saying %q", tc.query, got.StatusCode, got.Body, tc.want)
		}
	}
	if ok := c.api("/api/admin/orders?limit=200"); ok.StatusCode != 200 {
		t.Errorf("limit=200: %d %s; want 200", ok.StatusCode, ok.Body)
	}
	if page := c.get("/admin/orders?limit=201"); page.StatusCode != 422 {
		t.Errorf("the orders page with limit=201: %d; want 422", page.StatusCode)
	}
}

// Search: a gateway's transaction id finds its callbacks, their
// deliveries and its order; a customer's email finds the callbacks of
// their orders; a request id (from a log line) finds its delivery. Each
// finds the one order's rows and none of the other's.
func TestSearchByTransactionEmailAndRequestID(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "SEARCH", 50000, 10)
	mine, other := c.newOrder("SEARCH", 1), c.newOrder("SEARCH", 1)
	if err := c.db.Model(&models.Order{}).Where("id = ?", mine.ID).Update("customer_email", "found@example.com").Error; err != nil {
		t.Fatal(err)
	}
	for _, o := range []*models.Order{mine, other} {
		body := testenv.SandboxBody(o.ID, "tx-search-"+o.ID, models.EventPaid, o.TotalAmount)
		for range 2 { // a delivery and its duplicate
			if got := c.deliver("evt_search_"+o.ID, body); got != http.StatusOK {
				t.Fatalf("delivery for %s: %d", o.ID, got)
			}
		}
	}
	testenv.Eventually(t, "four delivery rows", func() bool {
		var n int64
		c.db.Model(&models.CallbackDelivery{}).Where("callback_id IS NOT NULL AND request_id <> ''").Count(&n)
		return n == 4
	})
	var request string
	c.db.Raw(`SELECT d.request_id FROM callback_deliveries d JOIN payment_callbacks cb ON cb.id = d.callback_id
		WHERE cb.order_id = ? ORDER BY d.id LIMIT 1`, mine.ID).Scan(&request)

	// rowsOf lists a list's rows' order ids (callbacks, orders) or
	// callback ids (deliveries), asked through the API.
	type row struct {
		ID         any    `json:"id"`
		OrderID    string `json:"order_id"`
		CallbackID *int64 `json:"callback_id"`
		RequestID  string `json:"request_id"`
	}
	rowsOf := func(path string) []row {
		t.Helper()
		p := c.api(path)
		var list struct{ Rows []row }
		if err := json.Unmarshal([]byte(p.Body), &list); err != nil || p.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, p.StatusCode, p.Body)
		}
		return list.Rows
	}
	var mineCallback int64
	c.db.Raw("SELECT id FROM payment_callbacks WHERE order_id = ?", mine.ID).Scan(&mineCallback)
	tx := url.QueryEscape("tx-search-" + mine.ID)
	if rs := rowsOf("/api/admin/callbacks?transaction=" + tx); len(rs) != 1 || rs[0].OrderID != mine.ID {
		t.Errorf("callbacks by transaction: %+v, want the one of %s", rs, mine.ID)
	}
	if rs := rowsOf("/api/admin/callbacks?email=found%40example.com"); len(rs) != 1 || rs[0].OrderID != mine.ID {
		t.Errorf("callbacks by email: %+v, want the one of %s", rs, mine.ID)
	}
	if rs := rowsOf("/api/admin/deliveries?transaction=" + tx); len(rs) != 2 || *rs[0].CallbackID != mineCallback || *rs[1].CallbackID != mineCallback {
		t.Errorf("deliveries by transaction: %+v, want the two of callback %d", rs, mineCallback)
	}
	if rs := rowsOf("/api/admin/deliveries?request=" + url.QueryEscape(request)); len(rs) != 1 || rs[0].RequestID != request {
		t.Errorf("deliveries by request id %q: %+v, want that one", request, rs)
	}
	if rs := rowsOf("/api/admin/orders?transaction=" + tx); len(rs) != 1 || rs[0].ID != mine.ID {
		t.Errorf("orders by transaction: %+v, want %s", rs, mine.ID)
	}
	if rs := rowsOf("/api/admin/orders?transaction=tx-none"); len(rs) != 0 {
		t.Errorf("orders by an unknown transaction: %+v, want none", rs)
	}
	// One box (q) finds a callback by its transaction id, its payment's
	// reference or its customer's email.
	var reference string
	c.db.Raw("SELECT provider_reference FROM payments WHERE order_id = ?", mine.ID).Scan(&reference)
	for _, q := range []string{"tx-search-" + mine.ID, reference, "found@example.com"} {
		if rs := rowsOf("/api/admin/callbacks?q=" + url.QueryEscape(q)); len(rs) != 1 || rs[0].OrderID != mine.ID {
			t.Errorf("callbacks by q=%s: %+v, want the one of %s", q, rs, mine.ID)
		}
	}
	if rs := rowsOf("/api/admin/callbacks?q=found"); len(rs) != 0 {
		t.Errorf("callbacks by q=found: %+v, want none (exact matches only)", rs)
	}
	// A kept body's path = value finds its deliveries, and their callback.
	body := url.QueryEscape("order_id=" + mine.ID)
	if rs := rowsOf("/api/admin/deliveries?body=" + body); len(rs) != 2 || *rs[0].CallbackID != mineCallback || *rs[1].CallbackID != mineCallback {
		t.Errorf("deliveries by body: %+v, want the two of callback %d", rs, mineCallback)
	}
	if rs := rowsOf("/api/admin/callbacks?body=" + body); len(rs) != 1 || rs[0].OrderID != mine.ID {
		t.Errorf("callbacks by body: %+v, want the one of %s", rs, mine.ID)
	}
	if rs := rowsOf("/api/admin/deliveries?body=" + url.QueryEscape(fmt.Sprint("paid_amount=", mine.TotalAmount))); len(rs) != 4 {
		t.Errorf("deliveries by a number in the body: %d rows, want all 4", len(rs))
	}
	for _, bad := range []string{"order_id", "a.b.c.d.e.f.g.h.i=1", "a..b=1"} {
		if p := c.api("/api/admin/deliveries?body=" + url.QueryEscape(bad)); p.StatusCode != 422 || !strings.Contains(p.Body, "body must") {
			t.Errorf("deliveries?body=%s: %d %s; want 422 naming body", bad, p.StatusCode, p.Body)
		}
	}
	// The page's form holds the search, and the list shows what it found.
	doc := c.get("/admin/callbacks?transaction=" + tx).Doc(t)
	if v, _ := doc.Find(`input[name=transaction]`).Attr("value"); v != "tx-search-"+mine.ID || doc.Find("#list tbody tr").Length() != 1 {
		t.Errorf("the callbacks page searched by transaction: field %q, %d rows", v, doc.Find("#list tbody tr").Length())
	}
	doc = c.get("/admin/callbacks?q=found%40example.com").Doc(t)
	if v, _ := doc.Find(`input[name=q]`).Attr("value"); v != "found@example.com" || doc.Find("#list tbody tr").Length() != 1 {
		t.Errorf("the callbacks page searched by q: field %q, %d rows", v, doc.Find("#list tbody tr").Length())
	}
	doc = c.get("/admin/deliveries?body=" + body).Doc(t)
	if v, _ := doc.Find(`input[name=body]`).Attr("value"); v != "order_id="+mine.ID || doc.Find("#list tbody tr").Length() != 2 {
		t.Errorf("the deliveries page searched by body: field %q, %d rows", v, doc.Find("#list tbody tr").Length())
	}
}

// A conflict's page shows what was sent: the accepted body, pretty-printed,
// with its headers (the signature shortened), and beside it each
// conflicting body with the paths where the two differ. With
// DELIVERY_BODY_RETENTION 0 nothing is kept and the page says so.
func TestConflictShowsBothBodiesAndWhatDiffered(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "DIFF", 50000, 10)
	o := c.newOrder("DIFF", 1)
	accepted := testenv.SandboxBody(o.ID, "tx-diff", models.EventPaid, o.TotalAmount)
	refused := []byte(strings.Replace(string(accepted), `"currency":"IDR"}`, `"currency":"USD","note":"retyped"}`, 1))
	if got := c.deliver("evt_diff", accepted); got != http.StatusOK {
		t.Fatalf("the accepted delivery: %d", got)
	}
	if got := c.deliver("evt_diff", refused); got != http.StatusConflict {
		t.Fatalf("the conflicting delivery: %d", got)
	}
	var cb models.PaymentCallback
	c.db.Take(&cb, "idempotency_key = 'evt_diff'")
	testenv.Eventually(t, "the conflict's row, with its body", func() bool {
		var n int64
		c.db.Model(&models.CallbackDelivery{}).Where("callback_id = ? AND outcome = 'conflict' AND body IS NOT NULL", cb.ID).Count(&n)
		return n == 1
	})
	page := c.get(fmt.Sprintf("/admin/callbacks/%d", cb.ID))
	doc := page.Doc(t)
	var bodies []string
	doc.Find(".kept pre.body:not(.small)").Each(func(_ int, pre *goquery.Selection) { bodies = append(bodies, pre.Text()) })
	if len(bodies) != 3 || !strings.Contains(bodies[0], "\n  \"currency\": \"IDR\"") || !strings.Contains(bodies[2], `"note": "retyped"`) {
		t.Errorf("kept bodies %q; want the accepted one (indented) above, then it and the refused one side by side", bodies)
	}
	headers := doc.Find(".kept details pre").First().Text()
	if !strings.Contains(headers, "Webhook-Id: evt_diff") || !strings.Contains(headers, "Webhook-Signature: v1,") ||
		strings.Contains(headers, testenv.SandboxHeaders("evt_diff", accepted, time.Now()).Get("webhook-signature")) {
		t.Errorf("kept headers %q; want webhook-id whole and the signature shortened", headers)
	}
	var changes []string
	doc.Find("table.changes tbody tr").Each(func(_ int, tr *goquery.Selection) {
		changes = append(changes, strings.Join(texts(tr.Find("td")), " "))
	})
	if want := []string{`/currency changed "IDR" "USD"`, `/note added  "retyped"`}; !slices.Equal(changes, want) {
		t.Errorf("changes %q, want %q", changes, want)
	}
	// The same, as JSON.
	var js struct {
		Sent      struct{ Body string }
		Conflicts []struct {
			Changes []struct{ Path, Kind string }
		}
	}
	if err := json.Unmarshal([]byte(c.api(fmt.Sprintf("/api/admin/callbacks/%d", cb.ID)).Body), &js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.Sent.Body, "tx-diff") || len(js.Conflicts) != 1 || len(js.Conflicts[0].Changes) != 2 {
		t.Errorf("the JSON: %+v", js)
	}

	// Nothing kept: the page says so.
	off := newConsole(t, func(cfg *config.Config) { cfg.DeliveryBodyRetention = 0 })
	off.login()
	testenv.MustCreateProduct(t, off.db, "DIFF", 50000, 10)
	o = off.newOrder("DIFF", 1)
	if got := off.deliver("evt_diff_off", testenv.SandboxBody(o.ID, "tx-diff-off", models.EventPaid, o.TotalAmount)); got != http.StatusOK {
		t.Fatalf("delivery: %d", got)
	}
	off.db.Take(&cb, "idempotency_key = 'evt_diff_off'")
	if doc := off.get(fmt.Sprintf("/admin/callbacks/%d", cb.ID)).Doc(t); doc.Find(".kept").Length() != 0 || !strings.Contains(doc.Text(), "Its body is not kept") {
		t.Error("with DELIVERY_BODY_RETENTION=0 the page shows a body, or does not say it is not kept")
	}
}

// A delivery refused for a business reason (a wrong amount) is kept; its
// dry run says what it would do without changing a row, before and after
// the order is fixed; applied again after the fix it pays the order once,
// and a second try is a duplicate; each try is in the action log with
// its reason. A delivery refused for its signature is never applied again.
func TestDryRunAndApplyAgain(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "AGAIN", 50000, 10)
	o := c.newOrder("AGAIN", 1)
	body := testenv.SandboxBody(o.ID, "tx-again", models.EventPaid, 40000) // the price was wrong when the order was made
	if got := c.deliver("evt_again", body); got != http.StatusUnprocessableEntity {
		t.Fatalf("the mismatched delivery: %d, want 422", got)
	}
	var id int64
	testenv.Eventually(t, "the rejected delivery's row", func() bool {
		c.db.Raw("SELECT id FROM callback_deliveries WHERE outcome = 'rejected' AND body IS NOT NULL").Scan(&id)
		return id > 0
	})
	deliveryURL := fmt.Sprintf("/admin/deliveries/%d", id)
	if doc := c.get(deliveryURL).Doc(t); doc.Find(`form[action$="/apply"]`).Length() != 1 || !strings.Contains(doc.Find(".kept pre").First().Text(), "tx-again") {
		t.Fatalf("the delivery's page offers no apply again, or shows no body")
	}
	counts := c.rowCounts
	dryRun := func() (string, []string) {
		t.Helper()
		var v struct {
			Result      string
			Transitions []struct{ From, To string }
			Outbox      []string
		}
		p := c.api("/api" + deliveryURL + "/dry-run")
		if err := json.Unmarshal([]byte(p.Body), &v); err != nil || p.StatusCode != 200 {
			t.Fatalf("dry run: %d %s", p.StatusCode, p.Body)
		}
		var moved []string
		for _, tr := range v.Transitions {
			moved = append(moved, tr.From+"→"+tr.To)
		}
		return v.Result, append(moved, v.Outbox...)
	}
	before := counts()
	if result, wrote := dryRun(); result != "rejected" || len(wrote) != 0 {
		t.Errorf("dry run before the fix: %s, %v; want rejected, writing nothing", result, wrote)
	}
	if err := c.db.Exec("UPDATE orders SET total_amount = 40000 WHERE id = ?", o.ID).Error; err != nil { // the fix
		t.Fatal(err)
	}
	result, wrote := dryRun()
	if result != "processed" || len(wrote) < 2 || wrote[0] != "pending→paid" {
		t.Errorf("dry run after the fix: %s, %v; want processed, pending→paid and its tasks", result, wrote)
	}
	if after := counts(); after != before {
		t.Errorf("rows by table %s after two dry runs, %s before: a dry run wrote", after, before)
	}
	if doc := c.get(deliveryURL + "/dry-run").Doc(t); !strings.Contains(doc.Text(), "Nothing was written") || doc.Find(".badge").First().Text() != "processed" {
		t.Error("the dry run's page does not say what it would do, or that nothing was written")
	}

	apply := func(reason string) page {
		return c.post(deliveryURL+"/apply", url.Values{"reason": {reason}})
	}
	if p := apply(""); p.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("apply again without a reason: %d, want 422", p.StatusCode)
	}
	for i, want := range []string{"processed", "duplicate"} {
		if p := apply("the price was fixed"); p.StatusCode != http.StatusSeeOther {
			t.Fatalf("apply again %d: %d", i+1, p.StatusCode)
		}
		if flash := c.get(deliveryURL).Doc(t).Find("#flash .flash").Text(); !strings.Contains(flash, "applied again: "+want) {
			t.Errorf("apply again %d: %q, want %s", i+1, flash, want)
		}
	}
	var status string
	var paid, logged int64
	c.db.Raw("SELECT status FROM orders WHERE id = ?", o.ID).Scan(&status)
	c.db.Raw("SELECT count(*) FROM payments WHERE order_id = ? AND status = 'succeeded'", o.ID).Scan(&paid)
	c.db.Raw("SELECT count(*) FROM admin_actions WHERE action = 'apply again' AND detail LIKE 'the price was fixed;%'").Scan(&logged)
	if status != "paid" || paid != 1 || logged != 2 {
		t.Errorf("after applying again twice: order %s, %d payments, %d logged tries; want paid, 1, 2", status, paid, logged)
	}

	// A delivery whose signature failed: kept, never applied again.
	req, _ := http.NewRequest("POST", c.URL+"/callbacks/sandbox", strings.NewReader(string(body)))
	req.Header = testenv.SandboxHeaders("evt_forged", body, time.Now())
	req.Header.Set("webhook-signature", "v1,Zm9yZ2Vk")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the forged delivery: %v %v", res, err)
	}
	var forged int64
	testenv.Eventually(t, "the forged delivery's row", func() bool {
		c.db.Raw("SELECT id FROM callback_deliveries WHERE outcome = 'invalid_signature'").Scan(&forged)
		return forged > 0
	})
	if p := c.post(fmt.Sprintf("/admin/deliveries/%d/apply", forged), url.Values{"reason": {"try"}}); p.StatusCode != http.StatusConflict {
		t.Errorf("apply again of a forged delivery: %d, want 409", p.StatusCode)
	}
	if doc := c.get(fmt.Sprintf("/admin/deliveries/%d", forged)).Doc(t); doc.Find(`form[action$="/apply"]`).Length() != 0 {
		t.Error("the forged delivery's page offers apply again")
	}
}

// rowCounts is the rows of every table a delivery may write to, by
// table: what a dry run must leave alone.
func (c *console) rowCounts() string {
	var n [6]int64
	c.db.Raw(`SELECT (SELECT count(*) FROM order_transitions), (SELECT count(*) FROM stock_movements), (SELECT count(*) FROM outbox_messages),
		(SELECT count(*) FROM payments), (SELECT count(*) FROM payment_callbacks), (SELECT count(*) FROM callback_deliveries)`).Row().
		Scan(&n[0], &n[1], &n[2], &n[3], &n[4], &n[5])
	return fmt.Sprint(n)
}

// The admin API's dry run (POST) says what a kept delivery would do and
// writes nothing; its apply again answers what the callback endpoint
// would answer now, logged as the API's with the reason — applied four
// times at once, the order is paid once — and is a 409 for a delivery
// that may not be applied again.
func TestDryRunAndApplyAgainThroughTheAPI(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "AGAINAPI", 50000, 10)
	o := c.newOrder("AGAINAPI", 1)
	body := testenv.SandboxBody(o.ID, "tx-again-api", models.EventPaid, 40000)
	if got := c.deliver("evt_again_api", body); got != http.StatusUnprocessableEntity {
		t.Fatalf("the mismatched delivery: %d, want 422", got)
	}
	if got := c.deliver("evt_paid_api", testenv.SandboxBody(c.newOrder("AGAINAPI", 1).ID, "tx-paid-api", models.EventPaid, 50000)); got != http.StatusOK {
		t.Fatalf("the paying delivery: %d, want 200", got)
	}
	var rejected, processed int64
	testenv.Eventually(t, "the rejected delivery's row", func() bool {
		c.db.Raw("SELECT id FROM callback_deliveries WHERE outcome = 'rejected' AND body IS NOT NULL").Scan(&rejected)
		return rejected > 0
	})
	c.db.Raw("SELECT id FROM callback_deliveries WHERE outcome = 'processed'").Scan(&processed)
	if err := c.db.Exec("UPDATE orders SET total_amount = 40000 WHERE id = ?", o.ID).Error; err != nil { // the fix
		t.Fatal(err)
	}
	counts := c.rowCounts
	before := counts()
	p := c.apiPost(fmt.Sprintf("/api/admin/deliveries/%d/dry-run", rejected), "")
	var dry struct {
		Result       string
		StatusBefore string `json:"order_status_before"`
		StatusAfter  string `json:"order_status_after"`
		Movements    []struct{ SKU string }
		Outbox       []string
	}
	if err := json.Unmarshal([]byte(p.Body), &dry); err != nil || p.StatusCode != 200 {
		t.Fatalf("POST dry-run: %d %s", p.StatusCode, p.Body)
	}
	if dry.Result != "processed" || dry.StatusBefore != "pending" || dry.StatusAfter != "paid" || len(dry.Outbox) == 0 {
		t.Errorf("POST dry-run: %s", p.Body)
	}
	if after := counts(); after != before {
		t.Errorf("rows by table %s after a dry run, %s before: it wrote", after, before)
	}

	apply := func(id int64, body string) page {
		return c.apiPost(fmt.Sprintf("/api/admin/deliveries/%d/apply", id), body)
	}
	for _, tt := range []struct {
		id   int64
		body string
		want int
	}{
		{rejected, `{}`, 422},
		{rejected, `{"reason": "` + strings.Repeat("x", 501) + `"}`, 422},
		{processed, `{"reason": "try"}`, 409},
		{rejected + processed + 100, `{"reason": "try"}`, 404},
	} {
		if p := apply(tt.id, tt.body); p.StatusCode != tt.want {
			t.Errorf("apply %d with %.30s: %d %s, want %d", tt.id, tt.body, p.StatusCode, p.Body, tt.want)
		}
	}
	if after := counts(); after != before {
		t.Errorf("rows by table %s after refused applies, %s before", after, before)
	}

	const n = 4
	start := make(chan struct{})
	answers := make([]page, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = apply(rejected, `{"reason": "the price was fixed"}`)
		})
	}
	close(start)
	wg.Wait()
	results := map[string]int{}
	for _, a := range answers {
		var v struct {
			Result  string
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal([]byte(a.Body), &v); err != nil {
			t.Fatalf("apply: %d %s", a.StatusCode, a.Body)
		}
		results[fmt.Sprint(a.StatusCode, " ", v.Result)]++
		if a.StatusCode == 200 && v.OrderID != o.ID {
			t.Errorf("apply answered for order %q, want %s", v.OrderID, o.ID)
		}
	}
	if results["200 processed"] != 1 || results["200 duplicate"] != n-1 {
		t.Errorf("answers %v: want one 200 processed, the others 200 duplicate", results)
	}
	var paid, transitions, logged int64
	c.db.Raw("SELECT count(*) FROM payments WHERE order_id = ? AND status = 'succeeded'", o.ID).Scan(&paid)
	c.db.Raw("SELECT count(*) FROM order_transitions WHERE order_id = ? AND to_status = 'paid'", o.ID).Scan(&transitions)
	c.db.Raw(`SELECT count(*) FROM admin_actions WHERE action = 'apply again' AND admin_email = 'api'
		AND target = ? AND detail LIKE 'the price was fixed;%'`, fmt.Sprint("delivery ", rejected)).Scan(&logged)
	if paid != 1 || transitions != 1 || logged != n {
		t.Errorf("after %d applies at once: %d payments, %d transitions to paid, %d logged; want 1, 1, %d", n, paid, transitions, logged, n)
	}
}

// Bulk apply again: the confirm page counts the matching kept deliveries
// refused for a business reason, one per callback; the POST applies each
// again with one reason — the fixed orders are paid once, one delivery
// each, the rest still rejected — and logs each and the batch.
func TestApplyMatchingDeliveriesAgain(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "BULK", 50000, 10)
	var fixed []string
	for i := range 3 {
		o := c.newOrder("BULK", 1)
		body := testenv.SandboxBody(o.ID, fmt.Sprint("tx-bulk-", i), models.EventPaid, 40000)
		for range 2 { // the gateway tried twice: two rows, one callback
			if got := c.deliver(fmt.Sprint("evt_bulk_", i), body); got != http.StatusUnprocessableEntity {
				t.Fatalf("mismatched delivery %d: %d", i, got)
			}
		}
		if i < 2 {
			fixed = append(fixed, o.ID)
		}
	}
	testenv.Eventually(t, "six rejected rows", func() bool {
		var n int64
		c.db.Raw("SELECT count(*) FROM callback_deliveries WHERE outcome = 'rejected' AND body IS NOT NULL").Scan(&n)
		return n == 6
	})
	if err := c.db.Exec("UPDATE orders SET total_amount = 40000 WHERE id IN ?", fixed).Error; err != nil {
		t.Fatal(err)
	}
	confirm := c.get("/admin/deliveries/apply-matching?outcome=rejected&provider=sandbox").Doc(t)
	if h1 := confirm.Find("h1").Text(); h1 != "Apply 3 deliveries again?" {
		t.Fatalf("confirm page: %q, want 3 (one per callback)", h1)
	}
	if p := c.post("/admin/deliveries/apply-matching", url.Values{"outcome": {"rejected"}, "provider": {"sandbox"}}); p.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("without a reason: %d, want 422", p.StatusCode)
	}
	p := c.post("/admin/deliveries/apply-matching", url.Values{"outcome": {"rejected"}, "provider": {"sandbox"}, "reason": {"prices fixed"}})
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("apply matching: %d %s", p.StatusCode, p.Body)
	}
	if flash := c.get("/admin/deliveries").Doc(t).Find("#flash .flash").Text(); flash != "3 deliveries applied again: 2 processed, 1 rejected." {
		t.Errorf("flash %q", flash)
	}
	var paid, logged, batch int64
	c.db.Raw("SELECT count(*) FROM payments WHERE order_id IN ? AND status = 'succeeded'", fixed).Scan(&paid)
	c.db.Raw("SELECT count(*) FROM admin_actions WHERE action = 'apply again'").Scan(&logged)
	c.db.Raw("SELECT count(*) FROM admin_actions WHERE action = 'bulk apply again'").Scan(&batch)
	if paid != 2 || logged != 3 || batch != 1 {
		t.Errorf("%d fixed orders paid, %d tries and %d batches logged; want 2, 3, 1", paid, logged, batch)
	}
	if h1 := c.get("/admin/deliveries/apply-matching?outcome=conflict").StatusCode; h1 != http.StatusUnprocessableEntity {
		t.Errorf("a bulk apply again of conflicts: %d, want 422", h1)
	}
}

// A red audit run from the console raises audit.red, and the dashboard
// lists it, page and JSON, with where its delivery stands.
func TestDashboardListsRecentAlerts(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	if got := c.get("/admin").Doc(t).Find("h2:contains('Alerts') + p").Text(); !strings.Contains(got, "No alert waiting") {
		t.Errorf("dashboard before any alert: %q", got)
	}
	testenv.MustCreateProduct(t, c.db, "ALERTED", 1000, 10)
	c.db.Exec("UPDATE products SET stock = 9 WHERE sku = 'ALERTED'")
	c.post("/admin/audit", url.Values{"drain_timeout": {"0s"}})
	c.post("/admin/audit", url.Values{"drain_timeout": {"0s"}}) // the same red spell: no second alert

	var rows []string
	c.get("/admin").Doc(t).Find("h2:contains('Alerts') + .table-wrap tbody tr").Each(func(_ int, tr *goquery.Selection) {
		rows = append(rows, tr.Find("td").First().Text()+" "+tr.Find(".badge").Text())
	})
	if want := []string{"audit.red pending"}; !slices.Equal(rows, want) {
		t.Errorf("the dashboard's alerts: %q, want %q", rows, want)
	}

	c.db.Exec("UPDATE alerts SET status = 'sent', sent_at = now(), attempts = 1")
	var got struct {
		Alerts []struct {
			Event     string     `json:"event"`
			WebhookID string     `json:"webhook_id"`
			Status    string     `json:"status"`
			SentAt    *time.Time `json:"sent_at"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin").Body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Alerts) != 1 || got.Alerts[0].Event != "audit.red" || got.Alerts[0].Status != "sent" ||
		!strings.HasPrefix(got.Alerts[0].WebhookID, "audit.red:") || got.Alerts[0].SentAt == nil {
		t.Errorf("the dashboard's JSON alerts: %+v; want audit.red, sent", got.Alerts)
	}
}

// The catch-up page lists the runs, newest first, with what each gateway
// answered and a run that could not ask every gateway marked incomplete
// with its error; before any run it says none has.
func TestCatchUpPageListsRuns(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	if got := c.get("/admin/catch-up").Doc(t).Find("tbody").Text(); !strings.Contains(got, "No catch-up has run yet") {
		t.Errorf("before any run: %q", got)
	}
	now := time.Now().UTC()
	done := now.Add(-time.Hour + time.Minute)
	runs := []models.CatchUpRun{
		{StartedAt: now.Add(-time.Hour), FinishedAt: &done, Since: now.Add(-73 * time.Hour), Trigger: models.CatchUpByCommand,
			Gateways: []models.CatchUpCount{{Provider: "acmepay", Asked: 1, Found: 4, Applied: 3}, {Provider: "otherpay", Asked: 9, Found: 2, Applied: 2}}},
		{StartedAt: now, FinishedAt: &now, Since: now.Add(-time.Hour), Trigger: models.CatchUpByJob, Error: "thirdpay: status requests failed",
			Gateways: []models.CatchUpCount{{Provider: "thirdpay", Asked: 5, Error: "5 of 5 status requests failed; first: HTTP 503"}}},
	}
	if err := c.db.Create(&runs).Error; err != nil {
		t.Fatal(err)
	}
	rows := c.get("/admin/catch-up").Doc(t).Find("tbody tr")
	if rows.Length() != 2 {
		t.Fatalf("%d rows, want the 2 runs", rows.Length())
	}
	newest, oldest := rows.Eq(0).Text(), rows.Eq(1).Text()
	for _, want := range []string{"the schedule", "thirdpay", "incomplete", "HTTP 503"} {
		if !strings.Contains(newest, want) {
			t.Errorf("the newest run's row %q does not say %q", newest, want)
		}
	}
	for _, want := range []string{"sekali catch-up", "acmepay: 1 · 4 · 3", "otherpay: 9 · 2 · 2", "done"} {
		if !strings.Contains(strings.Join(strings.Fields(oldest), " "), want) {
			t.Errorf("the oldest run's row %q does not say %q", oldest, want)
		}
	}
	if got := rows.Eq(1).Find("td").Eq(5).Text() + "/" + rows.Eq(1).Find("td").Eq(6).Text(); got != "6/5" {
		t.Errorf("the oldest run found/applied %q, want 6/5 over its gateways", got)
	}
}

// The catch-up page's words: with CATCH_UP_EVERY unset it says the
// worker runs it on no schedule (never "every off"), with it set how
// often; a run asked on the console names the admin who asked, a
// scheduled one the schedule, one of the command the command.
func TestCatchUpPageSaysWhoAskedAndWhen(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	intro := strings.Join(strings.Fields(c.get("/admin/catch-up").Doc(t).Find("p.muted").First().Text()), " ")
	if !strings.Contains(intro, "The worker runs it on no schedule: CATCH_UP_EVERY is not set.") || strings.Contains(intro, "every off") {
		t.Errorf("with CATCH_UP_EVERY unset the page says %q", intro)
	}
	every := newConsole(t, func(cfg *config.Config) { cfg.CatchUpEvery = 6 * time.Hour })
	every.login()
	if intro := strings.Join(strings.Fields(every.get("/admin/catch-up").Doc(t).Find("p.muted").First().Text()), " "); !strings.Contains(intro, "The worker also runs it every 6h") {
		t.Errorf("with CATCH_UP_EVERY=6h the page says %q", intro)
	}

	// Asked on the console: the task the worker runs carries the admin.
	if p := c.post("/admin/catch-up", nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("ask for a catch-up: %d", p.StatusCode)
	}
	var row models.OutboxMessage
	if err := c.db.Take(&row, "task_type = ?", jobs.TaskCatchUp).Error; err != nil {
		t.Fatal(err)
	}
	payload := row.Payload
	var args jobs.CatchUpArgs
	if err := json.Unmarshal(payload, &args); err != nil || args.By != adminEmail {
		t.Errorf("the catch-up's task payload %s: asked by %q, %v; want %s", payload, args.By, err, adminEmail)
	}
	now := time.Now().UTC()
	runs := []models.CatchUpRun{
		{StartedAt: now.Add(-2 * time.Hour), FinishedAt: &now, Since: now.Add(-3 * time.Hour), Trigger: models.CatchUpByCommand, Gateways: []models.CatchUpCount{}},
		{StartedAt: now.Add(-time.Hour), FinishedAt: &now, Since: now.Add(-2 * time.Hour), Trigger: models.CatchUpByJob, Gateways: []models.CatchUpCount{}},
		{StartedAt: now, FinishedAt: &now, Since: now.Add(-time.Hour), Trigger: models.CatchUpByJob, AskedBy: args.By, Gateways: []models.CatchUpCount{}},
	}
	if err := c.db.Create(&runs).Error; err != nil {
		t.Fatal(err)
	}
	by := texts(c.get("/admin/catch-up").Doc(t).Find("tbody tr td:nth-child(4)"))
	want := []string{adminEmail + "on the console", "the scheduleCATCH_UP_EVERY", "sekali catch-up"} // each note on a line of its own
	if !slices.Equal(by, want) {
		t.Errorf("the runs' By column says %q; want %q", by, want)
	}
}

// An owner and an operator ask for a catch-up from the console at once:
// one task goes into the outbox for the worker — the clicks of one minute
// ask one run — and both asks are in the actions log, the page saying it
// was asked.
func TestCatchUpAskedFromTheConsole(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	if !strings.Contains(c.get("/admin/catch-up").Body, `action="/admin/catch-up"`) {
		t.Fatal("the catch-up page has no form to ask for a run")
	}
	op := c.loginAs("op@example.com", models.RoleOperator)
	start := make(chan struct{})
	var wg sync.WaitGroup
	answers := make([]page, 2)
	for i, who := range []*console{c, op} {
		wg.Go(func() {
			<-start
			answers[i] = who.post("/admin/catch-up", nil)
		})
	}
	close(start)
	wg.Wait()
	for i, p := range answers {
		if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/catch-up" {
			t.Errorf("ask %d: %d to %q, want 303 to the catch-up page", i+1, p.StatusCode, p.Header.Get("Location"))
		}
	}

	var ids []string
	c.db.Raw("SELECT task_id FROM outbox_messages WHERE task_type = ? AND queue = ? ORDER BY task_id", jobs.TaskCatchUp, jobs.QueueMaintenance).Scan(&ids)
	// Two asks a minute apart are two runs: only at a minute's turn may
	// the two at once have made two rows, each its own minute.
	if len(ids) != 1 && !(len(ids) == 2 && ids[0] != ids[1]) {
		t.Errorf("outbox rows of the catch-up: %q, want one", ids)
	}
	if n := c.countRows("SELECT count(*) FROM admin_actions WHERE action = 'ask catch-up' AND result = 'ok'"); n != 2 {
		t.Errorf("%d asks in the actions log, want 2", n)
	}
	if got := c.get("/admin/catch-up").Doc(t).Find(".flash").Text(); !strings.Contains(got, "Asked") {
		t.Errorf("the page after asking says %q", got)
	}
}
