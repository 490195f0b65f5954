package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// results tallies the `result` member of callback responses.
type results struct {
	mu     sync.Mutex
	counts map[string]int
	status map[int]int
}

func newResults() *results { return &results{counts: map[string]int{}, status: map[int]int{}} }

func (r *results) add(res response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[res.str("result")]++
	r.status[res.Status]++
}

func TestDuplicateStormAppliesOnce(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	body := testenv.SandboxBody(id, "tx-storm", models.EventPaid, 150000)

	got := newResults()
	concurrently(100, func(int) { got.add(a.callback(t, "evt_storm", body)) })

	if got.counts["processed"] != 1 || got.counts["duplicate"] != 99 || got.status[200] != 100 {
		t.Fatalf("results = %v, statuses = %v; want 1 processed + 99 duplicate, all 200", got.counts, got.status)
	}
	o := a.order(t, id)
	if o.Status != models.OrderPaid || len(o.Payments) != 1 || o.Payments[0].Status != models.PaymentSucceeded {
		t.Fatalf("order = %s with payments %+v; want paid with one succeeded payment", o.Status, o.Payments)
	}
	a.eventually(t, 100, "SELECT count(*) FROM callback_deliveries")
	a.eventually(t, 100, "SELECT attempts FROM payment_callbacks WHERE idempotency_key = 'evt_storm'")
	if n := a.count(t, "SELECT count(*) FROM outbox_messages WHERE task_type IN ('invoice:generate', 'email:send')"); n != 2 {
		t.Fatalf("outbox invoice+email rows = %d, want 2", n)
	}
	a.verify(t) // drains: the invoice and email jobs have run
	r := a.do(t, "GET", a.orderURL(id), nil, nil)
	if inv, _ := r.JSON["invoice"].(map[string]any); inv == nil || !strings.HasPrefix(fmt.Sprint(inv["number"]), "INV-") {
		t.Fatalf("order after the jobs ran: %s; want an invoice", r.Body)
	}
	// Finished job rows are pruned after PRUNE_AFTER; the audit judges by
	// the effects, so it stays green (and drained) without them.
	a.DB.Exec("DELETE FROM job_executions WHERE status = 'succeeded'")
	a.verify(t)
}

func TestSameEventIDWithDifferentBodyConflicts(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})

	if r := a.callback(t, "evt_c", testenv.SandboxBody(id, "tx-c", models.EventPending, 0)); r.str("result") != "processed" {
		t.Fatalf("first delivery: %d %s", r.Status, r.Body)
	}
	r := a.callback(t, "evt_c", testenv.SandboxBody(id, "tx-c", models.EventPaid, 150000))
	if r.Status != http.StatusConflict || r.str("result") != "conflict" || r.str("code") != "conflict" {
		t.Fatalf("conflicting delivery: %d %s; want 409 conflict", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	o := a.order(t, id)
	if o.Status != models.OrderPending || len(o.Payments) != 1 || o.Payments[0].Status != models.PaymentPending {
		t.Fatalf("order = %s, payments %+v; want pending with one pending payment (nothing changed)", o.Status, o.Payments)
	}
	a.eventually(t, 1, "SELECT conflict_count FROM payment_callbacks WHERE idempotency_key = 'evt_c'")
	a.eventually(t, 1, "SELECT count(*) FROM callback_deliveries WHERE outcome = 'conflict'")
	a.verify(t)
}

func TestTwoEventIDsForOnePaymentPayOnce(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 150000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	body := testenv.SandboxBody(id, "tx-same", models.EventPaid, 150000)

	if r := a.callback(t, "evt_first", body); r.str("result") != "processed" {
		t.Fatalf("first event: %d %s", r.Status, r.Body)
	}
	if r := a.callback(t, "evt_second", body); r.Status != 200 || r.str("result") != "stale" {
		t.Fatalf("second event id for the same payment: %d %s; want 200 stale", r.Status, r.Body)
	}
	if n := a.count(t, "SELECT count(*) FROM payments"); n != 1 {
		t.Fatalf("payments = %d, want 1", n)
	}
	if n := a.count(t, "SELECT count(*) FROM outbox_messages WHERE task_type = 'invoice:generate'"); n != 1 {
		t.Fatalf("invoice tasks = %d, want 1", n)
	}
	if a.stock(t, sku) != 4 {
		t.Fatalf("stock = %d, want 4", a.stock(t, sku))
	}
	a.verify(t)
}

// TestConcurrentEventsForOneOrder fires paid and failed events under
// several event ids, repeated deliveries of each and a cancel at one
// order, all at once. Whatever wins, the end state is consistent and no
// client sees a deadlock or a 5xx.
func TestConcurrentEventsForOneOrder(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	skuA, skuB := a.newProduct(t, 100000, 10), a.newProduct(t, 50000, 10)
	for round := range 5 {
		id := a.createOrder(t, map[string]int{skuA: 1, skuB: 1})
		type delivery struct {
			event string
			body  []byte
		}
		var deliveries []delivery
		for k := range 3 {
			deliveries = append(deliveries,
				delivery{fmt.Sprintf("evt_%d_paid_%d", round, k), testenv.SandboxBody(id, fmt.Sprintf("tx-%d-%d", round, k), models.EventPaid, 150000)},
				delivery{fmt.Sprintf("evt_%d_failed_%d", round, k), testenv.SandboxBody(id, fmt.Sprintf("tx-%d-f%d", round, k), models.EventFailed, 0)},
			)
		}
		var mu sync.Mutex
		var bad []string
		concurrently(len(deliveries)*4+1, func(i int) {
			if i == len(deliveries)*4 {
				r := a.do(t, "POST", a.orderAction(id, "cancel"), nil, nil)
				if r.Status != 200 && r.Status != 409 {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("cancel: %d %s", r.Status, r.Body))
					mu.Unlock()
				}
				return
			}
			d := deliveries[i%len(deliveries)]
			r := a.callback(t, d.event, d.body)
			if r.Status != 200 {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s: %d %s", d.event, r.Status, r.Body))
				mu.Unlock()
			}
		})
		if len(bad) > 0 {
			t.Fatalf("round %d: unexpected answers:\n%v", round, bad)
		}
		o := a.order(t, id)
		succeeded, refund := 0, 0
		for _, p := range o.Payments {
			switch p.Status {
			case models.PaymentSucceeded:
				succeeded++
			case models.PaymentRefundRequired:
				refund++
			}
		}
		switch o.Status {
		case models.OrderPaid:
			if succeeded != 1 {
				t.Fatalf("round %d: paid order with %d succeeded payments", round, succeeded)
			}
		case models.OrderFailed, models.OrderCancelled, models.OrderRefundRequired:
			if succeeded != 0 {
				t.Fatalf("round %d: %s order with %d succeeded payments", round, o.Status, succeeded)
			}
		default:
			t.Fatalf("round %d: order ended %s", round, o.Status)
		}
		// Every paid event was delivered: one charge pays, the others are
		// second charges to refund, and nothing is lost.
		if succeeded+refund != 3 {
			t.Fatalf("round %d: order %s has %d succeeded + %d refund_required payments, want 3 charges accounted for",
				round, o.Status, succeeded, refund)
		}
	}
	a.verify(t)
}

// TestReleaseOnceThenLatePayment: 20 concurrent deliveries of one failed
// event and a second failure event release the stock once; a late paid
// event then takes the stock back, or, when the stock is gone, leaves the
// order refund_required.
func TestReleaseOnceThenLatePayment(t *testing.T) {
	t.Parallel()
	for _, stockGone := range []bool{false, true} {
		t.Run(fmt.Sprintf("stock_gone=%v", stockGone), func(t *testing.T) {
			t.Parallel()
			a := startApp(t, nil)
			sku := a.newProduct(t, 60000, 3)
			id := a.createOrder(t, map[string]int{sku: 2})
			if a.stock(t, sku) != 1 {
				t.Fatalf("stock after order = %d, want 1", a.stock(t, sku))
			}

			failed := testenv.SandboxBody(id, "tx-late", models.EventFailed, 0)
			got := newResults()
			concurrently(20, func(int) { got.add(a.callback(t, "evt_failed", failed)) })
			if got.counts["processed"] != 1 || got.counts["duplicate"] != 19 {
				t.Fatalf("failed deliveries = %v, want 1 processed + 19 duplicate", got.counts)
			}
			if r := a.callback(t, "evt_failed_again", testenv.SandboxBody(id, "tx-other", models.EventFailed, 0)); r.str("result") != "stale" {
				t.Fatalf("second failure event: %d %s; want stale", r.Status, r.Body)
			}
			if a.stock(t, sku) != 3 {
				t.Fatalf("stock after release = %d, want 3", a.stock(t, sku))
			}
			if n := a.count(t, "SELECT count(*) FROM stock_movements WHERE order_id = ? AND kind = 'release'", id); n != 1 {
				t.Fatalf("release movements = %d, want 1", n)
			}

			if stockGone {
				a.createOrder(t, map[string]int{sku: 2}) // someone else buys it meanwhile
			}
			r := a.callback(t, "evt_late_paid", testenv.SandboxBody(id, "tx-late", models.EventPaid, 120000))
			if r.Status != 200 || r.str("result") != "processed" {
				t.Fatalf("late paid: %d %s", r.Status, r.Body)
			}
			o := a.order(t, id)
			wantOrder, wantPayment, wantStock := models.OrderPaid, models.PaymentSucceeded, int64(1)
			if stockGone {
				wantOrder, wantPayment, wantStock = models.OrderRefundRequired, models.PaymentRefundRequired, 1
			}
			if o.Status != wantOrder || len(o.Payments) != 1 || o.Payments[0].Status != wantPayment {
				t.Fatalf("after late paid: order %s, payments %+v; want %s with one %s payment", o.Status, o.Payments, wantOrder, wantPayment)
			}
			if a.stock(t, sku) != wantStock {
				t.Fatalf("stock = %d, want %d", a.stock(t, sku), wantStock)
			}
			a.verify(t)
		})
	}
}
