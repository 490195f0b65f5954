package web_test

import (
	"strings"
	"testing"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/testenv"
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
	c := newConsole(t, func(cfg *config.Config) { cfg.PaymentGateway = "xendit" })
	doc := c.get("/").Doc(t)
	if got := doc.Find(".topbar .who").Text(); !strings.Contains(got, "payments go to the xendit gateway") {
		t.Errorf("the shop's bar says %q, want the xendit gateway", got)
	}
	if strings.Contains(doc.Text(), "sandbox") {
		t.Errorf("the shop with PAYMENT_GATEWAY=xendit still names the sandbox:\n%s", doc.Text())
	}
}
