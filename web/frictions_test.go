package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/static"
)

// The customer's order page says what became of the confirmation email:
// once the operator discarded its job for good, "will not be sent", never
// "sending…".
func TestShopOrderPageSaysADiscardedEmailWillNotBeSent(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "SHOP-GIVEUP", 100000, 5)
	loc := c.checkout(c.formKey(t, "SHOP-GIVEUP"), "SHOP-GIVEUP", "1", "buyer@example.com").Header.Get("Location")
	id, _, _ := strings.Cut(strings.TrimPrefix(loc, "/orders/"), "?")
	if code := c.deliver("evt_giveup", []byte(`{"order_id":"`+id+`","transaction_id":"tx-giveup","payment_status":"paid","paid_amount":100000,"currency":"IDR"}`)); code != 200 {
		t.Fatalf("payment: %d", code)
	}
	email := func() string { return c.get(loc).Doc(t).Find(".stat:contains('Confirmation email')").Text() }
	if got := email(); !strings.Contains(got, "sending") {
		t.Fatalf("a paid order's email before its job ran: %q, want sending…", got)
	}
	err := c.db.Exec(`INSERT INTO job_executions (idempotency_key, queue_name, external_job_id, business_key, status, worker_id, started_at, finished_at, discarded_at, discarded_by, discard_reason)
		VALUES (?, 'default', 'x', ?, 'discarded', 'w', now(), now(), now(), 'ops@example.com', 'the address bounces')`,
		"email:send:order_paid:"+id, id).Error
	if err != nil {
		t.Fatal(err)
	}
	if got := email(); strings.Contains(got, "sending") || !strings.Contains(got, "will not be sent") {
		t.Errorf("the email's state after its job was discarded: %q, want will not be sent", got)
	}
}

// The shop names the gateway PAYMENT_GATEWAY configures.
func TestShopNamesTheConfiguredGateway(t *testing.T) {
	t.Parallel()
	c := newConsole(t, func(cfg *config.Config) { cfg.PaymentGateway = "acmepay" })
	doc := c.get("/").Doc(t)
	if got := doc.Find(".topbar .who").Text(); !strings.Contains(got, "payments go to the acmepay gateway") {
		t.Errorf("the shop's bar says %q, want the acmepay gateway", got)
	}
	if strings.Contains(doc.Text(), "sandbox") {
		t.Errorf("the shop with PAYMENT_GATEWAY=acmepay still names the sandbox:\n%s", doc.Text())
	}
}

// rejectedDelivery sends order o's payment for amount (not its total) and
// returns the rejected delivery's id, once its row is written.
func (c *console) rejectedDelivery(o *models.Order, event string, amount int64) int64 {
	c.t.Helper()
	body := testenv.SandboxBody(o.ID, "tx-"+event, models.EventPaid, amount)
	if got := c.deliver(event, body); got != http.StatusUnprocessableEntity {
		c.t.Fatalf("the mismatched delivery %s: %d, want 422", event, got)
	}
	var id int64
	testenv.Eventually(c.t, "the rejected delivery's row", func() bool {
		c.db.Raw(`SELECT d.id FROM callback_deliveries d JOIN payment_callbacks cb ON cb.id = d.callback_id
			WHERE cb.idempotency_key = ? AND d.outcome = 'rejected' AND d.body IS NOT NULL`, event).Scan(&id)
		return id > 0
	})
	return id
}

// deliveryCells are the deliveries list's cells of delivery id, by
// column heading.
func deliveryCells(t *testing.T, doc *goquery.Document, id int64) map[string]*goquery.Selection {
	t.Helper()
	var heads []string
	doc.Find("#list thead th").Each(func(_ int, th *goquery.Selection) { heads = append(heads, strings.TrimSpace(th.Text())) })
	row := doc.Find(fmt.Sprintf(`#list tbody tr:has(a.id-delivery[href="/admin/deliveries/%d"])`, id))
	if row.Length() != 1 {
		t.Fatalf("no row of delivery %d in the list", id)
	}
	cells := map[string]*goquery.Selection{}
	row.Find("td").Each(func(i int, td *goquery.Selection) {
		if i < len(heads) {
			cells[heads[i]] = td
		}
	})
	return cells
}

// The deliveries list has a reason and an order column, in HTML and JSON;
// a rejected delivery's page says why, in the words the pipeline
// recorded (both values of a mismatch), or, for a row without a note,
// the reason its callback recorded. A refusal before the key says why
// too, and has no order.
func TestDeliveriesSayWhyAndOfWhichOrder(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "WHY", 50000, 10)
	o := c.newOrder("WHY", 1)
	id := c.rejectedDelivery(o, "evt_why", 40000)
	bare := c.newOrder("WHY", 1) // a row without a note: the callback's reason
	bareID := c.rejectedDelivery(bare, "evt_why_bare", 45000)
	if err := c.db.Exec("UPDATE callback_deliveries SET note = '' WHERE id = ?", bareID).Error; err != nil {
		t.Fatal(err)
	}
	body := testenv.SandboxBody(o.ID, "tx-forged", models.EventPaid, 50000)
	req, _ := http.NewRequest("POST", c.URL+"/callbacks/sandbox", strings.NewReader(string(body)))
	req.Header = testenv.SandboxHeaders("evt_forged_why", body, time.Now())
	req.Header.Set("webhook-signature", "v1,Zm9yZ2Vk")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the forged delivery: %v %v", res, err)
	}
	var forged int64
	testenv.Eventually(t, "the forged delivery's row", func() bool {
		c.db.Raw("SELECT id FROM callback_deliveries WHERE outcome = 'invalid_signature'").Scan(&forged)
		return forged > 0
	})

	const said = "paid_amount 40000 IDR does not match the order total 50000 IDR"
	doc := c.get("/admin/deliveries").Doc(t)
	cells := deliveryCells(t, doc, id)
	if cells["Reason"] == nil || !strings.Contains(cells["Reason"].Text(), said) {
		t.Errorf("the list's reason of the rejected delivery: %v, want %q", cells["Reason"], said)
	}
	if href, _ := cells["Order"].Find("a").Attr("href"); cells["Order"] == nil || strings.TrimSpace(cells["Order"].Text()) != o.ID || href != "/admin/orders/"+o.ID {
		t.Errorf("the list's order of the rejected delivery: %q → %q, want %s", cells["Order"].Text(), href, o.ID)
	}
	if got := deliveryCells(t, doc, bareID)["Reason"].Text(); !strings.Contains(got, "the amount paid does not match the order total") {
		t.Errorf("the reason of a rejected delivery without a note: %q", got)
	}
	forgedCells := deliveryCells(t, doc, forged)
	if got := forgedCells["Reason"].Text(); !strings.Contains(got, "signature did not verify") || strings.TrimSpace(forgedCells["Order"].Text()) != "—" {
		t.Errorf("the forged delivery: reason %q, order %q", got, forgedCells["Order"].Text())
	}

	var js struct {
		Rows []struct {
			ID      int64   `json:"id"`
			Reason  string  `json:"reason"`
			OrderID *string `json:"order_id"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin/deliveries").Body), &js); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, r := range js.Rows {
		switch r.ID {
		case id:
			found++
			if r.OrderID == nil || *r.OrderID != o.ID || !strings.Contains(r.Reason, said) {
				t.Errorf("the JSON row of the rejected delivery: %+v", r)
			}
		case forged:
			found++
			if r.OrderID != nil || r.Reason == "" {
				t.Errorf("the JSON row of the forged delivery: %+v, want a reason and a null order", r)
			}
		}
	}
	if found != 2 {
		t.Errorf("the JSON list has %d of the two deliveries", found)
	}

	page := c.get(fmt.Sprintf("/admin/deliveries/%d", id)).Doc(t)
	if why := page.Find(".why").Text(); !strings.Contains(why, "Why rejected") || !strings.Contains(why, said) {
		t.Errorf("the rejected delivery's page says why: %q, want %q", why, said)
	}
}

// The dry run of a delivery that may be applied again offers "Apply
// again" to an operator (not to a viewer), and the order's id breaks
// inside its card rather than running out of it.
func TestDryRunOffersApplyAgain(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "DRYAGAIN", 50000, 10)
	o := c.newOrder("DRYAGAIN", 1)
	id := c.rejectedDelivery(o, "evt_dry_again", 40000)
	dry := fmt.Sprintf("/admin/deliveries/%d/dry-run", id)
	doc := c.get(dry).Doc(t)
	form := doc.Find(fmt.Sprintf(`form[action="/admin/deliveries/%d/apply"]`, id))
	if form.Length() != 1 || form.Find(`input[name=reason]`).Length() != 1 || !strings.Contains(form.Find("button").Text(), "Apply again") {
		t.Fatalf("the dry run offers no apply again with a reason")
	}
	if doc.Find(".stat .sub.id-wrap").Text() != o.ID {
		t.Errorf("the order's id is not in a wrapping card")
	}
	viewer := c.loginAs("viewer-dry@example.com", models.RoleViewer)
	if n := viewer.get(dry).Doc(t).Find(`form[action$="/apply"]`).Length(); n != 0 {
		t.Errorf("a viewer's dry run offers apply again")
	}
	// Pressed: it applies, as from the delivery's page.
	if p := c.post(fmt.Sprintf("/admin/deliveries/%d/apply", id), url.Values{"reason": {"check"}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("apply again: %d", p.StatusCode)
	}
	var js struct {
		CanApplyAgain bool `json:"can_apply_again"`
	}
	if err := json.Unmarshal([]byte(c.api(fmt.Sprintf("/api/admin/deliveries/%d/dry-run", id)).Body), &js); err != nil || !js.CanApplyAgain {
		t.Errorf("the dry run's JSON: %+v %v, want can_apply_again", js, err)
	}
	css := c.get(static.Path("style.css")).Body
	if !strings.Contains(css, ".stat { min-width: 0; }") || !strings.Contains(css, "overflow-wrap: anywhere") {
		t.Errorf("the style sheet does not keep ids inside their cards")
	}
}

// Ids say what they are: a delivery's id reads "delivery #N" and a
// callback's "callback #N", linked, on the deliveries list, a delivery's
// page and a callback's page with its conflict.
func TestIDsSayTheirKind(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "IDS", 50000, 10)
	o := c.newOrder("IDS", 1)
	accepted := testenv.SandboxBody(o.ID, "tx-ids", models.EventPaid, o.TotalAmount)
	if got := c.deliver("evt_ids", accepted); got != http.StatusOK {
		t.Fatalf("the accepted delivery: %d", got)
	}
	refused := []byte(strings.Replace(string(accepted), `"currency":"IDR"}`, `"currency":"USD"}`, 1))
	if got := c.deliver("evt_ids", refused); got != http.StatusConflict {
		t.Fatalf("the conflicting delivery: %d", got)
	}
	var cb models.PaymentCallback
	c.db.Take(&cb, "idempotency_key = 'evt_ids'")
	var conflict int64
	testenv.Eventually(t, "the conflict's row", func() bool {
		c.db.Raw("SELECT id FROM callback_deliveries WHERE callback_id = ? AND outcome = 'conflict' AND body IS NOT NULL", cb.ID).Scan(&conflict)
		return conflict > 0
	})
	wantDelivery := fmt.Sprintf("delivery #%d", conflict)
	wantCallback := fmt.Sprintf("callback #%d", cb.ID)
	link := func(doc *goquery.Document, kind string, id int64) string {
		return strings.TrimSpace(doc.Find(fmt.Sprintf(`a.id-%s[href="/admin/%s/%d"]`, kind, map[string]string{"delivery": "deliveries", "callback": "callbacks"}[kind], id)).First().Text())
	}
	list := c.get("/admin/deliveries").Doc(t)
	if link(list, "delivery", conflict) != wantDelivery || link(list, "callback", cb.ID) != wantCallback {
		t.Errorf("the deliveries list labels %q and %q", link(list, "delivery", conflict), link(list, "callback", cb.ID))
	}
	page := c.get(fmt.Sprintf("/admin/callbacks/%d", cb.ID)).Doc(t)
	if h := page.Find("h2.conflict"); !strings.Contains(h.Text(), "conflicting "+wantDelivery) || link(page, "delivery", conflict) != wantDelivery {
		t.Errorf("the conflict's heading: %q, want the conflicting %s linked", h.Text(), wantDelivery)
	}
	if !strings.Contains(page.Text(), wantCallback) {
		t.Errorf("the callback's page does not say it is %s", wantCallback)
	}
	one := c.get(fmt.Sprintf("/admin/deliveries/%d", conflict)).Doc(t)
	if link(one, "callback", cb.ID) != wantCallback || !strings.Contains(one.Find("h1").Text(), fmt.Sprintf("Delivery #%d", conflict)) {
		t.Errorf("the delivery's page: %q, callback link %q", one.Find("h1").Text(), link(one, "callback", cb.ID))
	}
	if strings.Contains(one.Text(), fmt.Sprintf(">#%d<", cb.ID)) || strings.Contains(list.Find("#list").Text(), fmt.Sprintf(" #%d ", cb.ID)) {
		t.Error("a bare #id is left")
	}
}

// A second charge — a payment of an order already paid, recorded to go
// back — is marked as one in the callbacks list (HTML and JSON), on the
// order's page and in its story, not shown as plain "processed"; the
// order's own payment stays "processed".
func TestSecondChargeIsMarked(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "TWICE", 50000, 10)
	o := c.newOrder("TWICE", 1)
	for _, tx := range []string{"tx-first", "tx-second"} {
		if got := c.deliver("evt_"+tx, testenv.SandboxBody(o.ID, tx, models.EventPaid, o.TotalAmount)); got != http.StatusOK {
			t.Fatalf("%s: %d", tx, got)
		}
	}
	var first, second models.PaymentCallback
	c.db.Take(&first, "idempotency_key = 'evt_tx-first'")
	c.db.Take(&second, "idempotency_key = 'evt_tx-second'")
	list := c.get("/admin/callbacks").Doc(t)
	badge := func(doc *goquery.Document, id int64) string {
		return strings.TrimSpace(doc.Find(fmt.Sprintf(`tr:has(a[href="/admin/callbacks/%d"]) .badge`, id)).First().Text())
	}
	if got := badge(list, second.ID); got != "second charge" {
		t.Errorf("the list shows the second charge as %q", got)
	}
	if got := badge(list, first.ID); got != "processed" {
		t.Errorf("the list shows the order's own payment as %q", got)
	}
	var js struct {
		Rows []struct {
			ID           int64 `json:"id"`
			SecondCharge bool  `json:"second_charge"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin/callbacks").Body), &js); err != nil {
		t.Fatal(err)
	}
	for _, r := range js.Rows {
		if r.SecondCharge != (r.ID == second.ID) {
			t.Errorf("JSON callback %d: second_charge %v", r.ID, r.SecondCharge)
		}
	}
	if got := strings.TrimSpace(c.get(fmt.Sprintf("/admin/callbacks/%d", second.ID)).Doc(t).Find(".stat .badge").First().Text()); got != "second charge" {
		t.Errorf("the callback's page shows %q", got)
	}
	order := c.get("/admin/orders/" + o.ID).Doc(t)
	if got := badge(order, second.ID); got != "second charge" {
		t.Errorf("the order page's callbacks show the second charge as %q", got)
	}
	var story []string
	for _, line := range texts(order.Find("ol.timeline li .what")) {
		if strings.Contains(line, "evt_tx-") {
			story = append(story, line)
		}
	}
	want := []string{`callback sandbox "evt_tx-first": processed`, `callback sandbox "evt_tx-second": second charge (processed): to be refunded`}
	if strings.Join(story, "|") != strings.Join(want, "|") {
		t.Errorf("the story says %q, want %q", story, want)
	}
}

// An owner corrects the total of an order whose payment was rejected for
// its amount, with a reason, logged in the same transaction; then the
// rejected delivery, applied again, pays it. The form is an owner's only
// (an operator neither sees it nor may post it); an order with no such
// rejection, or already paid, is a 409; a bad amount or no reason a 422.
func TestOwnerCorrectsATotalBeforeApplyingAgain(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "FIXTOTAL", 50000, 10)
	o := c.newOrder("FIXTOTAL", 1)
	clean := c.newOrder("FIXTOTAL", 1) // nothing rejected: its total stands
	id := c.rejectedDelivery(o, "evt_fix_total", 40000)
	orderURL := "/admin/orders/" + o.ID
	form := c.get(orderURL).Doc(t).Find(`form#correct-total[action="` + orderURL + `/total"]`)
	if v, _ := form.Find(`input[name=amount]`).Attr("value"); form.Length() != 1 || v != "40000" || form.Find(`input[name=reason]`).Length() != 1 {
		t.Fatalf("the owner's order page offers no correction of the total with the rejected amount (%d forms, amount %q)", form.Length(), v)
	}
	if c.get("/admin/orders/"+clean.ID).Doc(t).Find("form#correct-total").Length() != 0 {
		t.Error("an order with nothing rejected offers a correction")
	}
	operator := c.loginAs("operator-total@example.com", models.RoleOperator)
	if operator.get(orderURL).Doc(t).Find("form#correct-total").Length() != 0 {
		t.Error("an operator sees the correction form")
	}
	if p := operator.post(orderURL+"/total", url.Values{"amount": {"40000"}, "reason": {"x"}}); p.StatusCode != http.StatusForbidden {
		t.Errorf("an operator's correction: %d, want 403", p.StatusCode)
	}
	total := func(id string) (n int64) {
		c.db.Raw("SELECT total_amount FROM orders WHERE id = ?", id).Scan(&n)
		return n
	}
	for _, bad := range []url.Values{
		{"amount": {"0"}, "reason": {"fix"}},
		{"amount": {"-5"}, "reason": {"fix"}},
		{"amount": {"4e4"}, "reason": {"fix"}},
		{"amount": {"10000000000000000"}, "reason": {"fix"}},
		{"amount": {"40000"}, "reason": {"  "}},
		{"amount": {"40000"}, "reason": {strings.Repeat("r", 501)}},
	} {
		if p := c.post(orderURL+"/total", bad); p.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("correction %v: %d, want 422", bad, p.StatusCode)
		}
	}
	if p := c.post("/admin/orders/"+clean.ID+"/total", url.Values{"amount": {"1"}, "reason": {"why not"}}); p.StatusCode != http.StatusConflict {
		t.Errorf("a correction of an order with nothing rejected: %d, want 409", p.StatusCode)
	}
	if got := total(o.ID); got != 50000 || total(clean.ID) != 50000 {
		t.Fatalf("refused corrections changed a total: %d, %d", got, total(clean.ID))
	}

	if p := c.post(orderURL+"/total", url.Values{"amount": {"40000"}, "reason": {"the price was 40000 that day"}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("the correction: %d\n%s", p.StatusCode, p.Body)
	}
	if got := total(o.ID); got != 40000 {
		t.Fatalf("the total after the correction: %d, want 40000", got)
	}
	var logged models.AdminAction
	if err := c.db.Take(&logged, "action = 'correct total' AND result = 'ok'").Error; err != nil ||
		logged.AdminEmail != adminEmail || logged.Target != "order "+o.ID || !strings.Contains(logged.Detail, "50000 → 40000 IDR; the price was 40000 that day") {
		t.Errorf("the action log: %+v, %v", logged, err)
	}
	story := c.get(orderURL).Doc(t).Find("ol.timeline li:contains('total corrected')")
	if !strings.Contains(story.Find(".what").Text(), "total corrected by "+adminEmail) || !strings.Contains(story.Text(), "50000 → 40000 IDR") {
		t.Errorf("the order's story tells the correction as %q", story.Text())
	}
	var refused int64
	c.db.Raw("SELECT count(*) FROM admin_actions WHERE action = 'correct total' AND result = 'refused'").Scan(&refused)
	if refused != 7 {
		t.Errorf("%d refused corrections logged, want 7", refused)
	}
	if p := c.post(fmt.Sprintf("/admin/deliveries/%d/apply", id), url.Values{"reason": {"total corrected"}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("apply again: %d", p.StatusCode)
	}
	var status string
	c.db.Raw("SELECT status FROM orders WHERE id = ?", o.ID).Scan(&status)
	if status != "paid" {
		t.Fatalf("after the correction and apply again the order is %s, want paid", status)
	}
	if p := c.post(orderURL+"/total", url.Values{"amount": {"30000"}, "reason": {"again"}}); p.StatusCode != http.StatusConflict {
		t.Errorf("a correction of a paid order: %d, want 409", p.StatusCode)
	}
	if c.get(orderURL).Doc(t).Find("form#correct-total").Length() != 0 {
		t.Error("a paid order offers a correction")
	}
}

// Each dashboard alert links to what raised it; an operator acknowledges
// one (logged in the same transaction), and it leaves the dashboard; a
// second acknowledgement is a 409, and a viewer is offered none and may
// not post one.
func TestDashboardAlertsLinkAndAreAcknowledged(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	raise := func(typ, key, data string) int64 {
		var id int64
		err := c.db.Raw(`INSERT INTO alerts (event_id, type, payload) VALUES (?, ?, ?::jsonb) RETURNING id`,
			typ+":"+key, typ, `{"type":"`+typ+`","timestamp":"2026-12-01T00:00:00Z","data":`+data+`}`).Scan(&id).Error
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	refund := raise("refund.failed", "7", `{"refund_request_id":7,"order_id":"ORD-01JALERTREFUND00000000000","provider":"sandbox"}`)
	raise("callbacks.conflict_burst", "20261201T0000Z", `{"conflicts":5}`)
	raise("audit.red", "after-run-0", `{"audit_run_id":1}`)
	raise("jobs.archived", "20261201T0005Z", `{"tasks":1,"task_ids":["invoice:generate:ORD-01JALERTJOB000000000000000"]}`)
	links := func(doc *goquery.Document) map[string]string {
		out := map[string]string{}
		doc.Find("h2:contains('Alerts') + .table-wrap tbody tr").Each(func(_ int, tr *goquery.Selection) {
			a := tr.Find("td").First().Find("a")
			href, _ := a.Attr("href")
			out[strings.TrimSpace(a.Text())] = href
		})
		return out
	}
	want := map[string]string{
		"refund.failed":            "/admin/orders/ORD-01JALERTREFUND00000000000",
		"callbacks.conflict_burst": "/admin/deliveries?outcome=conflict",
		"audit.red":                "/admin/audit",
		"jobs.archived":            "/admin/jobs/invoice:generate:ORD-01JALERTJOB000000000000000",
	}
	doc := c.get("/admin").Doc(t)
	got := links(doc)
	for event, href := range want {
		if got[event] != href {
			t.Errorf("the %s alert links to %q, want %q", event, got[event], href)
		}
	}
	ackURL := fmt.Sprintf("/admin/alerts/%d/acknowledge", refund)
	if doc.Find(`form[action="`+ackURL+`"] button:contains('Acknowledge')`).Length() != 1 {
		t.Fatalf("the dashboard offers no acknowledgement of the refund's alert")
	}
	var js struct {
		Alerts []struct {
			ID    int64  `json:"id"`
			Event string `json:"event"`
			Link  string `json:"link"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin").Body), &js); err != nil {
		t.Fatal(err)
	}
	for _, a := range js.Alerts {
		if a.Link != want[a.Event] || a.ID == 0 {
			t.Errorf("JSON alert %+v, want link %q", a, want[a.Event])
		}
	}

	viewer := c.loginAs("viewer-alerts@example.com", models.RoleViewer)
	if viewer.get("/admin").Doc(t).Find(`form[action$="/acknowledge"]`).Length() != 0 {
		t.Error("a viewer is offered to acknowledge alerts")
	}
	if p := viewer.post(ackURL, nil); p.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's acknowledgement: %d, want 403", p.StatusCode)
	}
	operator := c.loginAs("operator-alerts@example.com", models.RoleOperator)
	if p := operator.post(ackURL, nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's acknowledgement: %d\n%s", p.StatusCode, p.Body)
	}
	if _, left := links(c.get("/admin").Doc(t))["refund.failed"]; left {
		t.Error("an acknowledged alert is still on the dashboard")
	}
	if n := len(links(c.get("/admin").Doc(t))); n != 3 {
		t.Errorf("%d alerts left on the dashboard, want 3", n)
	}
	var by string
	c.db.Raw("SELECT acknowledged_by FROM alerts WHERE id = ? AND acknowledged_at IS NOT NULL", refund).Scan(&by)
	var logged int64
	c.db.Raw("SELECT count(*) FROM admin_actions WHERE action = 'acknowledge alert' AND admin_email = 'operator-alerts@example.com' AND target = ? AND result = 'ok'",
		fmt.Sprintf("alert %d", refund)).Scan(&logged)
	if by != "operator-alerts@example.com" || logged != 1 {
		t.Errorf("acknowledged by %q, %d action-log entries; want the operator, 1", by, logged)
	}
	if p := c.post(ackURL, nil); p.StatusCode != http.StatusConflict || !strings.Contains(p.Body, "operator-alerts@example.com") {
		t.Errorf("a second acknowledgement: %d, want 409 naming who did it", p.StatusCode)
	}
	if p := c.post("/admin/alerts/999999/acknowledge", nil); p.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown alert's acknowledgement: %d, want 404", p.StatusCode)
	}
}
