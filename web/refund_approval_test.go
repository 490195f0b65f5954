package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/models"
)

// askInConsole asks for a refund of amount through the order page's
// form and its confirmation page.
func (c *console) askInConsole(orderID, amount, reason string) {
	c.t.Helper()
	base := "/admin/orders/" + orderID + "/refund"
	form := c.get(base + "?" + url.Values{"amount": {amount}, "reason": {reason}}.Encode()).Doc(c.t).Find(`form[method="post"]`)
	if p := c.post(base, hiddenFields(form)); p.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("refund %s of %s: %d\n%s", amount, orderID, p.StatusCode, p.Body)
	}
}

// A refund above REFUND_APPROVAL_ABOVE waits: the API's answer is 202
// awaiting_approval and nothing is queued; the owner who asked cannot
// approve it, an operator gets 403 and sees no buttons, the API token
// cannot approve at all; another owner approves it once (its job is
// written then), and the page, the story and the order's JSON say who
// asked and who approved.
func TestRefundApprovedByASecondOwner(t *testing.T) {
	t.Parallel()
	c := newConsole(t, func(cfg *config.Config) { cfg.RefundApprovalAbove = map[string]int64{"USD": 1000} }) // above 10.00 USD
	c.login()
	o := c.paidUSDOrder(t, "RF-APPROVE") // 50.00 USD

	confirm := func(amount string) string {
		return c.get("/admin/orders/" + o.ID + "/refund?" + url.Values{"amount": {amount}, "reason": {"x"}}.Encode()).Doc(t).Find(".card .flash.warn").Text()
	}
	if at, above := confirm("10"), confirm("10.01"); at != "" || !strings.Contains(above, "until another owner approves it") {
		t.Errorf("the confirm page's warning: %q at the threshold, %q above it; want none, then one", at, above)
	}
	// At the threshold: sent as before.
	c.askInConsole(o.ID, "10", "a scratch")
	// What the order asked counts: a cent more now takes it above.
	if more := confirm("0.01"); !strings.Contains(more, "until another owner approves it") {
		t.Errorf("the confirm page's warning for 0.01 after 10 asked: %q; want one", more)
	}
	// Above it, asked by the API token and by the owner in the console.
	p := c.refundAPI(o.ID, "approval-key-0000001", `{"amount":"25","reason":"never arrived"}`)
	var fromAPI refundRecord
	if err := json.Unmarshal([]byte(p.Body), &fromAPI); err != nil || p.StatusCode != http.StatusAccepted || fromAPI.Phase != "awaiting_approval" {
		t.Fatalf("the API's refund above the threshold: %d %s; want 202 awaiting_approval", p.StatusCode, p.Body)
	}
	c.askInConsole(o.ID, "10.01", "the box was crushed")
	if f := c.get("/admin/orders/" + o.ID).Doc(t).Find(".flash").Text(); !strings.Contains(f, "awaits approval") {
		t.Errorf("the flash after a refund above the threshold: %q", f)
	}
	rows := c.refundRows(o.ID)
	if len(rows) != 3 || rows[0].Phase != models.GatewayPlanned || rows[1].Phase != models.GatewayAwaitingApproval ||
		rows[2].Phase != models.GatewayAwaitingApproval || rows[2].RequestedBy != adminEmail || c.refundJobs() != 1 {
		t.Fatalf("refunds %+v, %d jobs; want one planned with its job, two awaiting approval with none", rows, c.refundJobs())
	}
	// What the waiting refunds ask is held back: 50 - 10 - 25 - 10.01.
	var left struct {
		RefundLeft int64 `json:"refund_left"`
	}
	if err := json.Unmarshal([]byte(c.api("/api/admin/orders/"+o.ID).Body), &left); err != nil || left.RefundLeft != 5000-1000-2500-1001 {
		t.Errorf("refund_left %d (%v), want %d", left.RefundLeft, err, 5000-1000-2500-1001)
	}
	fromAPIPath := "/admin/gateway-requests/" + strconv.FormatInt(fromAPI.ID, 10)
	ownPath := "/admin/gateway-requests/" + strconv.FormatInt(rows[2].ID, 10)

	// The API token cannot approve: there is no such route.
	if p := c.do(http.DefaultClient, "POST", "/api"+fromAPIPath+"/approve", nil,
		http.Header{"Authorization": {"Bearer " + apiToken}, "Accept": {"application/json"}}); p.StatusCode < 400 {
		t.Errorf("approve through the admin API: %d, want refused", p.StatusCode)
	}
	// Who asked cannot approve their own; they see Decline only.
	if p := c.post(ownPath+"/approve", nil); p.StatusCode != http.StatusForbidden || !strings.Contains(p.Body, "another owner must approve it") {
		t.Errorf("approving one's own refund: %d, want 403 saying another owner must approve it\n%s", p.StatusCode, p.Body)
	}
	doc := c.get("/admin/orders/" + o.ID).Doc(t)
	if doc.Find(`form[action="`+ownPath+`/approve"]`).Length() != 0 || doc.Find(`form[action="`+ownPath+`/decline"]`).Length() != 1 ||
		doc.Find(`form[action="`+fromAPIPath+`/approve"]`).Length() != 1 {
		t.Errorf("the requester's buttons: want Approve on the API's refund only, Decline on both")
	}
	if text := doc.Find("#refund-list").Text(); !strings.Contains(text, "awaiting approval — asked by api") {
		t.Errorf("the refunds table does not say who asked: %q", text)
	}

	// An operator may not approve, and sees no buttons.
	operator := c.loginAs("operator@example.com", models.RoleOperator)
	if p := operator.post(fromAPIPath+"/approve", nil); p.StatusCode != http.StatusForbidden {
		t.Errorf("an operator's approval: %d, want 403", p.StatusCode)
	}
	if n := operator.get("/admin/orders/" + o.ID).Doc(t).Find(`form[action$="/approve"], form[action$="/decline"]`).Length(); n != 0 {
		t.Errorf("an operator sees %d approve/decline buttons, want none", n)
	}
	if r := c.refundRows(o.ID); r[1].Phase != models.GatewayAwaitingApproval || r[2].Phase != models.GatewayAwaitingApproval || c.refundJobs() != 1 {
		t.Fatalf("after refused approvals: %s, %s, %d jobs; want both still waiting", r[1].Phase, r[2].Phase, c.refundJobs())
	}

	// Another owner approves one and declines the other.
	owner2 := c.loginAs("owner2@example.com", models.RoleOwner)
	if p := owner2.post(fromAPIPath+"/approve", nil); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/orders/"+o.ID+"#refunds" {
		t.Fatalf("the second owner's approval: %d to %q\n%s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
	if p := owner2.post(fromAPIPath+"/approve", nil); p.StatusCode != http.StatusConflict {
		t.Errorf("approving again: %d, want 409", p.StatusCode)
	}
	if p := owner2.post(ownPath+"/decline", nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("the second owner's decline: %d\n%s", p.StatusCode, p.Body)
	}
	r := c.refundRows(o.ID)
	if r[1].Phase != models.GatewayPlanned || r[1].ApprovedBy != "owner2@example.com" || r[1].ApprovedAt == nil ||
		r[2].Phase != models.GatewayDeclined || r[2].DeclinedBy != "owner2@example.com" || c.refundJobs() != 2 {
		t.Fatalf("after: %+v, %d jobs; want the API's approved by owner2 with its job, the owner's declined", r, c.refundJobs())
	}
	if n := c.count("SELECT count(*) FROM admin_actions WHERE admin_email = 'owner2@example.com' AND action IN ('approve refund', 'decline refund') AND result = 'ok'"); n != 2 {
		t.Errorf("%d answers of owner2 in the action log, want 2", n)
	}

	page := owner2.get("/admin/orders/" + o.ID).Doc(t)
	if text := page.Find("#refund-list").Text(); !strings.Contains(text, "approved by owner2@example.com") || !strings.Contains(text, "declined by owner2@example.com") {
		t.Errorf("the refunds table after: %q", text)
	}
	if text := page.Find(".timeline").Text(); !strings.Contains(text, "approved by owner2@example.com") || !strings.Contains(text, "asked by api") {
		t.Errorf("the story does not say who asked and who approved: %q", text)
	}
	var v struct{ Refunds []refundRecord }
	if err := json.Unmarshal([]byte(c.api("/api/admin/orders/"+o.ID).Body), &v); err != nil || len(v.Refunds) != 3 {
		t.Fatalf("the order's JSON: %v, %d refunds", err, len(v.Refunds))
	}
	if a := v.Refunds[1]; a.Phase != "planned" || a.RequestedBy != "api" || a.ApprovedBy != "owner2@example.com" || a.ApprovedAt == nil || v.Refunds[2].DeclinedBy != "owner2@example.com" {
		t.Errorf("the order's JSON refunds: %+v", v.Refunds)
	}
}
