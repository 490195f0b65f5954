package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The refunds here are of an order in US dollars, so that the amount
// asked in major units ("12.50") and the record's minor units (1250)
// differ. No worker runs in the console: a refund asked stays planned.

// usdPrice is the price of one unit of a refunds test's product: 25.00 USD.
const usdPrice = 2500

// paidUSDOrder is an order of two units of a new product at 25.00 USD,
// paid through the sandbox: 50.00 USD.
func (c *console) paidUSDOrder(t *testing.T, sku string) *models.Order {
	t.Helper()
	if created, err := catalog.Create(c.db, &models.Product{SKU: sku, Name: sku, Price: usdPrice, Currency: "USD", Stock: 20}); err != nil || !created {
		t.Fatalf("create %s: %v, %v", sku, created, err)
	}
	o := c.newOrder(sku, 2)
	body := `{"order_id":"` + o.ID + `","transaction_id":"tx-` + o.ID + `","payment_status":"paid","paid_amount":` +
		strconv.FormatInt(o.TotalAmount, 10) + `,"currency":"USD"}`
	if st := c.deliver("evt_paid_"+o.ID, []byte(body)); st != http.StatusOK {
		t.Fatalf("pay %s: %d", o.ID, st)
	}
	return o
}

// refundAPI is POST /api/admin/orders/{id}/refunds with the admin token,
// under key (none when "").
func (c *console) refundAPI(id, key, body string) page {
	h := http.Header{"Authorization": {"Bearer " + apiToken}, "Accept": {"application/json"}, "Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return c.do(http.DefaultClient, "POST", "/api/admin/orders/"+url.PathEscape(id)+"/refunds", strings.NewReader(body), h)
}

// refundRecord is a refund record as the admin API answers it.
type refundRecord struct {
	ID             int64  `json:"id"`
	OrderID        string `json:"order_id"`
	Kind           string `json:"kind"`
	Provider       string `json:"provider"`
	IdempotencyKey string `json:"idempotency_key"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Phase          string `json:"phase"`
	Reason         string `json:"reason"`
	RequestedBy    string `json:"requested_by"`
	// Who approved or declined one above REFUND_APPROVAL_ABOVE.
	ApprovedBy string     `json:"approved_by"`
	ApprovedAt *time.Time `json:"approved_at"`
	DeclinedBy string     `json:"declined_by"`
}

// hiddenFields are the hidden inputs of a form, as it would post them.
func hiddenFields(form *goquery.Selection) url.Values {
	fields := url.Values{}
	form.Find("input[type=hidden]").Each(func(_ int, s *goquery.Selection) { fields.Set(s.AttrOr("name", ""), s.AttrOr("value", "")) })
	return fields
}

// problemCode is the code of a problem+json answer.
func problemCode(t *testing.T, p page) string {
	t.Helper()
	var v struct{ Code string }
	if err := json.Unmarshal([]byte(p.Body), &v); err != nil {
		t.Fatalf("%d %q is not a problem: %v", p.StatusCode, p.Body, err)
	}
	return v.Code
}

// count runs a count query on the console's database.
func (c *console) count(query string, args ...any) int64 {
	c.t.Helper()
	var n int64
	if err := c.db.Raw(query, args...).Scan(&n).Error; err != nil {
		c.t.Fatal(err)
	}
	return n
}

// refundRows are the refund records of order id.
func (c *console) refundRows(id string) []models.GatewayRequest {
	c.t.Helper()
	var rows []models.GatewayRequest
	if err := c.db.Order("id").Find(&rows, "order_id = ? AND kind = ?", id, models.GatewayRefund).Error; err != nil {
		c.t.Fatal(err)
	}
	return rows
}

// refundJobs counts the refund:send rows written to the outbox.
func (c *console) refundJobs() int64 {
	c.t.Helper()
	return c.count("SELECT count(*) FROM outbox_messages WHERE task_type = ?", jobs.TaskRefundSend)
}

// The admin API asks for a refund under an Idempotency-Key: 202 with the
// record (minor units, planned, the reason, asked by "api"); the same
// request again is the same record, replayed; the key with another body,
// or no key, is refused; more than is left, an unpaid order and an
// unknown one are refused and write nothing. The order's JSON then lists
// the refund and what is left.
func TestRefundAPI(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	o := c.paidUSDOrder(t, "RF-API")
	key := "refund-api-" + o.ID
	const body = `{"amount":"12.50","reason":"one cup arrived broken"}`

	first := c.refundAPI(o.ID, key, body)
	var rec refundRecord
	if first.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(first.Body), &rec) != nil {
		t.Fatalf("refund: %d %s; want 202 with the record", first.StatusCode, first.Body)
	}
	want := refundRecord{ID: rec.ID, OrderID: o.ID, Kind: "refund", Provider: "sandbox", IdempotencyKey: o.ID + "-R1",
		Amount: 1250, Currency: "USD", Phase: "planned", Reason: "one cup arrived broken", RequestedBy: "api"}
	if rec != want || rec.ID == 0 {
		t.Errorf("refund record %+v, want %+v", rec, want)
	}
	if h := first.Header.Get("Idempotent-Replayed"); h != "" {
		t.Errorf("the first answer says Idempotent-Replayed: %q", h)
	}
	// The job carries the refund record's id and the admin's request id,
	// in fields of their own.
	var payload string
	c.db.Raw("SELECT convert_from(payload, 'UTF8') FROM outbox_messages WHERE task_type = ?", jobs.TaskRefundSend).Scan(&payload)
	var args jobs.RefundArgs
	if err := json.Unmarshal([]byte(payload), &args); err != nil || args.RefundRequestID != rec.ID ||
		args.RequestID == "" || args.RequestID != first.Header.Get("X-Request-Id") {
		t.Errorf("the refund:send payload %s (%v): want refund_request_id %d and the request's X-Request-Id %q",
			payload, err, rec.ID, first.Header.Get("X-Request-Id"))
	}

	again := c.refundAPI(o.ID, key, body)
	var replayed refundRecord
	if again.StatusCode != http.StatusAccepted || again.Header.Get("Idempotent-Replayed") != "true" ||
		json.Unmarshal([]byte(again.Body), &replayed) != nil || replayed != rec {
		t.Errorf("the same request again: %d, Idempotent-Replayed %q, %s; want 202, true and the same record",
			again.StatusCode, again.Header.Get("Idempotent-Replayed"), again.Body)
	}
	if p := c.refundAPI(o.ID, key, `{"amount":"10.00","reason":"one cup arrived broken"}`); p.StatusCode != http.StatusUnprocessableEntity ||
		problemCode(t, p) != models.EIdempotencyReused {
		t.Errorf("the key with another body: %d %s; want 422 %s", p.StatusCode, p.Body, models.EIdempotencyReused)
	}
	if p := c.refundAPI(o.ID, "", body); p.StatusCode != http.StatusBadRequest || problemCode(t, p) != models.EIdempotencyMissing {
		t.Errorf("no key: %d %s; want 400 %s", p.StatusCode, p.Body, models.EIdempotencyMissing)
	}
	if rows := c.refundRows(o.ID); len(rows) != 1 || c.refundJobs() != 1 {
		t.Fatalf("after one refund asked four times: %d records, %d refund:send rows; want 1 and 1", len(rows), c.refundJobs())
	}

	// 37.50 is left: 40.00 is refused, and nothing is written.
	requests, outbox := c.count("SELECT count(*) FROM gateway_requests"), c.count("SELECT count(*) FROM outbox_messages")
	over := c.refundAPI(o.ID, "refund-api-over-"+o.ID, `{"amount":"40.00","reason":"all of it and more"}`)
	if over.StatusCode != http.StatusUnprocessableEntity || problemCode(t, over) != models.EInvalid || !strings.Contains(over.Body, "37.50 USD") {
		t.Errorf("more than is left: %d %s; want 422 saying 37.50 USD is left", over.StatusCode, over.Body)
	}
	if n, m := c.count("SELECT count(*) FROM gateway_requests"), c.count("SELECT count(*) FROM outbox_messages"); n != requests || m != outbox {
		t.Errorf("a refused refund wrote %d gateway request(s) and %d outbox row(s)", n-requests, m-outbox)
	}

	// An order not paid yet has nothing to refund; an unknown one is 404.
	pending := c.newOrder("RF-API", 1)
	if p := c.refundAPI(pending.ID, "refund-api-pending-"+pending.ID, body); p.StatusCode != http.StatusConflict ||
		problemCode(t, p) != models.EInvalidTransition {
		t.Errorf("a pending order: %d %s; want 409 %s", p.StatusCode, p.Body, models.EInvalidTransition)
	}
	for _, id := range []string{"ORD-01M8SH00000000000000000000", "not-an-order"} {
		if p := c.refundAPI(id, "refund-api-unknown-"+id, body); p.StatusCode != http.StatusNotFound {
			t.Errorf("order %s: %d %s; want 404", id, p.StatusCode, p.Body)
		}
	}
	if n := c.count("SELECT count(*) FROM gateway_requests WHERE kind = 'refund'"); n != 1 {
		t.Errorf("%d refund records in all, want 1", n)
	}
	if n := c.count("SELECT count(*) FROM admin_actions WHERE action = 'refund order' AND admin_email = 'api' AND result = 'ok'"); n != 1 {
		t.Errorf("%d refunds in the action log, want 1 (a replay is not an action)", n)
	}

	// The order's JSON lists the refund, in minor units, and what is left.
	var order struct {
		Refunds []struct {
			Phase    string `json:"phase"`
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
			Reason   string `json:"reason"`
		} `json:"refunds"`
		RefundLeft int64 `json:"refund_left"`
	}
	p := c.api("/api/admin/orders/" + o.ID)
	if err := json.Unmarshal([]byte(p.Body), &order); err != nil || p.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/admin/orders/%s: %d %v %s", o.ID, p.StatusCode, err, p.Body)
	}
	if len(order.Refunds) != 1 || order.Refunds[0].Phase != "planned" || order.Refunds[0].Amount != 1250 ||
		order.Refunds[0].Currency != "USD" || order.Refunds[0].Reason != "one cup arrived broken" || order.RefundLeft != 3750 {
		t.Errorf("the order's JSON: refunds %+v, refund_left %d; want the planned refund of 1250 USD and 3750 left", order.Refunds, order.RefundLeft)
	}
}

// The console's refund form leads to a page that asks first (a wrong
// amount shows the form again, 422); only its button, with confirm=yes,
// refunds — once, however often the same form is sent — and the admin's
// action is logged.
func TestRefundConsoleForm(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	o := c.paidUSDOrder(t, "RF-FORM")
	base := "/admin/orders/" + o.ID + "/refund"

	ask := c.get(base + "?" + url.Values{"amount": {"10"}, "reason": {"the lid was chipped"}}.Encode())
	if ask.StatusCode != http.StatusOK {
		t.Fatalf("the confirm page: %d\n%s", ask.StatusCode, ask.Body)
	}
	doc := ask.Doc(t)
	if h := strings.Join(strings.Fields(doc.Find("h1").Text()), " "); h != "Refund 10.00 USD of order "+o.ID+"?" {
		t.Errorf("the confirm page's h1: %q", h)
	}
	form := doc.Find(`form[method="post"]`)
	key, _ := form.Find(`input[name="idempotency_key"]`).Attr("value")
	fields := hiddenFields(form)
	if key == "" || fields.Get("confirm") != "yes" || fields.Get("amount") != "10" || fields.Get("reason") != "the lid was chipped" {
		t.Fatalf("the confirm page's form sends %v; want a key, confirm=yes, the amount and the reason", fields)
	}

	// Each error stands under the field it is about, in the words the
	// refund itself would answer (refunds.Refundable.Amount).
	for _, bad := range []struct {
		form        url.Values
		field, says string
	}{
		{url.Values{"amount": {"ten"}, "reason": {"the lid was chipped"}}, "amount", "amount must be a positive number"},
		{url.Values{"amount": {"50.01"}, "reason": {"the lid was chipped"}}, "amount", "at most 50.00 USD is left to refund of order " + o.ID},
		{url.Values{"amount": {"0"}, "reason": {"the lid was chipped"}}, "amount", "amount 0 is not a positive amount of USD"},
		{url.Values{"amount": {"10"}, "reason": {" "}}, "reason", "say why"},
	} {
		p := c.get(base + "?" + bad.form.Encode())
		d := p.Doc(t)
		under := d.Find(`label:has(input[name="` + bad.field + `"]) .field-error`)
		if p.StatusCode != http.StatusUnprocessableEntity || d.Find(`form[method="get"] input[name="amount"]`).Length() != 1 ||
			d.Find(".field-error").Length() != 1 || under.Length() != 1 || !strings.Contains(under.Text(), bad.says) {
			t.Errorf("%v: %d, %q under %s; want 422 with the form and %q under %s", bad.form, p.StatusCode, under.Text(), bad.field, bad.says, bad.field)
		}
	}

	// Without confirm=yes the POST refunds nothing: it goes to the page
	// that asks.
	p := c.post(base, url.Values{"amount": {"10"}, "reason": {"the lid was chipped"}, "idempotency_key": {key}})
	toAsk := base + "?" + url.Values{"amount": {"10"}, "reason": {"the lid was chipped"}}.Encode()
	if loc := p.Header.Get("Location"); p.StatusCode != http.StatusSeeOther || loc != toAsk {
		t.Errorf("POST without confirm: %d to %q; want 303 to the page that asks", p.StatusCode, loc)
	}
	if rows := c.refundRows(o.ID); len(rows) != 0 {
		t.Fatalf("a POST without confirm=yes wrote %d refund(s)", len(rows))
	}

	// The button, pressed twice: one refund.
	for i := range 2 {
		p := c.post(base, fields)
		if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/orders/"+o.ID+"#refunds" {
			t.Fatalf("press %d: %d to %q; want 303 to the order's refunds", i+1, p.StatusCode, p.Header.Get("Location"))
		}
		if i == 0 {
			if f := c.get("/admin/orders/" + o.ID).Doc(t).Find(".flash").Text(); !strings.HasPrefix(f, "Refund of 10.00 USD asked of sandbox.") {
				t.Errorf("the flash after the refund: %q", f)
			}
		}
	}
	rows := c.refundRows(o.ID)
	if len(rows) != 1 || rows[0].Amount != 1000 || rows[0].Currency != "USD" || rows[0].RequestedBy != adminEmail ||
		rows[0].Reason != "the lid was chipped" || rows[0].Phase != models.GatewayPlanned || c.refundJobs() != 1 {
		t.Fatalf("after two presses: %+v and %d refund:send row(s); want one planned refund of 1000 USD asked by %s", rows, c.refundJobs(), adminEmail)
	}
	if n := c.count("SELECT count(*) FROM admin_actions WHERE action = 'refund order' AND admin_email = ? AND target = ? AND result = 'ok'", adminEmail, o.ID); n != 1 {
		t.Errorf("%d refunds of %s in the action log, want 1", n, o.ID)
	}
	if row := c.get("/admin/orders/" + o.ID).Doc(t).Find("#refund-list tbody tr"); row.Length() != 1 || !strings.Contains(row.Text(), "10.00 USD") ||
		!strings.Contains(row.Text(), "the lid was chipped") {
		t.Errorf("the order page's refunds: %d row(s) %q", row.Length(), row.Text())
	}
}

// Two admins refund the whole order at the same moment, each with a key
// of their own: one refund is accepted, the other finds nothing left.
func TestRefundTwiceAtOnce(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	o := c.paidUSDOrder(t, "RF-RACE")
	statuses := make([]int, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			<-start
			p := c.refundAPI(o.ID, "refund-race-"+strconv.Itoa(i)+"-"+o.ID, `{"amount":"50.00","reason":"returned"}`)
			statuses[i] = p.StatusCode
		})
	}
	close(start)
	wg.Wait()
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{http.StatusAccepted, http.StatusUnprocessableEntity}) {
		t.Errorf("two refunds of everything at once: %v; want one 202 and one 422", statuses)
	}
	if rows := c.refundRows(o.ID); len(rows) != 1 || rows[0].Amount != 5000 || c.refundJobs() != 1 {
		t.Errorf("%+v and %d refund:send row(s); want one refund of 5000 and its job", rows, c.refundJobs())
	}
}

// The gateway calls page lists a refund not over with "Send again now";
// pressing it sends the refund through the job's own Send — the sandbox
// refunds it, the answer is applied, the row is done — and it is logged.
// Pressed again, it finds the refund over and sends nothing.
func TestRefundSendAgainNow(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	o := c.paidUSDOrder(t, "RF-AGAIN")
	if p := c.refundAPI(o.ID, "refund-again-"+o.ID, `{"amount":"20.00","reason":"a cracked lid"}`); p.StatusCode != http.StatusAccepted {
		t.Fatalf("refund: %d", p.StatusCode)
	}
	rows := c.refundRows(o.ID)
	if len(rows) != 1 || rows[0].Phase != models.GatewayPlanned {
		t.Fatalf("refunds %+v, want one planned", rows)
	}
	// A refund not answered yet names no gateway refund: it says so.
	if cell := c.get("/admin/orders/" + o.ID).Doc(t).Find("#refund-list tbody tr td").Eq(5).Text(); !strings.Contains(cell, "sandbox: not answered yet") {
		t.Errorf("the planned refund's gateway refund reads %q, want \"sandbox: not answered yet\"", strings.TrimSpace(cell))
	}
	retry := "/admin/gateway-requests/" + strconv.FormatInt(rows[0].ID, 10) + "/retry"
	list := c.get("/admin/gateway-requests?phase=open").Doc(t)
	if list.Find(`form[action="`+retry+`"] button`).Length() != 1 {
		t.Fatalf("the open calls list offers no \"Send again now\" for the refund")
	}
	if p := c.post(retry, nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("send again: %d", p.StatusCode)
	}
	rows = c.refundRows(o.ID)
	var order models.Order
	c.db.Take(&order, "id = ?", o.ID)
	if rows[0].Phase != models.GatewayDone || rows[0].Attempts != 1 || order.Status != models.OrderPartiallyRefunded {
		t.Fatalf("after sending again: %+v, order %s; want done after one call, partially_refunded", rows[0], order.Status)
	}
	if n := c.count("SELECT count(*) FROM admin_actions WHERE action = 'send refund again' AND result = 'ok'"); n != 1 {
		t.Errorf("%d 'send refund again' actions logged, want 1", n)
	}
	if p := c.post(retry, nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("send again once done: %d", p.StatusCode)
	}
	if rows = c.refundRows(o.ID); rows[0].Attempts != 1 {
		t.Errorf("a done refund sent again: %d attempts, want 1", rows[0].Attempts)
	}
	if list := c.get("/admin/gateway-requests?phase=open").Doc(t); list.Find(`form[action="`+retry+`"]`).Length() != 0 {
		t.Error("a done refund still offers \"Send again now\"")
	}
}

// A refund whose answer is unknown (the sandbox gateway answered 500)
// shows on the order's page and in the list of calls as not asked about
// yet, when it is asked next, and "Ask now"; its JSON says the same.
// Pressed from the order's page, "Ask now" asks through the janitor —
// the sandbox refunds it, the refund is done, asked once — goes back to
// the order's refunds, and is logged.
func TestRefundAskNow(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	o := c.paidUSDOrder(t, "RF-ASK")
	if p := c.refundAPI(o.ID, "refund-ask-"+o.ID, `{"amount":"20.00","reason":"a cracked lid"}`); p.StatusCode != http.StatusAccepted {
		t.Fatalf("refund: %d", p.StatusCode)
	}
	rows := c.refundRows(o.ID)
	retry := "/admin/gateway-requests/" + strconv.FormatInt(rows[0].ID, 10) + "/retry"
	c.gateway.Faults().FailNext(1)
	if p := c.post(retry, url.Values{"from": {"order"}}); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/orders/"+o.ID+"#refunds" {
		t.Fatalf("send again, the gateway failing: %d to %q; want 303 to the order's refunds", p.StatusCode, p.Header.Get("Location"))
	}
	if rows = c.refundRows(o.ID); rows[0].Phase != models.GatewaySent || rows[0].NextAskAt == nil {
		t.Fatalf("after the gateway's 500: %+v; want sent, its next ask set", rows[0])
	}
	for path, css := range map[string]string{"/admin/orders/" + o.ID: "#refund-list", "/admin/gateway-requests?phase=open": "#list"} {
		cell := c.get(path).Doc(t).Find(css + " tbody tr")
		if s := strings.TrimSpace(cell.Find(".asked").Text()); !strings.HasPrefix(s, "not asked yet, next at ") || !strings.Contains(s, " UTC (in ") {
			t.Errorf("%s: the refund's schedule reads %q", path, s)
		}
		if cell.Find(`form[action="`+retry+`"] button`).Text() != "Ask now" {
			t.Errorf("%s: no Ask now for the unknown refund", path)
		}
	}
	var js struct {
		Refunds []struct {
			Asks    int        `json:"asks"`
			NextAsk *time.Time `json:"next_ask_at"`
			Unknown *time.Time `json:"unknown_since"`
		} `json:"refunds"`
	}
	p := c.do(http.DefaultClient, "GET", "/api/admin/orders/"+o.ID, nil, http.Header{"Authorization": {"Bearer " + apiToken}, "Accept": {"application/json"}})
	if err := json.Unmarshal([]byte(p.Body), &js); err != nil || len(js.Refunds) != 1 || js.Refunds[0].NextAsk == nil || js.Refunds[0].Unknown == nil {
		t.Errorf("the order's JSON: %+v, %v; want the refund's schedule", js.Refunds, err)
	}

	c.db.Exec("UPDATE gateway_requests SET locked_until = now() - interval '1 second' WHERE id = ?", rows[0].ID) // its call's lease passes
	if p := c.post(retry, url.Values{"from": {"order"}}); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/orders/"+o.ID+"#refunds" {
		t.Fatalf("ask now: %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if rows = c.refundRows(o.ID); rows[0].Phase != models.GatewayDone || rows[0].Asks != 1 || rows[0].NextAskAt != nil {
		t.Fatalf("after ask now: %+v; want done, asked once, its schedule over", rows[0])
	}
	if n := c.count("SELECT count(*) FROM admin_actions WHERE action = 'ask gateway now' AND result = 'ok' AND detail = 'final'"); n != 1 {
		t.Errorf("%d 'ask gateway now' actions logged, want 1", n)
	}
	if doc := c.get("/admin/orders/" + o.ID).Doc(t); doc.Find("#refund-list .asked").Length() != 0 || doc.Find(`form[action="`+retry+`"]`).Length() != 0 {
		t.Error("the done refund still shows a schedule or a button")
	}
}

// A paid order charged a second time: its page offers that charge back
// in one click (with the order's own refund form beside it), and the
// click refunds that charge, all of it, once; the admin API refunds such
// a charge when the body names its provider_reference.
func TestRefundASecondCharge(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	for _, via := range []string{"console", "api"} {
		o := c.paidUSDOrder(t, "RF-TWICE-"+strings.ToUpper(via))
		second := "tx2-" + o.ID
		body := `{"order_id":"` + o.ID + `","transaction_id":"` + second + `","payment_status":"paid","paid_amount":` +
			strconv.FormatInt(o.TotalAmount, 10) + `,"currency":"USD"}`
		if st := c.deliver("evt_paid_again_"+o.ID, []byte(body)); st != http.StatusOK {
			t.Fatalf("second charge of %s: %d", o.ID, st)
		}
		card := c.get("/admin/orders/" + o.ID).Doc(t).Find("#refund-form-" + second)
		if !strings.Contains(card.Text(), "charged again after it was paid: the customer is owed 50.00 USD of the charge "+second) {
			t.Fatalf("%s: the order page's card for the second charge: %q", via, card.Text())
		}
		switch via {
		case "console":
			fields := hiddenFields(card)
			for range 2 { // a double click
				if p := c.post("/admin/orders/"+o.ID+"/refund", fields); p.StatusCode != http.StatusSeeOther {
					t.Fatalf("refund in full: %d", p.StatusCode)
				}
			}
		case "api":
			p := c.refundAPI(o.ID, "twice-"+o.ID, `{"reason":"charged twice","provider_reference":"`+second+`"}`)
			if p.StatusCode != http.StatusAccepted {
				t.Fatalf("the API: %d %s", p.StatusCode, p.Body)
			}
		}
		var charge models.Payment
		if err := c.db.Take(&charge, "provider_reference = ?", second).Error; err != nil {
			t.Fatal(err)
		}
		rows := c.refundRows(o.ID)
		if len(rows) != 1 || rows[0].PaymentID == nil || *rows[0].PaymentID != charge.ID || rows[0].Amount != o.TotalAmount || rows[0].Reason != "charged twice" {
			t.Fatalf("%s: refunds %+v; want one of all of payment %d, charged twice", via, rows, charge.ID)
		}
		// The order's own charge is untouched: its form still offers all of it.
		doc := c.get("/admin/orders/" + o.ID).Doc(t)
		if left := doc.Find("#refund-form p.muted").Text(); !strings.HasPrefix(left, "Up to 50.00 USD is left to refund") {
			t.Errorf("%s: the order's own refund form after the second charge's refund: %q", via, left)
		}
		if doc.Find("#refund-form-"+second).Length() != 0 {
			t.Errorf("%s: the second charge is still offered while its refund is asked", via)
		}
	}
	// A payment the order does not have: 422, nothing written.
	o := c.paidUSDOrder(t, "RF-TWICE-NONE")
	if p := c.refundAPI(o.ID, "none-"+o.ID, `{"reason":"charged twice","provider_reference":"tx-nobody"}`); p.StatusCode != http.StatusUnprocessableEntity || len(c.refundRows(o.ID)) != 0 {
		t.Errorf("a payment the order does not have: %d %s; want 422 and nothing written", p.StatusCode, p.Body)
	}
}

// A refund the gateway accepted and then failed: the order is paid
// again, and its page says so — the refund record failed, the gateway's
// reason beside it, and "Send again…", which asks for the same amount and
// reason on the confirm page (a new refund, under a new key). The order's
// JSON lists the refund at the gateway, failed with its reason.
func TestRefundFailedAtTheGatewayIsShownAndSentAgain(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	o := c.paidUSDOrder(t, "RF-FAILED")
	if p := c.refundAPI(o.ID, "refund-failed-"+o.ID, `{"amount":"20.00","reason":"a cracked lid"}`); p.StatusCode != http.StatusAccepted {
		t.Fatalf("refund: %d", p.StatusCode)
	}
	rows := c.refundRows(o.ID)
	if p := c.post("/admin/gateway-requests/"+strconv.FormatInt(rows[0].ID, 10)+"/retry", nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d", p.StatusCode)
	}
	// The gateway's later word: the refund failed.
	body := `{"order_id":"` + o.ID + `","transaction_id":"tx-` + o.ID + `","payment_status":"refunded","paid_amount":2000,"currency":"USD",` +
		`"refund_id":"` + rows[0].IdempotencyKey + `","refund_status":"failed","failure_reason":"the card account is closed"}`
	if st := c.deliver("evt_refund_failed_"+o.ID, []byte(body)); st != http.StatusOK {
		t.Fatalf("the refund's failure: %d", st)
	}
	var order models.Order
	c.db.Take(&order, "id = ?", o.ID)
	if rows = c.refundRows(o.ID); order.Status != models.OrderPaid || rows[0].Phase != models.GatewayFailed {
		t.Fatalf("after the failure: order %s, refund %s; want paid, failed", order.Status, rows[0].Phase)
	}
	doc := c.get("/admin/orders/" + o.ID).Doc(t)
	list := doc.Find("#refund-list")
	if !strings.Contains(list.Text(), "the card account is closed") || !strings.Contains(list.Text(), "accepted the refund, then failed it") {
		t.Errorf("the refunds list does not say the refund failed, nor why:\n%s", list.Text())
	}
	again, ok := list.Find(`a:contains("Send again")`).Attr("href")
	if !ok {
		t.Fatal("no \"Send again…\" for the failed refund")
	}
	confirm := c.get(again)
	if confirm.StatusCode != http.StatusOK || !strings.Contains(confirm.Body, "20.00 USD") || !strings.Contains(confirm.Body, "a cracked lid") {
		t.Fatalf("Send again… leads to %d; want the confirm page of 20.00 USD, a cracked lid", confirm.StatusCode)
	}
	form := url.Values{}
	confirm.Doc(t).Find(`form[method="post"] input`).Each(func(_ int, s *goquery.Selection) {
		form.Set(s.AttrOr("name", ""), s.AttrOr("value", ""))
	})
	if p := c.post("/admin/orders/"+o.ID+"/refund", form); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirm: %d", p.StatusCode)
	}
	if rows = c.refundRows(o.ID); len(rows) != 2 || rows[1].IdempotencyKey == rows[0].IdempotencyKey || rows[1].Amount != 2000 {
		t.Errorf("after sending again: %+v; want a second refund of 2000 under a new key", rows)
	}
	var js struct {
		GatewayRefunds []struct {
			RefundKey     string `json:"refund_key"`
			Status        string `json:"status"`
			FailureReason string `json:"failure_reason"`
		} `json:"gateway_refunds"`
	}
	p := c.do(http.DefaultClient, "GET", "/api/admin/orders/"+o.ID, nil, http.Header{"Authorization": {"Bearer " + apiToken}, "Accept": {"application/json"}})
	if err := json.Unmarshal([]byte(p.Body), &js); err != nil || len(js.GatewayRefunds) != 1 || js.GatewayRefunds[0].Status != "failed" ||
		js.GatewayRefunds[0].FailureReason != "the card account is closed" {
		t.Errorf("the order's JSON: %+v, %v", js.GatewayRefunds, err)
	}
}

// A charge under dispute: the admin API answers 409 charge_disputed and
// writes nothing; the order's page offers no refund and says why.
func TestRefundOfADisputedChargeIsRefused(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	o := c.paidUSDOrder(t, "RF-DISPUTE")
	body := `{"order_id":"` + o.ID + `","transaction_id":"tx-` + o.ID + `","payment_status":"disputed","paid_amount":5000,"currency":"USD"}`
	if st := c.deliver("evt_dispute_"+o.ID, []byte(body)); st != http.StatusOK {
		t.Fatalf("dispute: %d", st)
	}
	p := c.refundAPI(o.ID, "refund-dispute-"+o.ID, `{"reason":"the customer asked"}`)
	if p.StatusCode != http.StatusConflict || problemCode(t, p) != models.EChargeDisputed || len(c.refundRows(o.ID)) != 0 {
		t.Errorf("refund of a disputed charge: %d %s, %d records; want 409 %s, none", p.StatusCode, p.Body, len(c.refundRows(o.ID)), models.EChargeDisputed)
	}
	doc := c.get("/admin/orders/" + o.ID).Doc(t)
	if doc.Find("#refund-form").Length() != 0 || !strings.Contains(doc.Find("#refunds").Parent().Text(), "dispute") {
		t.Errorf("the order's page offers a refund of a disputed charge, or does not say why")
	}
}

// A refund Sekali asked for is told twice — by the gateway's answer and
// by its notification — and whichever comes second changes nothing
// (stale). On the order's page that callback reads as what it is, told
// of our own refund, in no warning colour (and so do the callbacks list
// and the callback's page), while the JSON keeps its result. Once all is refunded, the refund form says so as a state, not
// as an error, and asking for more says the same.
func TestRefundToldBackAndFullyRefunded(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	o := c.paidUSDOrder(t, "RF-TOLD")
	if p := c.refundAPI(o.ID, "refund-told-"+o.ID, `{"reason":"the order never left"}`); p.StatusCode != http.StatusAccepted {
		t.Fatalf("refund: %d %s", p.StatusCode, p.Body)
	}
	rows := c.refundRows(o.ID)
	if p := c.post("/admin/gateway-requests/"+strconv.FormatInt(rows[0].ID, 10)+"/retry", nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("send now: %d", p.StatusCode)
	}
	// The answer is applied at once; the sandbox's notification comes
	// on its own.
	testenv.Eventually(t, "the refund told by the answer and by the notification", func() bool {
		return c.count("SELECT count(*) FROM payment_callbacks WHERE order_id = ? AND event_status = 'refunded' AND status = 'processed'", o.ID) == 2
	})
	if n := c.count("SELECT count(*) FROM payment_callbacks WHERE order_id = ? AND event_status = 'refunded' AND result = 'stale'", o.ID); n != 1 {
		t.Fatalf("%d stale refunded callbacks, want 1: the second telling", n)
	}

	doc := c.get("/admin/orders/" + o.ID).Doc(t)
	var told, staleBadges int
	doc.Find("tbody tr").Each(func(_ int, tr *goquery.Selection) {
		if b := tr.Find(".badge.own-refund"); b.Length() == 1 {
			told++
			if b.Text() != "told of our own refund" || b.HasClass("warn") {
				t.Errorf("the told-back callback reads %q (classes %q)", b.Text(), b.AttrOr("class", ""))
			}
		}
		if tr.Find(".badge.warn").Text() == "stale" {
			staleBadges++
		}
	})
	if told != 1 || staleBadges != 0 {
		t.Errorf("the order's callbacks: %d told of our own refund, %d orange stale; want 1 and 0", told, staleBadges)
	}
	// The callbacks list and the callback's own page read it the same.
	list := c.get("/admin/callbacks?order=" + o.ID).Doc(t)
	own := list.Find("tbody tr .badge.own-refund")
	if own.Length() != 1 || list.Find("tbody tr .badge.warn").Text() == "stale" {
		t.Errorf("the callbacks list: %d told of our own refund, stale badges %q; want 1 and none", own.Length(), list.Find("tbody tr .badge.warn").Text())
	}
	if href, ok := own.Closest("tr").Find("a.mono").First().Attr("href"); !ok {
		t.Error("the told-back row links to no callback")
	} else {
		page := c.get(href).Doc(t)
		if page.Find(".stat .badge.own-refund").Length() != 1 || !strings.Contains(page.Text(), "No status change: the gateway told of a refund Sekali asked") {
			t.Errorf("%s does not say it told of our own refund: %q", href, strings.Join(strings.Fields(page.Find("main").Text()), " "))
		}
	}
	var js struct {
		Callbacks []struct{ Event, Result string }
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin/orders/"+o.ID).Body), &js); err != nil {
		t.Fatal(err)
	}
	results := map[string]int{}
	for _, cb := range js.Callbacks {
		results[cb.Event+" "+cb.Result]++
	}
	if results["refunded stale"] != 1 || results["refunded processed"] != 1 {
		t.Errorf("the JSON's callbacks by event and result: %v; want the stale one kept", results)
	}

	// Fully refunded: a state.
	if section := doc.Find("#refunds").Parent().Text(); !strings.Contains(section, "Fully refunded: nothing left to refund.") {
		t.Errorf("the refunded order's refunds say no \"Fully refunded\": %q", strings.Join(strings.Fields(section), " "))
	}
	if strings.Contains(doc.Text(), "there is no payment to refund") {
		t.Error("the refunded order's page still says \"there is no payment to refund\"")
	}
	ask := c.get("/admin/orders/" + o.ID + "/refund?amount=1&reason=more")
	if ask.StatusCode != http.StatusSeeOther {
		t.Fatalf("asking to refund a refunded order: %d, want 303 back to it", ask.StatusCode)
	}
	flash := c.get("/admin/orders/" + o.ID).Doc(t).Find("#flash .flash")
	if flash.Text() != "Order "+o.ID+" is fully refunded: nothing left to refund." || flash.HasClass("bad") {
		t.Errorf("asking to refund a refunded order: flash %q (classes %q)", flash.Text(), flash.AttrOr("class", ""))
	}
}

// A refund the gateway answers with another amount than asked is shown as
// a conflict with both values — on the order's refunds, among the calls
// to gateways (HTML and JSON) — and changes no money: the order stays
// paid, nothing is refunded.
func TestRefundAnsweredInConflictIsShown(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	o := c.paidUSDOrder(t, "RF-CONFLICT")
	if p := c.refundAPI(o.ID, "refund-conflict-"+o.ID, `{"amount":"20.00","reason":"a cracked lid"}`); p.StatusCode != http.StatusAccepted {
		t.Fatalf("refund: %d", p.StatusCode)
	}
	id := c.refundRows(o.ID)[0].ID
	c.gateway.MisstateNext(1, -500, "") // the sandbox refunds 20.00 and answers 15.00
	// Its notification of the refund, which would count what it says,
	// is lost: what is checked here is the answer alone.
	c.gateway.Faults().LoseNotifications(true)
	if p := c.post("/admin/gateway-requests/"+strconv.FormatInt(id, 10)+"/retry", nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("send again: %d", p.StatusCode)
	}
	var order models.Order
	c.db.Take(&order, "id = ?", o.ID)
	if rows := c.refundRows(o.ID); rows[0].Phase != models.GatewayConflict || order.Status != models.OrderPaid || c.count("SELECT count(*) FROM refunds") != 0 {
		t.Fatalf("after the answer: %s, order %s; want conflict, the order paid, nothing refunded", rows[0].Phase, order.Status)
	}
	both := func(where, text string) {
		t.Helper()
		for _, v := range []string{"conflict", "asked 20.00 USD", "the gateway answered 15.00 USD"} {
			if !strings.Contains(text, v) {
				t.Errorf("%s reads %q: no %q", where, strings.Join(strings.Fields(text), " "), v)
			}
		}
	}
	both("the order's refund", c.get("/admin/orders/"+o.ID).Doc(t).Find("#refund-list tbody tr").Text())
	both("the calls in conflict", c.get("/admin/gateway-requests?phase=conflict").Doc(t).Find("tbody tr").Text())
	var list struct {
		Rows []struct {
			Phase            string `json:"phase"`
			Amount           int64  `json:"amount"`
			AnsweredAmount   *int64 `json:"answered_amount"`
			AnsweredCurrency string `json:"answered_currency"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin/gateway-requests?phase=conflict").Body), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Rows) != 1 || list.Rows[0].AnsweredAmount == nil || *list.Rows[0].AnsweredAmount != 1500 || list.Rows[0].Amount != 2000 || list.Rows[0].AnsweredCurrency != "USD" {
		t.Errorf("the API's calls in conflict: %+v; want one, asked 2000, answered 1500 USD", list.Rows)
	}
}
