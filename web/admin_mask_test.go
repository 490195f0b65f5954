package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// secretAddresses are addresses the shop once took (201) that a viewer
// then saw whole or in part; each names its secret parts.
var secretAddresses = []struct {
	addr    string
	secrets []string
}{
	{"zqsecret.user@exämple.com", []string{"zqsecret", "xämple", `x\u00e4mple`}},
	{"zqsecret.ip@[127.0.0.1]", []string{"zqsecret", "[127.0.0.1]"}},
	{"zqsecret{zqcurly}@example.com", []string{"zqsecret", "zqcurly"}},
	{"zqsecret.tld@localhost", []string{"zqsecret", "@localhost"}},
	{"zqsecret!zqhash#tag@example.com", []string{"zqsecret", "zqhash"}},
	{"zqsecret/zqslash@example.com", []string{"zqsecret", "zqslash"}},
	{"josé.x@example.com", []string{"josé", `jos\u00e9`, "jos%C3%A9"}},
	{"zqsecret&amp@example.com", []string{"zqsecret"}},
}

// The shop refuses each of those addresses with a 422 that states the
// rule; one of the stated form it takes.
func TestShopTakesOnlyAddressesOfTheRule(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "RULE", 150000, 10)
	post := func(addr string) page {
		body, _ := json.Marshal(map[string]any{"customer_email": addr, "items": []map[string]any{{"sku": "RULE", "qty": 1}}})
		return c.do(http.DefaultClient, "POST", "/api/orders", bytesReader(body), http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json"}, "Idempotency-Key": {newKey()}})
	}
	for _, a := range secretAddresses {
		p := post(a.addr)
		if p.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(p.Body, "name@example.com") {
			t.Errorf("order for %q: %d %s; want 422 stating the rule", a.addr, p.StatusCode, p.Body)
		}
	}
	if p := post("secret.user+tag@shop.example.co.id"); p.StatusCode != http.StatusCreated {
		t.Errorf("an address of the rule: %d %s", p.StatusCode, p.Body)
	}
}

// A viewer sees no secret part of any customer's address — one of the
// rule's form, or any address stored before the rule — on the orders
// list, the order's page, the callback's page or the delivery's page,
// as HTML or JSON, in the kept delivery body too; and every JSON answer
// is valid JSON, the address with & included.
func TestViewerMaskHoldsForEveryAddress(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	testenv.MustCreateProduct(t, c.db, "MASK", 150000, 100)
	addresses := append([]struct {
		addr    string
		secrets []string
	}{{"zqsecret.user+tag@shop.example.co.id", []string{"zqsecret", "shop.example"}}}, secretAddresses...)
	var paths []string
	for i, a := range addresses {
		o := c.newOrder("MASK", 1)
		// Addresses stored before the rule: written as they were taken.
		if err := c.db.Exec("UPDATE orders SET customer_email = ? WHERE id = ?", a.addr, o.ID).Error; err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"order_id": o.ID, "transaction_id": fmt.Sprintf("tx-mask-%d", i),
			"payment_status": models.EventPaid, "paid_amount": o.TotalAmount, "currency": "IDR", "payer_email": a.addr})
		event := fmt.Sprintf("evt_mask_%d", i)
		if got := c.deliver(event, body); got != http.StatusOK {
			t.Fatalf("delivery for %q: %d", a.addr, got)
		}
		var cb, d int64
		c.db.Raw("SELECT id FROM payment_callbacks WHERE idempotency_key = ?", event).Scan(&cb)
		c.db.Raw("SELECT id FROM callback_deliveries WHERE callback_id = ?", cb).Scan(&d)
		paths = append(paths, "/admin/orders/"+o.ID, fmt.Sprintf("/admin/callbacks/%d", cb), fmt.Sprintf("/admin/deliveries/%d", d))
	}
	paths = append(paths, "/admin/orders", "/admin/callbacks", "/admin/deliveries")
	c.login()
	owner := c.get(paths[2])
	if !strings.Contains(owner.Body, "payer_email") || !strings.Contains(owner.Body, "zqsecret.user+tag@shop.example.co.id") {
		t.Fatalf("the owner's delivery page does not show the kept body whole:\n%s", owner.Body)
	}
	viewer := c.addAdmin("viewer@example.com", models.RoleViewer)
	for _, path := range paths {
		for _, accept := range []string{"text/html", "application/json"} {
			p := c.do(viewer, "GET", path, nil, http.Header{"Accept": {accept}})
			if p.StatusCode != http.StatusOK {
				t.Fatalf("viewer GET %s (%s): %d", path, accept, p.StatusCode)
			}
			if accept == "application/json" && !json.Valid([]byte(p.Body)) {
				t.Errorf("viewer GET %s: not valid JSON:\n%s", path, p.Body)
			}
			for _, a := range addresses {
				for _, s := range a.secrets {
					if strings.Contains(strings.ToLower(p.Body), strings.ToLower(s)) {
						t.Errorf("viewer GET %s (%s) shows %q of %q", path, accept, s, a.addr)
					}
				}
			}
		}
	}
	if p := c.do(viewer, "GET", "/admin/orders", nil, nil); !strings.Contains(p.Body, "z***@s***.id") || !strings.Contains(p.Body, "j***@e***.com") {
		t.Errorf("the viewer's orders list does not show the masked forms")
	}
}
