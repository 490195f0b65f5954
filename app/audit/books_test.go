package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// TestBooks drives the real application — orders over HTTP, signed
// notifications in every gateway's format, refunds through the admin
// API and the console, jobs through the guard — through random
// sequences of money operations over several orders, and after every
// step compares the rows with the reference model (books_model_test.go)
// and asks the audit, which must be green exactly when the model's books
// hold. A failing sequence is shrunk to a shortest one and printed with
// its seed (-rapid.seed=N reproduces it); RAPID_CHECKS and RAPID_STEPS
// make the run longer (make chaos).
func TestBooks(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	var steps, orders int
	rapid.Check(t, func(rt *rapid.T) {
		b := newBooks(rt, a)
		rt.Repeat(b.actions())
		steps, orders = steps+b.steps, orders+len(b.m.ids)
	})
	t.Logf("%d steps that changed or asked something, over %d orders", steps, orders)
}

// books is one run of the model against the application.
type books struct {
	t      tb
	a      *app
	m      *model
	n      int               // numbers ids made up in this run
	steps  int               // the steps checked
	tokens map[string]string // the orders' access tokens
	facts  map[string][]told // each order's notifications sent, to send again
	// rejected are the deliveries refused for a business reason, with
	// what Sekali read in them: an operator may apply one again.
	rejected []rejectedDelivery
	// refusals are the paid events rejected for their amount, of every
	// gateway: an owner may correct their order's total to it.
	refusals []event
	// latest is each charge's latest payment news told (not a refund's
	// or a dispute's), by provider + " " + reference: what a gateway's
	// status API answers of it.
	latest map[string]payments.Fact
	failed map[int64]bool // the refunds whose job's last run failed
}

func newBooks(t tb, a *app) *books {
	a.reset(t)
	b := &books{t: t, a: a, m: newModel(approvalAbove), tokens: map[string]string{}, facts: map[string][]told{}, failed: map[int64]bool{}, latest: map[string]payments.Fact{}}
	// Two products: plenty of one, and one of the other, which a late
	// payment may find gone.
	for sku, stock := range map[string]int64{"MUG": 100, "LAST": 1} {
		r := a.api(t, "POST", "/api/products", "", map[string]any{"sku": sku, "name": sku, "price": price, "currency": "IDR", "stock": stock})
		if r.status != 201 {
			t.Fatalf("product %s: %d %s", sku, r.status, r.body)
		}
		b.m.stock[sku] = stock
	}
	return b
}

// price is every order's total: one unit of either product.
const price = 100000

// maxOrders bounds the orders of one run.
const maxOrders = 6

// actions are the operations a run draws from, with the comparison
// after each ("").
func (b *books) actions() map[string]func(*rapid.T) {
	order := func(t *rapid.T) *mOrder {
		if len(b.m.ids) == 0 {
			t.Skip("no order yet")
		}
		return b.m.orders[rapid.SampledFrom(b.m.ids).Draw(t, "order")]
	}
	request := func(t *rapid.T, phases ...models.GatewayPhase) *mRequest {
		var rs []*mRequest
		for _, r := range b.m.requests {
			if len(phases) == 0 || slices.Contains(phases, r.phase) {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			t.Skip("no such refund")
		}
		return rapid.SampledFrom(rs).Draw(t, "refund")
	}
	amount := func(t *rapid.T) int64 {
		return rapid.SampledFrom([]int64{0, 10000, 25000, 50000, 70000, price, price + 1}).Draw(t, "amount")
	}
	return map[string]func(*rapid.T){
		"": func(t *rapid.T) {
			b.check()
			b.steps++
		},
		"create": func(t *rapid.T) {
			if len(b.m.ids) >= maxOrders {
				t.Skip("enough orders")
			}
			b.create(rapid.SampledFrom(b.a.providers()).Draw(t, "gateway"), rapid.SampledFrom([]string{"MUG", "LAST"}).Draw(t, "sku"))
		},
		"create and pay": func(t *rapid.T) {
			if len(b.m.ids) >= maxOrders {
				t.Skip("enough orders")
			}
			if id := b.create(rapid.SampledFrom(b.a.providers()).Draw(t, "gateway"), "MUG"); id != "" {
				o := b.m.orders[id]
				b.pay(o, "tx_"+o.id+"_"+b.next(), price)
			}
		},
		"refund and send it": func(t *rapid.T) {
			b.ask(order(t), amount(t))
			b.runJobs("")
		},
		"pay": func(t *rapid.T) {
			o := order(t)
			b.pay(o, b.chargeRef(t, o), rapid.SampledFrom([]int64{price, price, price - 1}).Draw(t, "paid"))
		},
		"attempt": func(t *rapid.T) {
			o := order(t)
			b.attempt(o, b.chargeRef(t, o), rapid.SampledFrom([]models.PaymentEvent{models.EventDeclined, models.EventFailed,
				models.EventExpired, models.EventPending}).Draw(t, "status"))
		},
		"send again": func(t *rapid.T) {
			o := order(t)
			if len(b.facts[o.id]) == 0 {
				t.Skip("nothing sent")
			}
			b.resend(rapid.SampledFrom(b.facts[o.id]).Draw(t, "notification"))
		},
		"cancel":                   func(t *rapid.T) { b.cancel(order(t)) },
		"expire":                   func(t *rapid.T) { b.expire(order(t)) },
		"refund":                   func(t *rapid.T) { b.ask(order(t), amount(t)) },
		"refund all twice at once": func(t *rapid.T) { b.askTwiceAtOnce(order(t)) },
		"approve":                  func(t *rapid.T) { b.approve(request(t)) },
		"decline":                  func(t *rapid.T) { b.decline(request(t)) },
		"run jobs": func(t *rapid.T) {
			b.runJobs(rapid.SampledFrom([]string{"", "", "", "fail next call", "fail refunds later"}).Draw(t, "fault"))
		},
		"deliver the gateways' news": func(t *rapid.T) {
			b.deliverWorld(rapid.Bool().Draw(t, "newest first"), rapid.Bool().Draw(t, "twice"))
		},
		"dashboard refund": func(t *rapid.T) {
			o := order(t)
			b.dashboardRefund(o, b.takenCharge(t, o), amount(t))
		},
		"refund fails at the gateway": func(t *rapid.T) {
			o := order(t)
			c := b.takenCharge(t, o)
			if len(c.refunds) == 0 {
				t.Skip("no refund")
			}
			b.refundFails(o, c, rapid.SampledFrom(c.refunds).Draw(t, "failed refund"))
		},
		"refund news of another charge's refund": func(t *rapid.T) {
			o := order(t)
			c := b.takenCharge(t, o)
			// Another charge's refund, by the gateway's id of it or by
			// the key Sekali asked for it under.
			var others []mRefund
			for _, other := range b.m.charges {
				if other != c && other.provider == c.provider {
					for _, r := range other.refunds {
						others = append(others, *r)
					}
				}
			}
			for _, r := range b.m.requests {
				if r.charge != c && r.charge.provider == c.provider {
					others = append(others, mRefund{key: r.key, amount: r.amount})
				}
			}
			if len(others) == 0 {
				t.Skip("no refund of another charge")
			}
			b.forgedRefundNews(o, c, rapid.SampledFrom(others).Draw(t, "another's refund"),
				rapid.SampledFrom([]models.RefundStatus{models.RefundFailed, models.RefundSucceeded}).Draw(t, "state"))
		},
		"dispute": func(t *rapid.T) {
			o := order(t)
			b.dispute(o, b.takenCharge(t, o), rapid.SampledFrom([]models.PaymentEvent{models.EventDisputed, models.EventDisputeWon,
				models.EventDisputeLost}).Draw(t, "dispute"))
		},
		"discard a failed refund job": func(t *rapid.T) {
			r := request(t, models.GatewaySent)
			if !b.failed[r.id] {
				t.Skip("its job did not fail")
			}
			b.discard(r)
		},
		"send a refund again now": func(t *rapid.T) { b.sendAgain(request(t)) },
		"tamper with the books": func(t *rapid.T) {
			b.tamper(rapid.SampledFrom(tampers).Draw(t, "tamper"))
		},
		"correct a total": func(t *rapid.T) {
			// Mostly the total of an order a payment was refused for, to
			// what it paid; else any order, to any amount, or no reason.
			var standing []event
			for _, e := range b.refusals {
				if cb := b.m.keys[e.provider+" "+e.key]; cb.rejected && cb.reason == models.ReasonAmountMismatch {
					standing = append(standing, e)
				}
			}
			var o *mOrder
			var total int64
			if len(standing) > 0 && rapid.IntRange(0, 4).Draw(t, "aimed") > 0 {
				e := rapid.SampledFrom(standing).Draw(t, "refused payment")
				o, total = b.m.orders[e.order], e.amount
			} else {
				o = order(t)
				total = rapid.SampledFrom([]int64{price - 1, price, price - 1, 0, -5, maxTotal + 1}).Draw(t, "total")
			}
			reason := "the price was wrong that day"
			if rapid.IntRange(0, 5).Draw(t, "reason") == 0 {
				reason = " "
			}
			b.correct(o, total, reason)
		},
		"pay the wrong amount": func(t *rapid.T) {
			// A payment of an unpaid order that its total refuses: what a
			// correction is for.
			var unpaid []string
			for _, id := range b.m.ids {
				if s := b.m.orders[id].status; s == models.OrderPending || s == models.OrderFailed || s == models.OrderExpired || s == models.OrderCancelled {
					unpaid = append(unpaid, id)
				}
			}
			if len(unpaid) == 0 {
				t.Skip("no unpaid order")
			}
			o := b.m.orders[rapid.SampledFrom(unpaid).Draw(t, "order")]
			paid := int64(price - 1)
			if o.total == paid {
				paid = price
			}
			b.pay(o, b.chargeRef(t, o), paid)
		},
		"apply a rejected delivery again": func(t *rapid.T) {
			if len(b.rejected) == 0 {
				t.Skip("nothing rejected")
			}
			d := rapid.SampledFrom(b.rejected).Draw(t, "delivery")
			// A gateway that confirms a payment with its API answers with
			// the charge's latest news, which the model does not follow.
			_, confirms := b.a.parsers[d.e.provider].(payments.Confirmer)
			if latest := b.latest[d.e.provider+" "+d.e.ref]; confirms && d.e.status == models.EventPaid &&
				(latest.Status != models.EventPaid || latest.Amount != d.e.amount) {
				t.Skip("its gateway was told other news of the charge since")
			}
			b.applyAgain(d)
		},
	}
}

// next is a fresh number for an id, unique in the test binary: the
// payments service remembers recent event ids across runs. Safe to call
// at once (two admins asking together).
func (b *books) next() string {
	return strconv.FormatInt(ids.Add(1), 10)
}

var ids atomic.Int64

// chargeRef is a reference for a payment of o: a new one, or one of its
// charges again.
func (b *books) chargeRef(t *rapid.T, o *mOrder) string {
	if len(o.charges) > 0 && rapid.Bool().Draw(t, "a charge told before") {
		return rapid.SampledFrom(o.charges).Draw(t, "charge").ref
	}
	return "tx_" + o.id + "_" + b.next()
}

// takenCharge is one of o's charges that took money.
func (b *books) takenCharge(t *rapid.T, o *mOrder) *mCharge {
	var cs []*mCharge
	for _, c := range o.charges {
		if taken(c.status) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		t.Skip("no charge taken")
	}
	return rapid.SampledFrom(cs).Draw(t, "charge")
}

// create makes an order of one unit of sku, paid through gateway, and
// returns its id ("" when it is out of stock).
func (b *books) create(gateway, sku string) string {
	b.t.Helper()
	n := b.next()
	r := b.a.do(b.t, "POST", "/api/orders", map[string][]string{"Content-Type": {"application/json"}, "Idempotency-Key": {"books-create-key-" + n + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}},
		fmt.Appendf(nil, `{"customer_email":"buyer%s@example.com","items":[{"sku":%q,"qty":1}]}`, n, sku))
	var o struct {
		ID          string `json:"id"`
		AccessToken string `json:"access_token"`
	}
	json.Unmarshal(r.body, &o)
	if r.status == 201 && !b.m.create(o.ID, sku, gateway, price) || r.status == 409 && b.m.stock[sku] > 0 || r.status != 201 && r.status != 409 {
		b.t.Fatalf("create an order of %s: %d %s; the model has %d in stock", sku, r.status, r.body, b.m.stock[sku])
	}
	if r.status == 201 {
		b.tokens[o.ID] = o.AccessToken
	}
	b.t.Logf("order %s of %s through %s: %d", o.ID, sku, gateway, r.status)
	return o.ID
}

// rejectedDelivery is a delivery refused for a business reason.
type rejectedDelivery struct {
	id int64
	e  event
}

// applyAgain is an operator applying a rejected delivery again through
// the admin API: it is judged again, as the gateway's next delivery of
// it would be.
func (b *books) applyAgain(d rejectedDelivery) {
	b.t.Helper()
	r := b.a.api(b.t, "POST", "/api/admin/deliveries/"+strconv.FormatInt(d.id, 10)+"/apply", "", map[string]string{"reason": "the order was fixed"})
	want := b.m.deliver(d.e)
	result, reason := r.result()
	b.t.Logf("apply delivery %d (%s %s of %s) again: %d %s %s", d.id, d.e.provider, d.e.status, d.e.ref, r.status, result, reason)
	if r.status != want.status || result != want.result || reason != want.reason {
		b.t.Fatalf("apply delivery %d again: %d %s %s; the model says %d %s %s", d.id, r.status, result, reason, want.status, want.result, want.reason)
	}
}

// correct is an owner correcting o's total to amount, with reason, in
// the console; it returns the answer's status.
func (b *books) correct(o *mOrder, amount int64, reason string) int {
	b.t.Helper()
	before, status := o.total, o.status
	got := b.a.console(b.t, "/admin/orders/"+o.id+"/total", url.Values{"amount": {strconv.FormatInt(amount, 10)}, "reason": {reason}}).status
	want := b.m.correct(o, amount, strings.TrimSpace(reason) != "")
	b.t.Logf("correct the total of %s (%s) from %d to %d (reason %q): %d", o.id, status, before, amount, reason, got)
	if got != want {
		b.t.Fatalf("correct the total of %s (%s) from %d to %d (reason %q): %d, the model says %d", o.id, status, before, amount, reason, got, want)
	}
	return got
}

// send delivers notification f of o's gateway and checks the answer
// against the model's.
func (b *books) send(provider string, f payments.Fact) {
	b.t.Helper()
	if f.EventID == "" {
		f.EventID = "evt_books_" + b.next()
	}
	r, ev := b.a.notify(b.t, provider, f)
	switch f.Status {
	case models.EventPaid, models.EventDeclined, models.EventFailed, models.EventExpired, models.EventPending:
		b.latest[provider+" "+f.TransactionID] = f
	}
	b.facts[f.OrderID] = append(b.facts[f.OrderID], told{provider: provider, fact: f})
	want := b.m.deliver(eventOf(provider, ev, r))
	result, reason := r.result()
	b.t.Logf("%s %s %s of %s %d (refund %s %s): %d %s %s", provider, f.EventID, f.Status, f.TransactionID, f.Amount, f.RefundID, f.RefundStatus, r.status, result, reason)
	if r.status != want.status || result != want.result || reason != want.reason {
		b.t.Fatalf("%s notification %+v: %d %s %s; the model says %d %s %s", provider, f, r.status, result, reason, want.status, want.result, want.reason)
	}
	if reason == models.ReasonAmountMismatch {
		b.refusals = append(b.refusals, eventOf(provider, ev, r))
	}
	// Midtrans's notifications are judged by what its status API says
	// now, which the model does not follow: not applied again here.
	if result == models.ResultRejected && provider != "midtrans" {
		var id int64
		b.a.db.Raw("SELECT max(id) FROM callback_deliveries WHERE outcome = ? AND body IS NOT NULL", models.OutcomeRejected).Scan(&id)
		if id > 0 {
			b.rejected = append(b.rejected, rejectedDelivery{id: id, e: eventOf(provider, ev, r)})
		}
	}
}

// eventOf is what Sekali read in a notification, for the model; its
// fingerprint is the body's, which the answer does not carry, so
// the key and the fact stand for it.
func eventOf(provider string, ev payments.Event, _ answer) event {
	e := event{provider: provider, key: ev.Key, order: ev.OrderID, ref: ev.TransactionID, status: ev.Status, amount: ev.Amount, currency: ev.Currency}
	for _, r := range ev.Refunds {
		state := r.Status
		if state == "" {
			state = models.RefundSucceeded
		}
		e.refunds = append(e.refunds, mRefund{key: r.Key, amount: r.Amount, state: state})
	}
	e.fingerprint = fmt.Sprintf("%s|%s|%s|%d|%s|%v", e.order, e.ref, e.status, e.amount, e.currency, e.refunds)
	return e
}

// expressible: provider has a notification of status (Xendit has no
// failed or declined invoice, Stripe no expired PaymentIntent).
func (b *books) expressible(provider string, f payments.Fact) bool {
	_, err := b.a.senders[provider].Body(f)
	return err == nil
}

// pay is the gateway's notification that ref paid amount for o.
func (b *books) pay(o *mOrder, ref string, amount int64) {
	b.send(o.gateway, payments.Fact{OrderID: o.id, TransactionID: ref, Status: models.EventPaid, Amount: amount, Currency: "IDR"})
}

// attempt is a notification of status (declined, failed, expired,
// pending) of charge ref of o.
func (b *books) attempt(o *mOrder, ref string, status models.PaymentEvent) {
	f := payments.Fact{OrderID: o.id, TransactionID: ref, Status: status, Amount: o.total, Currency: "IDR"}
	if !b.expressible(o.gateway, f) {
		return
	}
	b.send(o.gateway, f)
}

// resend delivers an earlier notification again, under its event id.
func (b *books) resend(n told) { b.send(n.provider, n.fact) }

// cancel is the customer's cancel.
func (b *books) cancel(o *mOrder) {
	b.t.Helper()
	r := b.a.do(b.t, "POST", "/api/orders/"+o.id+"/cancel", map[string][]string{"Authorization": {"Bearer " + b.tokens[o.id]}}, nil)
	b.t.Logf("cancel %s (%s): %d", o.id, o.status, r.status)
	if want := b.m.cancel(o); r.status != want {
		b.t.Fatalf("cancel %s (%s): %d %s, the model says %d", o.id, o.status, r.status, r.body, want)
	}
}

// expire runs o's order:expire job now, as if its time had come.
func (b *books) expire(o *mOrder) {
	b.t.Helper()
	var m models.OutboxMessage
	if err := b.a.db.Take(&m, "task_id = ?", "order:expire:"+o.id).Error; err != nil {
		b.t.Fatalf("the expiry of %s: %v", o.id, err)
	}
	if out := b.a.runTask(b.t, m, 1); out != "succeeded" && out != "duplicate_ignored" {
		b.t.Fatalf("the expiry of %s: %s", o.id, out)
	}
	b.t.Logf("expire %s (%s)", o.id, o.status)
	b.m.expire(o)
}

// ask is an admin's refund of o through the admin API; 0 asks all that
// is left.
func (b *books) ask(o *mOrder, amount int64) {
	b.t.Helper()
	got, id := b.askAPI(o, amount, b.refundKey(o))
	want, _ := b.m.ask(o, amount, id)
	b.t.Logf("refund %d of %s (%s): %d", amount, o.id, o.status, got)
	if got != want {
		b.t.Fatalf("refund %d of %s (%s): %d, the model says %d", amount, o.id, o.status, got, want)
	}
}

// askAPI asks the admin API for a refund of amount of o under key, and
// returns the answer's status and the refund's id.
func (b *books) askAPI(o *mOrder, amount int64, key string) (int, int64) {
	body := map[string]any{"reason": "books"}
	if amount > 0 {
		body["amount"] = strconv.FormatInt(amount, 10)
	}
	r := b.a.api(b.t, "POST", "/api/admin/orders/"+o.id+"/refunds", key, body)
	var v struct{ ID int64 }
	json.Unmarshal(r.body, &v)
	return r.status, v.ID
}

// refundKey is a fresh Idempotency-Key for a refund of o.
func (b *books) refundKey(o *mOrder) string { return "books-refund-key-" + b.next() + "-" + o.id }

// askTwiceAtOnce is two admins refunding all of o at the same moment.
func (b *books) askTwiceAtOnce(o *mOrder) {
	b.t.Helper()
	start := make(chan struct{})
	got, ids := make([]int, 2), make([]int64, 2)
	keys := []string{b.refundKey(o), b.refundKey(o)}
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			<-start
			got[i], ids[i] = b.askAPI(o, 0, keys[i])
		})
	}
	close(start)
	wg.Wait()
	// The model asks one after the other, as the order's lock makes
	// them: the records in the order of their ids.
	slices.Sort(ids)
	ids = slices.DeleteFunc(ids, func(id int64) bool { return id == 0 })
	ids = append(ids, 0, 0)
	w1, _ := b.m.ask(o, 0, ids[0])
	w2, _ := b.m.ask(o, 0, ids[1])
	b.t.Logf("two refunds of all of %s at once: %v", o.id, got)
	want := []int{w1, w2}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		b.t.Fatalf("two refunds of all of %s at once: %v, the model says %v", o.id, got, want)
	}
}

// approve and decline are the owner's answers in the console.
func (b *books) approve(r *mRequest) {
	b.t.Helper()
	got := b.a.console(b.t, "/admin/gateway-requests/"+strconv.FormatInt(r.id, 10)+"/approve", url.Values{}).status
	b.t.Logf("approve refund %d (%s): %d", r.id, r.phase, got)
	if want := b.m.approve(r); got != want {
		b.t.Fatalf("approve refund %d (%s): %d, the model says %d", r.id, r.phase, got, want)
	}
}

func (b *books) decline(r *mRequest) {
	b.t.Helper()
	got := b.a.console(b.t, "/admin/gateway-requests/"+strconv.FormatInt(r.id, 10)+"/decline", url.Values{}).status
	b.t.Logf("decline refund %d (%s): %d", r.id, r.phase, got)
	if want := b.m.decline(r); got != want {
		b.t.Fatalf("decline refund %d (%s): %d, the model says %d", r.id, r.phase, got, want)
	}
}

// runJobs runs every due task whose job has not succeeded or been
// discarded, oldest first, as workers would; fault is set on the
// gateways for the refund calls.
func (b *books) runJobs(fault string) {
	b.t.Helper()
	var due []models.OutboxMessage
	err := b.a.db.Where(`process_at <= now() AND task_type IN ('invoice:generate', 'email:send', 'refund:send')
		AND NOT EXISTS (SELECT 1 FROM job_executions j WHERE j.idempotency_key = outbox_messages.task_id AND j.status IN ('succeeded', 'discarded'))`).
		Order("id").Find(&due).Error
	if err != nil {
		b.t.Fatalf("due tasks: %v", err)
	}
	for _, m := range due {
		b.a.db.Model(&m).Update("status", models.OutboxDispatched) // handed to the queue
		switch m.TaskType {
		case "refund:send":
			b.sendRefund(m, fault)
		default:
			b.runEffect(m)
		}
	}
}

// runEffect runs an invoice or email task, and tells the model what it
// must have done.
func (b *books) runEffect(m models.OutboxMessage) {
	b.t.Helper()
	var p struct {
		OrderID  string `json:"order_id"`
		Template string `json:"template"`
		RefundID int64  `json:"refund_id"`
	}
	json.Unmarshal(m.Payload, &p)
	o := b.m.orders[p.OrderID]
	// The refund a refund's email is about, as the model has it.
	var named *mRefund
	if p.RefundID > 0 {
		var r models.Refund
		if err := b.a.db.Take(&r, p.RefundID).Error; err != nil {
			b.t.Fatalf("%s: its refund: %v", m.TaskID, err)
		}
		if c := b.m.charges[r.Provider+" "+b.refOf(r.PaymentID)]; c != nil {
			named = c.refund(r.RefundKey)
		}
	}
	if out := b.a.runTask(b.t, m, 1); out != "succeeded" {
		b.t.Fatalf("%s: %s", m.TaskID, out)
	}
	b.t.Logf("%s run (order %s)", m.TaskID, o.status)
	if m.TaskType == "invoice:generate" {
		b.m.invoice(o)
		return
	}
	b.m.email(o, p.Template, named)
}

// refOf is the reference of payment id.
func (b *books) refOf(id int64) string {
	var ref string
	b.a.db.Raw("SELECT provider_reference FROM payments WHERE id = ?", id).Scan(&ref)
	return ref
}

// sendRefund runs a refund's job: the call to the gateway, with fault.
func (b *books) sendRefund(m models.OutboxMessage, fault string) {
	b.t.Helper()
	id, _ := strconv.ParseInt(strings.TrimPrefix(m.TaskID, "refund:send:"), 10, 64)
	r := b.m.request(id)
	switch fault {
	case "fail next call":
		b.a.world.FailNext(1)
	case "fail refunds later":
		b.a.world.FailRefundsLater(1)
	}
	defer b.a.world.FailNext(0)
	defer b.a.world.FailRefundsLater(0)
	before := r.phase
	out := b.a.runTask(b.t, m, 1)
	b.t.Logf("refund %d (%s, %d of %s) sent with fault %q: job %s", r.id, before, r.amount, r.charge.ref, fault, out)
	b.observeSend(r, before, fault)
	b.failed[r.id] = out == "failed"
}

// observeSend tells the model what the gateway answered refund r's
// call: nothing (a 500: unanswered), or its refund, whose id Sekali
// recorded.
func (b *books) observeSend(r *mRequest, before models.GatewayPhase, fault string) {
	b.t.Helper()
	var row models.GatewayRequest
	if err := b.a.db.Take(&row, r.id).Error; err != nil {
		b.t.Fatalf("refund %d: %v", r.id, err)
	}
	switch {
	case before != models.GatewayPlanned && before != models.GatewaySent: // over: the job asks nothing
	case before == models.GatewayPlanned && !b.m.fits(r):
		b.m.unfit(r)
	case fault == "fail next call":
		b.m.unanswered(r)
		// The lease passes, as time would: the next try may call.
		b.a.db.Model(&models.GatewayRequest{}).Where("id = ?", r.id).Update("locked_until", time.Now().Add(-time.Second))
	case row.Phase == models.GatewayFailed && row.ProviderObjectID == "":
		// The gateway said no (its own view of the charge: a refund made
		// in its dashboard took the money). Nothing moved.
		b.t.Logf("refund %d refused by the gateway: %s", r.id, row.LastError)
		b.m.refused(r)
	default:
		// The refund's state in the answer: Xendit answers every refund
		// PENDING and tells how it settled by callback; Stripe answers
		// pending one that fails later.
		state := models.RefundSucceeded
		if r.charge.provider == "xendit" || fault == "fail refunds later" && r.charge.provider == "stripe" {
			state = models.RefundPending
		}
		var total int64
		if r.charge.provider == "stripe" { // Stripe answers with the charge's refunded total at Stripe
			total = b.gatewayTotal(r.charge) + r.amount
		}
		b.m.sent(r, row.ProviderObjectID, state, total)
	}
}

// later are the gateways whose emulation can accept a refund and fail it
// afterwards (FailRefundsLater).
var later = map[string]bool{"stripe": true, "xendit": true}

// gatewayTotal is what the gateway's emulation counts as refunded of c
// before a new refund: the refunds Sekali asked it for that are done
// and did not fail.
func (b *books) gatewayTotal(c *mCharge) int64 {
	var total int64
	for _, r := range b.m.requests {
		if r.charge == c && r.phase == models.GatewayDone {
			if named := c.refund(r.object); named == nil || counts(named.state) {
				total += r.amount
			}
		}
	}
	return total
}

// deliverWorld delivers the notifications the gateways' emulations
// kept, oldest or newest first, once or twice.
func (b *books) deliverWorld(newestFirst, twice bool) {
	b.t.Helper()
	q := b.a.world.take()
	if newestFirst {
		slices.Reverse(q)
	}
	for _, n := range q {
		if !b.expressible(n.provider, n.fact) {
			continue
		}
		b.send(n.provider, n.fact)
		if twice {
			b.send(n.provider, n.fact)
		}
	}
}

// dashboardRefund is a refund made in the gateway's dashboard: its
// notification, naming a refund Sekali never asked for.
func (b *books) dashboardRefund(o *mOrder, c *mCharge, amount int64) {
	if amount == 0 {
		amount = c.amount
	}
	b.send(c.provider, payments.Fact{OrderID: o.id, TransactionID: c.ref, Status: models.EventRefunded, Amount: amount, Currency: "IDR",
		RefundID: "rf_dash_" + b.next()})
}

// refundFails is the gateway's news that refund r of c failed.
func (b *books) refundFails(o *mOrder, c *mCharge, r *mRefund) {
	f := payments.Fact{OrderID: o.id, TransactionID: c.ref, Status: models.EventRefunded, Amount: r.amount, Currency: "IDR",
		RefundID: r.key, RefundStatus: models.RefundFailed, RefundReason: "account closed"}
	if !later[c.provider] && c.provider != "sandbox" { // Midtrans tells no refund's failure
		return
	}
	b.send(c.provider, f)
}

// forgedRefundNews is news, signed, of another charge's refund told on
// o's charge c.
func (b *books) forgedRefundNews(o *mOrder, c *mCharge, r mRefund, state models.RefundStatus) {
	if c.provider == "midtrans" { // its notifications are confirmed with its API, which knows better
		return
	}
	b.send(c.provider, payments.Fact{OrderID: o.id, TransactionID: c.ref, Status: models.EventRefunded, Amount: r.amount, Currency: "IDR",
		RefundID: r.key, RefundStatus: state})
}

// dispute is the bank's dispute of c.
func (b *books) dispute(o *mOrder, c *mCharge, status models.PaymentEvent) {
	f := payments.Fact{OrderID: o.id, TransactionID: c.ref, Status: status, Amount: c.amount, Currency: "IDR"}
	if !b.expressible(c.provider, f) {
		return
	}
	b.send(c.provider, f)
}

// discard is an operator discarding refund r's failed job through the
// admin API.
func (b *books) discard(r *mRequest) {
	b.t.Helper()
	key := "refund:send:" + strconv.FormatInt(r.id, 10)
	got := b.a.api(b.t, "POST", "/api/admin/jobs/"+url.PathEscape(key)+"/discard", "", map[string]string{"reason": "refunded by hand"}).status
	b.t.Logf("discard %s (%s): %d", key, r.phase, got)
	if want := b.m.discard(r); got != want {
		b.t.Fatalf("discard %s (%s): %d, the model says %d", key, r.phase, got, want)
	}
	delete(b.failed, r.id)
}

// sendAgain is "Send again now" on refund r in the console.
func (b *books) sendAgain(r *mRequest) {
	b.t.Helper()
	before := r.phase
	got := b.a.console(b.t, "/admin/gateway-requests/"+strconv.FormatInt(r.id, 10)+"/retry", url.Values{}).status
	b.t.Logf("send refund %d (%s) again now: %d", r.id, before, got)
	want := 303
	if before == models.GatewayAwaitingApproval {
		want = 409
	}
	if got != want {
		b.t.Fatalf("send refund %d (%s) again: %d, want %d", r.id, before, got, want)
	}
	b.observeSend(r, before, "")
}

// tampering is a change made behind the application's back that breaks
// the books: the model no longer holds, and the audit must say so.
type tampering struct {
	name         string
	break_, undo string // SQL; a tampering that changes no row does not apply
}

// tampers break the books one way each.
var tampers = []tampering{
	{"stock", "UPDATE products SET stock = stock + 1 WHERE sku = 'MUG'", "UPDATE products SET stock = stock - 1 WHERE sku = 'MUG'"},
	{"a refunded amount", "UPDATE payments SET refunded_amount = refunded_amount + 1 WHERE id = (SELECT min(id) FROM payments WHERE status = 'succeeded')",
		"UPDATE payments SET refunded_amount = refunded_amount - 1 WHERE id = (SELECT min(id) FROM payments WHERE status = 'succeeded')"},
	{"a paid order's status", "UPDATE orders SET status = 'pending' WHERE id = (SELECT min(id) FROM orders WHERE status = 'paid')",
		"UPDATE orders SET status = 'paid' WHERE id = (SELECT min(id) FROM orders WHERE status = 'pending' AND EXISTS (SELECT 1 FROM payments p WHERE p.order_id = orders.id AND p.status = 'succeeded'))"},
	{"a refund's amount", "UPDATE refunds SET amount = amount + 1 WHERE id = (SELECT min(id) FROM refunds WHERE status = 'succeeded')",
		"UPDATE refunds SET amount = amount - 1 WHERE id = (SELECT min(id) FROM refunds WHERE status = 'succeeded')"},
}

// tamper breaks the books behind the application's back: the audit
// must turn red, as the model says; undone, the run goes on.
func (b *books) tamper(x tampering) {
	b.t.Helper()
	if b.m.broken {
		return // red already
	}
	res := b.a.db.Exec(x.break_)
	if res.Error != nil {
		b.t.Fatalf("tamper with %s: %v", x.name, res.Error)
	}
	if res.RowsAffected == 0 {
		return // nothing of that kind yet
	}
	report, err := audit.New(b.a.db).Run(context.Background(), 0)
	b.t.Logf("tamper with %s: the audit says ok %v", x.name, report.OK)
	if err != nil || report.OK {
		b.t.Fatalf("the audit is green (%v) with %s broken: the model's books do not hold", err, x.name)
	}
	if err := b.a.db.Exec(x.undo).Error; err != nil {
		b.t.Fatalf("undo %s: %v", x.name, err)
	}
}

// check compares the application's rows with the model's books, and
// asks the audit.
func (b *books) check() {
	b.t.Helper()
	db := b.a.db
	type orderRow struct {
		ID, Status, SKU           string
		Total                     int64
		Invoices, Emails          int
		RefundTasks, RefundEmails int
		FailedTasks, FailedEmails int
		EndEmails                 string
	}
	var rows []orderRow
	db.Raw(`SELECT o.id, o.status, i.sku, o.total_amount AS total,
		(SELECT count(*) FROM invoices v WHERE v.order_id = o.id) AS invoices,
		(SELECT count(*) FROM outbound_emails e WHERE e.key = 'order_paid:' || o.id AND e.status = 'sent') AS emails,
		(SELECT count(*) FROM outbox_messages m WHERE m.task_id LIKE 'email:send:refund_succeeded:' || o.id || ':%') AS refund_tasks,
		(SELECT count(*) FROM outbound_emails e WHERE e.key LIKE 'refund_succeeded:' || o.id || ':%' AND e.status = 'sent') AS refund_emails,
		(SELECT count(*) FROM outbox_messages m WHERE m.task_id LIKE 'email:send:refund_failed:' || o.id || ':%') AS failed_tasks,
		(SELECT count(*) FROM outbound_emails e WHERE e.key LIKE 'refund_failed:' || o.id || ':%' AND e.status = 'sent') AS failed_emails,
		(SELECT coalesce(string_agg(split_part(e.key, ':', 1), ',' ORDER BY e.key), '') FROM outbound_emails e
		 WHERE e.key IN ('order_cancelled:' || o.id, 'order_expired:' || o.id) AND e.status = 'sent') AS end_emails
		FROM orders o JOIN order_items i ON i.order_id = o.id ORDER BY o.id`).Scan(&rows)
	if len(rows) != len(b.m.orders) {
		b.t.Fatalf("%d orders, the model has %d", len(rows), len(b.m.orders))
	}
	for _, r := range rows {
		o := b.m.orders[r.ID]
		switch {
		case o == nil:
			b.t.Fatalf("order %s is not the model's", r.ID)
		case r.Status != string(o.status):
			b.t.Fatalf("order %s is %s, the model says %s", r.ID, r.Status, o.status)
		case r.Total != o.total:
			b.t.Fatalf("order %s's total is %d, the model says %d", r.ID, r.Total, o.total)
		case (r.Invoices == 1) != o.invoiced || r.Invoices > 1:
			b.t.Fatalf("order %s has %d invoices, the model says invoiced %v", r.ID, r.Invoices, o.invoiced)
		case (r.Emails == 1) != o.emailed || r.Emails > 1:
			b.t.Fatalf("order %s has %d order_paid emails sent, the model says %v", r.ID, r.Emails, o.emailed)
		case r.RefundTasks != o.refundTasks:
			b.t.Fatalf("order %s has %d refund email tasks, the model says %d", r.ID, r.RefundTasks, o.refundTasks)
		case r.RefundEmails != o.refundEmails:
			b.t.Fatalf("order %s has %d refund emails sent, the model says %d", r.ID, r.RefundEmails, o.refundEmails)
		case r.FailedTasks != o.failedTasks:
			b.t.Fatalf("order %s has %d refund failure email tasks, the model says %d", r.ID, r.FailedTasks, o.failedTasks)
		case r.FailedEmails != o.failedEmails:
			b.t.Fatalf("order %s has %d refund failure emails sent, the model says %d", r.ID, r.FailedEmails, o.failedEmails)
		case r.EndEmails != o.endEmail:
			b.t.Fatalf("order %s has sent %q of its end's emails, the model says %q", r.ID, r.EndEmails, o.endEmail)
		}
	}
	var stock []struct {
		SKU   string
		Stock int64
	}
	db.Raw("SELECT sku, stock FROM products").Scan(&stock)
	for _, p := range stock {
		if p.Stock != b.m.stock[p.SKU] {
			b.t.Fatalf("product %s has %d in stock, the model says %d", p.SKU, p.Stock, b.m.stock[p.SKU])
		}
	}
	var payments []models.Payment
	db.Order("id").Find(&payments)
	if len(payments) != len(b.m.charges) {
		b.t.Fatalf("%d payments, the model has %d charges", len(payments), len(b.m.charges))
	}
	for _, p := range payments {
		c := b.m.charges[p.Provider+" "+p.ProviderReference]
		switch {
		case c == nil:
			b.t.Fatalf("payment %s %s is not the model's", p.Provider, p.ProviderReference)
		case p.Status != c.status || p.Amount != c.amount || p.RefundedAmount != c.refunded() || p.RefundedFrom != c.from ||
			p.Dispute != c.dispute || p.DisputedAmount != c.disputed || p.OrderID != c.order.id:
			b.t.Fatalf("payment %s: %s %d, refunded %d (from %q), dispute %q %d; the model says %s %d, refunded %d (from %q), dispute %q %d",
				p.ProviderReference, p.Status, p.Amount, p.RefundedAmount, p.RefundedFrom, p.Dispute, p.DisputedAmount,
				c.status, c.amount, c.refunded(), c.from, c.dispute, c.disputed)
		}
		var named []models.Refund
		db.Where("payment_id = ? AND refund_key NOT LIKE '%:refunded:%'", p.ID).Order("id").Find(&named)
		if len(named) != len(c.refunds) {
			var got, want []string
			for _, r := range named {
				got = append(got, fmt.Sprintf("%s %s %d", r.RefundKey, r.Status, r.Amount))
			}
			for _, r := range c.refunds {
				want = append(want, fmt.Sprintf("%s %s %d", r.key, r.state, r.amount))
			}
			b.t.Fatalf("payment %s has named refunds %v, the model %v", p.ProviderReference, got, want)
		}
		for _, r := range named {
			mr := c.refund(r.RefundKey)
			if mr == nil || mr.amount != r.Amount || mr.state != r.Status {
				b.t.Fatalf("refund %s of %s: %s %d; the model says %+v", r.RefundKey, p.ProviderReference, r.Status, r.Amount, mr)
			}
		}
	}
	var requests []models.GatewayRequest
	db.Where("kind = ?", models.GatewayRefund).Order("id").Find(&requests)
	if len(requests) != len(b.m.requests) {
		b.t.Fatalf("%d refund requests, the model has %d", len(requests), len(b.m.requests))
	}
	for i, r := range requests {
		mr := b.m.requests[i]
		if r.ID != mr.id || r.Phase != mr.phase || r.Amount != mr.amount || r.IdempotencyKey != mr.key {
			b.t.Fatalf("refund request %d: %s %d %s; the model says %d %s %d %s (%s)", r.ID, r.Phase, r.Amount, r.IdempotencyKey,
				mr.id, mr.phase, mr.amount, mr.key, r.LastError)
		}
	}
	var tasks []struct {
		TaskID string
		N      int
	}
	db.Raw(`SELECT task_id, count(*) AS n FROM outbox_messages WHERE task_type IN ('invoice:generate', 'email:send', 'refund:send', 'order:expire')
		AND task_id NOT LIKE 'email:send:refund_succeeded:%' AND task_id NOT LIKE 'email:send:refund_failed:%' GROUP BY task_id`).Scan(&tasks)
	got := map[string]int{}
	for _, t := range tasks {
		got[t.TaskID] = t.N
	}
	if !mapsEqual(got, b.m.tasks) {
		b.t.Fatalf("outbox tasks %v, the model says %v", sortedKeys(got), sortedKeys(b.m.tasks))
	}
	var alerted []string
	db.Raw("SELECT payload->'data'->>'refund_request_id' FROM alerts WHERE type = 'refund.failed'").Scan(&alerted)
	var want []string
	for id := range b.m.alerts {
		want = append(want, strconv.FormatInt(id, 10))
	}
	slices.Sort(alerted)
	slices.Sort(want)
	if !slices.Equal(alerted, want) {
		b.t.Fatalf("refund.failed alerts for refunds %v, the model says %v", alerted, want)
	}
	report, err := audit.New(db).Run(context.Background(), 0)
	if err != nil {
		b.t.Fatalf("audit: %v", err)
	}
	switch {
	case b.m.broken && report.OK:
		b.t.Fatalf("the audit is green where a gateway refunded more than the books can take")
	case !b.m.broken && !report.OK:
		b.t.Fatalf("the audit is red where the model's books hold: %+v", report.Violations)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]int) []string {
	var ks []string
	for k, v := range m {
		ks = append(ks, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(ks)
	return ks
}

// TestBooksRegressions are the money breaks the fourth round of attacks
// found, each as the sequence that showed it, held to the model after
// every step like TestBooks's.
func TestBooksRegressions(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	// paid is a new order through gateway, paid.
	paid := func(b *books, gateway string) *mOrder {
		o := b.m.orders[b.create(gateway, "MUG")]
		b.pay(o, "tx_"+o.id+"_"+b.next(), price)
		b.check()
		return o
	}
	// refunded is o with a refund of amount asked and sent: done.
	refunded := func(b *books, o *mOrder, amount int64) *mRequest {
		b.ask(o, amount)
		b.runJobs("")
		b.check()
		return b.m.requests[len(b.m.requests)-1]
	}
	for _, c := range []struct {
		name string
		run  func(b *books)
	}{
		{"1: a refund failure told on order B's charge fails nothing of order A", func(b *books) {
			A := paid(b, "stripe")
			r := refunded(b, A, 50000)
			B := paid(b, "stripe")
			b.forgedRefundNews(B, B.charges[0], mRefund{key: r.key, amount: 50000}, models.RefundFailed)
			b.check()
			b.forgedRefundNews(B, B.charges[0], mRefund{key: r.object, amount: 50000}, models.RefundFailed)
			b.check()
		}},
		{"2: a failed refund of another charge is not counted on this one", func(b *books) {
			A := paid(b, "xendit")
			b.dashboardRefund(A, A.charges[0], 50000)
			B := paid(b, "xendit")
			b.forgedRefundNews(B, B.charges[0], *A.charges[0].refunds[0], models.RefundFailed)
			b.check()
		}},
		{"3: a refund that succeeded, then failed before its email, keeps the audit green", func(b *books) {
			A := paid(b, "stripe")
			b.dashboardRefund(A, A.charges[0], 50000)
			b.refundFails(A, A.charges[0], A.charges[0].refunds[0])
			b.runJobs("")
			b.check()
		}},
		{"4: a refund whose job was discarded is never sent", func(b *books) {
			A := paid(b, "stripe")
			b.ask(A, 50000)
			b.runJobs("fail next call")
			b.check()
			r := b.m.requests[0]
			b.discard(r)
			b.check()
			b.sendAgain(r)
			b.runJobs("")
			b.check()
		}},
		{"5: the approval threshold weighs what the order asked", func(b *books) {
			A := paid(b, "midtrans")
			b.ask(A, approvalAbove)
			b.ask(A, 10000)
			b.check()
			B := paid(b, "stripe")
			for range 7 {
				b.ask(B, 10000)
			}
			b.check()
		}},
		{"a refund sent again after a dashboard refund took the money turns the audit red", func(b *books) {
			// The emulated gateway does not know the dashboard's refund and
			// makes the repeat; its answer cannot be counted.
			A := paid(b, "stripe")
			b.ask(A, approvalAbove)
			b.runJobs("fail next call")
			b.dashboardRefund(A, A.charges[0], 50000)
			b.check()
			b.sendAgain(b.m.requests[0])
			b.check()
		}},
		{"6: approval looks at what is left", func(b *books) {
			A := paid(b, "stripe")
			b.ask(A, 70000)
			b.dashboardRefund(A, A.charges[0], 50000)
			b.check()
			b.approve(b.m.requests[0])
			b.check()
			b.decline(b.m.requests[0])
			b.check()
		}},
		{"customers told once: a refund that failed after its email, an order cancelled, an order expired", func(b *books) {
			A := paid(b, "stripe")
			b.dashboardRefund(A, A.charges[0], 50000)
			b.runJobs("") // "Your refund of Rp 50.000 …" goes out
			r := A.charges[0].refunds[0]
			b.refundFails(A, A.charges[0], r)
			b.refundFails(A, A.charges[0], r) // told again, under another event id
			b.check()
			b.runJobs("")
			b.check()
			// A refund that failed before its first email went out: its
			// customer hears of neither.
			b.dashboardRefund(A, A.charges[0], 20000)
			b.refundFails(A, A.charges[0], A.charges[0].refunds[1])
			b.runJobs("")
			b.check()
			if A.refundEmails != 1 || A.failedTasks != 2 || A.failedEmails != 1 {
				b.t.Fatalf("order %s: %d refund emails, %d failure tasks, %d failure emails; want 1, 2, 1",
					A.id, A.refundEmails, A.failedTasks, A.failedEmails)
			}

			cancelled := b.m.orders[b.create("stripe", "MUG")]
			b.cancel(cancelled)
			b.cancel(cancelled)
			expired := b.m.orders[b.create("stripe", "MUG")]
			b.expire(expired)
			b.expire(expired)
			told := b.m.orders[b.create("xendit", "MUG")] // its gateway tells the expiry
			b.attempt(told, "tx_"+told.id+"_"+b.next(), models.EventExpired)
			// Cancelled, then paid late: no longer cancelled when its
			// email runs, so only the payment is told.
			late := b.m.orders[b.create("midtrans", "MUG")]
			b.cancel(late)
			b.pay(late, "tx_"+late.id+"_"+b.next(), price)
			b.check()
			b.runJobs("")
			b.check()
			for o, want := range map[*mOrder]string{cancelled: "order_cancelled", expired: "order_expired", told: "order_expired", late: ""} {
				if o.endEmail != want || o == late && !o.emailed {
					b.t.Fatalf("order %s (%s): its end told by %q (paid email %v), want %q", o.id, o.status, o.endEmail, o.emailed, want)
				}
			}
		}},
		{"a total corrected for a refused payment: applied again, it pays the order once", func(b *books) {
			// A pending order and a cancelled one, each paid the price it
			// should have had, twice: refused for the amount, corrected,
			// applied again, paid — invoiced and told once, the books
			// green. The other payment's refusal still stands, but the
			// order is paid: no correction any more, and that payment,
			// applied again, is a second charge, owed back.
			for _, late := range []bool{false, true} {
				A := b.m.orders[b.create("stripe", "MUG")]
				if late {
					b.cancel(A)
				}
				b.pay(A, "tx_"+A.id+"_"+b.next(), price-1)
				refused := b.rejected[len(b.rejected)-1]
				b.pay(A, "tx_"+A.id+"_"+b.next(), price-1)
				other := b.rejected[len(b.rejected)-1]
				b.check()
				if got := b.correct(A, price-1, "the price was 99.999 that day"); got != 303 {
					b.t.Fatalf("the correction of %s: %d, want 303", A.id, got)
				}
				b.check()
				b.applyAgain(refused)
				b.runJobs("")
				b.check()
				b.applyAgain(refused) // a duplicate now
				b.runJobs("")
				b.check()
				if A.status != models.OrderPaid || !A.invoiced || !A.emailed || A.total != price-1 {
					b.t.Fatalf("order %s: %s, total %d, invoiced %v, emailed %v; want paid %d, invoiced and emailed",
						A.id, A.status, A.total, A.invoiced, A.emailed, price-1)
				}
				if got := b.correct(A, price, "and back again"); got != 409 {
					b.t.Fatalf("a second correction of paid order %s: %d, want 409", A.id, got)
				}
				b.check()
				b.applyAgain(other)
				b.runJobs("")
				b.check()
				if A.status != models.OrderPaid || len(A.charges) != 2 || A.charges[1].status != models.PaymentRefundRequired {
					b.t.Fatalf("order %s after its other payment applied again: %s, %d charges", A.id, A.status, len(A.charges))
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBooks(t, a)
			c.run(b)
			b.check()
		})
	}
}
