package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestRefundsThroughEachGateway: an order paid on the sandbox's pay page
// in a gateway's format is refunded in half through the admin API; the
// refund job asks that gateway's API (the sandbox gateway's emulation
// of it, as serve wires each refunder from the gateway's settings), and
// the gateway's refund notifications find the refund its answer recorded: one refunds row, the order
// partially refunded, and the audit clean.
func TestRefundsThroughEachGateway(t *testing.T) {
	t.Parallel()
	for _, e := range gateways.All {
		gw := e.Name
		t.Run(gw, func(t *testing.T) {
			t.Parallel()
			_, env := gatewayEnv(t, gw)
			env["ADMIN_API_TOKEN"] = "refunds-admin-token-0123456789"
			a := startApp(t, env)
			id := a.createOrder(t, map[string]int{a.newProduct(t, 75000, 5): 2})
			token, _ := a.tokens.Load(id)
			form := url.Values{"t": {token.(string)}, "outcome": {"paid"}, "copies": {"1"}, "mode": {"sequential"}, "provider": {gw}}
			if r := a.do(t, "POST", "/sandbox/pay/"+id, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
				[]byte(form.Encode())); r.Status != http.StatusOK { // the client followed the 303 back to the page
				t.Fatalf("pay: %d %.300s", r.Status, r.Body)
			}
			testenv.Eventually(t, "the order paid", func() bool { return a.order(t, id).Status == models.OrderPaid })

			r := a.do(t, "POST", "/api/admin/orders/"+id+"/refunds", http.Header{
				"Authorization": {"Bearer " + env["ADMIN_API_TOKEN"]}, "Idempotency-Key": {randomKey()}, "Content-Type": {"application/json"},
			}, []byte(`{"amount":"75000","reason":"one of two cups arrived broken"}`))
			if r.Status != http.StatusAccepted {
				t.Fatalf("refund: %d %s", r.Status, r.Body)
			}
			a.eventually(t, 1, "SELECT count(*) FROM gateway_requests WHERE order_id = ? AND kind = 'refund' AND phase = 'done'", id)
			// The gateway's notifications of the refund, each read and
			// found to change nothing more than its answer did (or, first,
			// to record the refund itself): as many as it sends.
			told := int64(e.RefundNotices)
			a.eventually(t, told, `SELECT count(*) FROM payment_callbacks WHERE order_id = ? AND event_status = 'refunded'
				AND idempotency_key NOT LIKE 'refund:%' AND result IN ('processed', 'stale')`, id)
			o := a.order(t, id)
			if n := a.count(t, "SELECT count(*) FROM refunds WHERE order_id = ?", id); o.Status != models.OrderPartiallyRefunded ||
				len(o.Payments) != 1 || o.Payments[0].RefundedAmount != 75000 || n != 1 {
				t.Errorf("order %s, payments %+v, %d refunds; want partially_refunded by one refund of 75000", o.Status, o.Payments, n)
			}
			if gw != "sandbox" && !strings.HasPrefix(o.Payments[0].ProviderReference, "sbx-tx-") {
				t.Errorf("payment %+v, want the pay page's transaction", o.Payments[0])
			}
			a.verify(t)
		})
	}
}
