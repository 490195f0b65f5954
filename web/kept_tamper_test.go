package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// A kept delivery changed in the database — its body made to pay the
// order, its event id made new so that no recorded event stands in the
// way — is neither applied again nor dry-run: 409, saying its kept body
// no longer matches the fingerprint written with it, and the order stays
// unpaid.
func TestApplyAgainRefusesAKeptBodyChangedSince(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "TAMPER", 50000, 10)
	o := c.newOrder("TAMPER", 1)
	if got := c.deliver("evt_tamper", testenv.SandboxBody(o.ID, "tx-tamper", models.EventPaid, 40000)); got != http.StatusUnprocessableEntity {
		t.Fatalf("the mismatched delivery: %d, want 422", got)
	}
	var id int64
	testenv.Eventually(t, "the rejected delivery's row", func() bool {
		c.db.Raw("SELECT id FROM callback_deliveries WHERE outcome = 'rejected' AND body IS NOT NULL").Scan(&id)
		return id > 0
	})
	forged := testenv.SandboxBody(o.ID, "tx-tamper", models.EventPaid, o.TotalAmount)
	if err := c.db.Exec(`UPDATE callback_deliveries SET body = ?, headers = jsonb_set(headers, '{Webhook-Id}', '["evt_tamper_2"]') WHERE id = ?`,
		forged, id).Error; err != nil {
		t.Fatal(err)
	}
	deliveryURL := fmt.Sprintf("/admin/deliveries/%d", id)
	if p := c.post(deliveryURL+"/apply", url.Values{"reason": {"retry"}}); p.StatusCode != http.StatusConflict || !strings.Contains(p.Body, "does not match") {
		t.Errorf("apply again of a changed body: %d, want 409 saying it does not match", p.StatusCode)
	}
	if p := c.api("/api" + deliveryURL + "/dry-run"); p.StatusCode != http.StatusConflict {
		t.Errorf("dry run of a changed body: %d, want 409", p.StatusCode)
	}
	var status string
	var paid int64
	c.db.Raw("SELECT status FROM orders WHERE id = ?", o.ID).Scan(&status)
	c.db.Raw("SELECT count(*) FROM payments WHERE order_id = ?", o.ID).Scan(&paid)
	if status != string(models.OrderPending) || paid != 0 {
		t.Errorf("after applying a changed body: order %s, %d payments; want pending, none", status, paid)
	}
}
