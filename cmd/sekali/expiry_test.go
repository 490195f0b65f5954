package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestPaymentRacesExpiry: 100 orders whose paid callback arrives around
// the moment their order:expire job runs. Whichever wins, no order ends
// expired with a succeeded payment: it is paid directly, or expired and
// then re-reserved by the late payment (or refund_required if the stock
// had gone), and the stock adds up.
func TestPaymentRacesExpiry(t *testing.T) {
	t.Parallel()
	const n = 100
	a := startApp(t, map[string]string{"ORDER_TTL": "3s"})
	sku := a.newProduct(t, 20000, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = a.createOrder(t, map[string]int{sku: 1})
	}
	var expiresAt time.Time
	a.DB.Raw("SELECT max(expires_at) FROM orders").Scan(&expiresAt)

	// The expiry jobs run once their outbox rows are due and relayed;
	// spread the payments over the second around that moment so that some
	// land before the expiry and some after.
	var mu sync.Mutex
	var bad []string
	concurrently(n, func(i int) {
		time.Sleep(time.Until(expiresAt.Add(time.Duration(i%20)*75*time.Millisecond - 250*time.Millisecond))) // scheduling the race, not waiting for a result
		r := a.callback(t, "evt_race_"+ids[i], testenv.SandboxBody(ids[i], "tx-race-"+ids[i], models.EventPaid, 20000))
		if r.Status != 200 || r.str("result") != "processed" {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s: %d %s", ids[i], r.Status, r.Body))
			mu.Unlock()
		}
	})
	if len(bad) > 0 {
		t.Fatalf("paid callbacks answered:\n%v", bad)
	}
	a.eventually(t, n, "SELECT count(*) FROM job_executions WHERE idempotency_key LIKE 'order:expire:%' AND status = 'succeeded'")

	var ended []struct {
		Status    models.OrderStatus
		Succeeded int
	}
	a.DB.Raw(`SELECT o.status, count(p.id) FILTER (WHERE p.status = 'succeeded') AS succeeded
	          FROM orders o LEFT JOIN payments p ON p.order_id = o.id GROUP BY o.id, o.status`).Scan(&ended)
	for _, e := range ended {
		switch {
		case e.Status == models.OrderPaid && e.Succeeded == 1:
		case e.Status == models.OrderRefundRequired && e.Succeeded == 0:
		default:
			t.Fatalf("an order ended %s with %d succeeded payments", e.Status, e.Succeeded)
		}
	}
	rereserved := a.count(t, "SELECT count(*) FROM stock_movements WHERE kind = 'rereserve'")
	t.Logf("%d orders paid before their expiry, %d expired and re-reserved by the payment", int64(n)-rereserved, rereserved)
	a.verify(t)
}
