package payments_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

const price = 50000 // every order here is one unit of a product at this price

// fixture drives orders into each state through the real services.
type fixture struct {
	t      *testing.T
	db     *gorm.DB
	orders *orders.Service
	pay    *payments.Service
	n      int
}

func newFixture(t *testing.T) *fixture {
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	t.Cleanup(pay.Close)
	return &fixture{t: t, db: db, orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), pay: pay}
}

// deliver sends one signed sandbox event with a fresh event id. Provider
// references are unique per provider, so ref is made unique per order.
func (f *fixture) deliver(orderID, ref string, ev models.PaymentEvent, amount int64) payments.Outcome {
	f.t.Helper()
	return f.deliverRef(orderID, ref+"/"+orderID, ev, amount)
}

func (f *fixture) deliverRef(orderID, ref string, ev models.PaymentEvent, amount int64) payments.Outcome {
	f.t.Helper()
	f.n++
	body := testenv.SandboxBody(orderID, ref, ev, amount)
	return f.pay.Receive(context.Background(), payments.Delivery{
		Provider:    sandbox.Name,
		Header:      testenv.SandboxHeaders(fmt.Sprintf("evt_%d", f.n), body, time.Now()),
		Body:        bytesReader(body),
		ContentType: "application/json",
	})
}

// orderIn creates a one-item order of a fresh product (stock 2) and moves
// it into state s. It returns the order id and the SKU.
func (f *fixture) orderIn(s models.OrderStatus) (string, string) {
	f.t.Helper()
	f.n++
	sku := fmt.Sprintf("SM-%d", f.n)
	testenv.MustCreateProduct(f.t, f.db, sku, price, 2)
	o, err := f.orders.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "sm@example.com", Items: []orders.ItemRequest{{SKU: sku, Qty: 1}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	must := func(out payments.Outcome) {
		if out.Status() != 200 {
			f.t.Fatalf("setting up %s: %+v", s, out)
		}
	}
	switch s {
	case models.OrderPaid:
		must(f.deliver(o.ID, "tx-pay", models.EventPaid, price))
	case models.OrderFailed:
		must(f.deliver(o.ID, "tx-fail", models.EventFailed, 0))
	case models.OrderExpired:
		must(f.deliver(o.ID, "tx-exp", models.EventExpired, 0))
	case models.OrderCancelled:
		if _, err := f.orders.Cancel(context.Background(), o.ID, models.CauseCustomer); err != nil {
			f.t.Fatal(err)
		}
	case models.OrderRefundRequired:
		must(f.deliver(o.ID, "tx-fail", models.EventFailed, 0))
		f.buyAll(sku)
		must(f.deliver(o.ID, "tx-late", models.EventPaid, price))
	}
	if got := f.snapshot(o.ID, sku).status; got != s {
		f.t.Fatalf("set-up reached %s, want %s", got, s)
	}
	return o.ID, sku
}

// buyAll takes the product's remaining stock with another order.
func (f *fixture) buyAll(sku string) {
	f.t.Helper()
	var p models.Product
	f.db.Take(&p, "sku = ?", sku)
	if _, err := f.orders.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "other@example.com", Items: []orders.ItemRequest{{SKU: sku, Qty: p.Stock}},
	}); err != nil {
		f.t.Fatal(err)
	}
}

// state is what an event may change.
type state struct {
	status   models.OrderStatus
	payments map[string]models.PaymentStatus // by provider reference
	stock    int64
	outbox   int64
}

func (f *fixture) snapshot(orderID, sku string) state {
	f.t.Helper()
	var o models.Order
	var p models.Product
	var pays []models.Payment
	s := state{payments: map[string]models.PaymentStatus{}}
	if err := f.db.Take(&o, "id = ?", orderID).Error; err != nil {
		f.t.Fatal(err)
	}
	f.db.Take(&p, "sku = ?", sku)
	f.db.Find(&pays, "order_id = ?", orderID)
	f.db.Raw("SELECT count(*) FROM outbox_messages WHERE convert_from(payload, 'UTF8') LIKE ? AND task_type <> 'order:expire'", "%"+orderID+"%").Scan(&s.outbox)
	for _, pay := range pays {
		ref, _, _ := strings.Cut(pay.ProviderReference, "/")
		s.payments[ref] = pay.Status
	}
	s.status, s.stock = o.Status, p.Stock
	return s
}

// TestStateMachine delivers every event to an order in every state
// (docs/state-machine.md#event--state) through the real pipeline and
// database, and checks the answer and every effect: order status, the
// event's payment row, stock and outbox.
func TestStateMachine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const (
		processed = "processed"
		stale     = "stale"
	)
	type want struct {
		result   string
		status   models.OrderStatus
		payment  models.PaymentStatus // status of the event's reference afterwards; "" = no row
		stockDel int64                // change of the product's stock
		outbox   int64                // invoice and email tasks added
	}
	all := []models.OrderStatus{models.OrderPending, models.OrderPaid, models.OrderFailed, models.OrderExpired, models.OrderCancelled, models.OrderRefundRequired}
	type tc struct {
		from models.OrderStatus
		ev   models.PaymentEvent
		ref  string
		want want
	}
	var cases []tc
	// Pending: every event applies.
	cases = append(cases,
		tc{models.OrderPending, models.EventPaid, "tx-new", want{processed, models.OrderPaid, models.PaymentSucceeded, 0, 2}},
		// A declined attempt fails the payment, not the order: it keeps
		// its stock, and may still be paid.
		tc{models.OrderPending, models.EventDeclined, "tx-new", want{processed, models.OrderPending, models.PaymentFailed, 0, 0}},
		tc{models.OrderPending, models.EventFailed, "tx-new", want{processed, models.OrderFailed, models.PaymentFailed, +1, 0}},
		// An expiry tells the customer (a failure does not: they saw it at
		// the gateway).
		tc{models.OrderPending, models.EventExpired, "tx-new", want{processed, models.OrderExpired, models.PaymentExpired, +1, 1}},
		tc{models.OrderPending, models.EventPending, "tx-new", want{processed, models.OrderPending, models.PaymentPending, 0, 0}},
	)
	// Every other state: declined, failed, expired and pending events are stale.
	for _, s := range all[1:] {
		for _, ev := range []models.PaymentEvent{models.EventDeclined, models.EventFailed, models.EventExpired, models.EventPending} {
			cases = append(cases, tc{s, ev, "tx-new", want{stale, s, "", 0, 0}})
		}
	}
	cases = append(cases,
		// Paid: the same charge again is stale; a new charge is kept for a refund.
		tc{models.OrderPaid, models.EventPaid, "tx-pay", want{stale, models.OrderPaid, models.PaymentSucceeded, 0, 0}},
		tc{models.OrderPaid, models.EventPaid, "tx-new", want{processed, models.OrderPaid, models.PaymentRefundRequired, 0, 0}},
		// Failed, expired, cancelled: a late payment re-reserves and pays,
		// whether it names a new charge or the one that failed.
		tc{models.OrderFailed, models.EventPaid, "tx-new", want{processed, models.OrderPaid, models.PaymentSucceeded, -1, 2}},
		tc{models.OrderFailed, models.EventPaid, "tx-fail", want{processed, models.OrderPaid, models.PaymentSucceeded, -1, 2}},
		tc{models.OrderExpired, models.EventPaid, "tx-new", want{processed, models.OrderPaid, models.PaymentSucceeded, -1, 2}},
		tc{models.OrderCancelled, models.EventPaid, "tx-new", want{processed, models.OrderPaid, models.PaymentSucceeded, -1, 2}},
		// Refund required: the charge that caused it is stale; another one joins it.
		tc{models.OrderRefundRequired, models.EventPaid, "tx-late", want{stale, models.OrderRefundRequired, models.PaymentRefundRequired, 0, 0}},
		tc{models.OrderRefundRequired, models.EventPaid, "tx-new", want{processed, models.OrderRefundRequired, models.PaymentRefundRequired, 0, 0}},
		// Refunds: the paid order's own charge refunds the order (the stock
		// stays with it); a charge that had to be refunded is refunded, the
		// order unchanged; a charge that was never taken is stale. A refund
		// that succeeded writes its email to the customer.
		tc{models.OrderPaid, models.EventRefunded, "tx-pay", want{processed, models.OrderRefunded, models.PaymentRefunded, 0, 1}},
		tc{models.OrderRefundRequired, models.EventRefunded, "tx-late", want{processed, models.OrderRefundRequired, models.PaymentRefunded, 0, 1}},
		tc{models.OrderPaid, models.EventRefunded, "tx-new", want{stale, models.OrderPaid, "", 0, 0}},
		tc{models.OrderPending, models.EventRefunded, "tx-new", want{stale, models.OrderPending, "", 0, 0}},
		tc{models.OrderFailed, models.EventRefunded, "tx-fail", want{stale, models.OrderFailed, models.PaymentFailed, 0, 0}},
	)

	for _, c := range cases {
		name := fmt.Sprintf("%s+%s(%s)", c.from, c.ev, c.ref)
		orderID, sku := f.orderIn(c.from)
		before := f.snapshot(orderID, sku)
		amount := int64(price) // a payment, or a refund in full
		if c.ev != models.EventPaid && c.ev != models.EventRefunded {
			amount = 0
		}
		out := f.deliver(orderID, c.ref, c.ev, amount)
		after := f.snapshot(orderID, sku)

		if out.Status() != 200 || out.Word() != c.want.result {
			t.Errorf("%s: answer %d %s (%s), want 200 %s", name, out.Status(), out.Result, out.Detail, c.want.result)
		}
		if after.status != c.want.status {
			t.Errorf("%s: order %s, want %s", name, after.status, c.want.status)
		}
		if got := after.payments[c.ref]; got != c.want.payment {
			t.Errorf("%s: payment %s is %q, want %q", name, c.ref, got, c.want.payment)
		}
		if d := after.stock - before.stock; d != c.want.stockDel {
			t.Errorf("%s: stock changed by %d, want %d", name, d, c.want.stockDel)
		}
		if d := after.outbox - before.outbox; d != c.want.outbox {
			t.Errorf("%s: outbox grew by %d, want %d", name, d, c.want.outbox)
		}
		if c.want.result == stale && fmt.Sprint(before) != fmt.Sprint(after) {
			t.Errorf("%s: a stale event changed state:\n before %v\n after  %v", name, before, after)
		}
	}

	// Re-reservation when the stock is gone: refund_required, nothing taken.
	orderID, sku := f.orderIn(models.OrderExpired)
	f.buyAll(sku)
	before := f.snapshot(orderID, sku)
	out := f.deliver(orderID, "tx-new", models.EventPaid, price)
	after := f.snapshot(orderID, sku)
	if out.Result != processed || after.status != models.OrderRefundRequired ||
		after.payments["tx-new"] != models.PaymentRefundRequired || after.stock != before.stock || after.outbox != before.outbox {
		t.Errorf("expired+paid without stock: %s, state %v; want refund_required, stock unchanged, no tasks", out.Result, after)
	}

	report, err := audit.WithoutJobs(f.db).Run(context.Background(), 0) // no worker runs here
	if err != nil || !report.OK {
		t.Fatalf("audit after the state machine: %v %+v", err, report.Violations)
	}
}

// A declined attempt and then a success on the same charge — a card
// declined, then accepted on the same PaymentIntent — pay the order once;
// its stock is never released, so it is never re-reserved either.
func TestDeclinedThenPaidPaysOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orderID, sku := f.orderIn(models.OrderPending)
	before := f.snapshot(orderID, sku)
	if out := f.deliver(orderID, "tx-retry", models.EventDeclined, 0); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Fatalf("declined: %+v", out)
	}
	if out := f.deliver(orderID, "tx-retry", models.EventPaid, price); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("paid after the decline: %+v", out)
	}
	after := f.snapshot(orderID, sku)
	if after.stock != before.stock || after.payments["tx-retry"] != models.PaymentSucceeded || len(after.payments) != 1 {
		t.Errorf("after a decline and a payment: %+v; want the stock untouched and one succeeded payment", after)
	}
	var moves int64
	f.db.Model(&models.StockMovement{}).Where("order_id = ? AND kind <> ?", orderID, models.MovementReserve).Count(&moves)
	if moves != 0 {
		t.Errorf("%d release or re-reserve movements; the stock must stay reserved throughout", moves)
	}
}

// TestReferenceOfAnotherOrderIsRejected: a provider reference belongs to
// one order; an event that names it for another is rejected.
func TestReferenceOfAnotherOrderIsRejected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first, _ := f.orderIn(models.OrderPaid)
	second, sku := f.orderIn(models.OrderPending)
	before := f.snapshot(second, sku)
	out := f.deliverRef(second, "tx-pay/"+first, models.EventPaid, price)
	if out.Status() != 422 || out.Reason != models.ReasonReferenceMismatch {
		t.Fatalf("reference of %s used for %s: %d %s %s", first, second, out.Status(), out.Result, out.Reason)
	}
	if after := f.snapshot(second, sku); fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("rejected event changed state: %v → %v", before, after)
	}
}

// TestRepeatedDeliveryNeedsNoDatabase: once an event is processed, this
// process answers its repeated deliveries from memory — duplicate, or
// conflict for another body — even with the database gone.
func TestRepeatedDeliveryNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orderID, _ := f.orderIn(models.OrderPending)
	body := testenv.SandboxBody(orderID, "tx-mem", models.EventPaid, price)
	send := func(b []byte) payments.Outcome {
		return f.pay.Receive(context.Background(), payments.Delivery{
			Provider: sandbox.Name, Header: testenv.SandboxHeaders("evt_mem", b, time.Now()),
			Body: bytesReader(b), ContentType: "application/json",
		})
	}
	if out := send(body); out.Result != "processed" {
		t.Fatalf("first delivery: %+v", out)
	}
	sqlDB, _ := f.db.DB()
	sqlDB.Close()
	if out := send(body); out.Status() != 200 || out.Result != "duplicate" {
		t.Fatalf("repeat with the database closed: %d %s %s", out.Status(), out.Result, out.Detail)
	}
	other := testenv.SandboxBody(orderID, "tx-mem", models.EventPaid, price+1)
	if out := send(other); out.Status() != 409 || out.Result != "conflict" {
		t.Fatalf("other body with the database closed: %d %s", out.Status(), out.Result)
	}
}

// deliverRefund sends a sandbox refund of amount named refundID, under a
// fresh event id.
func (f *fixture) deliverRefund(orderID, ref, refundID string, amount int64) payments.Outcome {
	f.t.Helper()
	f.n++
	body := fmt.Appendf(nil, `{"order_id":%q,"transaction_id":%q,"payment_status":"refunded","paid_amount":%d,"currency":"IDR","refund_id":%q}`,
		orderID, ref+"/"+orderID, amount, refundID)
	return f.pay.Receive(context.Background(), payments.Delivery{Provider: "sandbox", Body: bytesReader(body), ContentType: "application/json",
		Header: testenv.SandboxHeaders(fmt.Sprintf("evt_refund_%d", f.n), body, time.Now())})
}

// Sandbox refunds are amounts too: a partial refund makes the order
// partially_refunded; one refund told again under another event id adds
// nothing; a refund above what is left is refused and writes nothing;
// the refunds that reach the payment make it refunded.
func TestPartialRefundsAddUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, sku := f.orderIn(models.OrderPaid)
	before := f.snapshot(id, sku)
	steps := []struct {
		refundID string
		amount   int64
		result   string
		status   models.OrderStatus
		refunded int64
	}{
		{"r1", 20000, models.ResultProcessed, models.OrderPartiallyRefunded, 20000},
		{"r1", 20000, models.ResultStale, models.OrderPartiallyRefunded, 20000}, // the same refund, told again
		{"r2", 10000, models.ResultProcessed, models.OrderPartiallyRefunded, 30000},
		{"r3", 20001, models.ResultRejected, models.OrderPartiallyRefunded, 30000}, // 20000 is left
		{"r3", 20000, models.ResultProcessed, models.OrderRefunded, 50000},
		{"r4", 1, models.ResultStale, models.OrderRefunded, 50000}, // nothing is left to refund
	}
	for i, s := range steps {
		out := f.deliverRefund(id, "tx-pay", s.refundID, s.amount)
		var refunded int64
		f.db.Raw("SELECT refunded_amount FROM payments WHERE order_id = ?", id).Scan(&refunded)
		if out.Word() != s.result || out.Status() != map[bool]int{true: 422, false: 200}[s.result == models.ResultRejected] ||
			f.snapshot(id, sku).status != s.status || refunded != s.refunded {
			t.Errorf("step %d, %s of %d: %d %s (%s), order %s, refunded %d; want %s, %s, %d", i+1, s.refundID, s.amount,
				out.Status(), out.Result, out.Reason, f.snapshot(id, sku).status, refunded, s.result, s.status, s.refunded)
		}
	}
	if after := f.snapshot(id, sku); after.stock != before.stock || after.payments["tx-pay"] != models.PaymentRefunded {
		t.Errorf("after the refunds: %+v; want the stock kept and the payment refunded", after)
	}
	report, err := audit.WithoutJobs(f.db).Run(context.Background(), 0)
	if err != nil || !report.OK {
		t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// One refund told by 20 notifications at once, each under an event id of
// its own (a gateway's two notifications of a refund, a poll and a push):
// the order lock puts them one after the other, and the refund's unique
// key makes one of them record it.
func TestOneRefundToldAtOnceIsRecordedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := f.orderIn(models.OrderPaid)
	bodies := make([][]byte, 20)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"order_id":%q,"transaction_id":%q,"payment_status":"refunded","paid_amount":20000,"currency":"IDR","refund_id":"r-once"}`,
			id, "tx-pay/"+id)
	}
	results := make([]string, len(bodies))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range bodies {
		wg.Go(func() {
			<-start
			results[i] = f.pay.Receive(context.Background(), payments.Delivery{Provider: "sandbox", Body: bytesReader(bodies[i]),
				ContentType: "application/json", Header: testenv.SandboxHeaders(fmt.Sprintf("evt_once_%d", i), bodies[i], time.Now())}).Word()
		})
	}
	close(start)
	wg.Wait()
	counts := map[string]int{}
	for _, r := range results {
		counts[r]++
	}
	var rows, refunded int64
	f.db.Model(&models.Refund{}).Where("order_id = ?", id).Count(&rows)
	f.db.Raw("SELECT refunded_amount FROM payments WHERE order_id = ?", id).Scan(&refunded)
	if counts[models.ResultProcessed] != 1 || counts[models.ResultStale] != 19 || rows != 1 || refunded != 20000 {
		t.Errorf("20 notifications of one refund: %v, %d refund rows, %d refunded; want one processed, one row of 20000", counts, rows, refunded)
	}
}

// The tasks a payment writes carry the request id of the delivery that
// paid: their jobs' log lines name it (jobs.Job.RequestID).
func TestPaidTasksCarryTheRequestID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	body := testenv.SandboxBody(id, "tx-req/"+id, models.EventPaid, price)
	out := f.pay.Receive(context.Background(), payments.Delivery{Provider: "sandbox", Body: bytesReader(body), ContentType: "application/json",
		Header: testenv.SandboxHeaders("evt_req_"+id, body, time.Now()), RequestID: "req-paid-7"})
	if out.Result != models.ResultProcessed {
		t.Fatalf("paying: %+v", out)
	}
	var n int64
	f.db.Raw("SELECT count(*) FROM outbox_messages WHERE task_type <> 'order:expire' AND convert_from(payload, 'UTF8')::jsonb ->> 'request_id' = 'req-paid-7' AND convert_from(payload, 'UTF8') LIKE ?", "%"+id+"%").Scan(&n)
	if n != 2 {
		t.Errorf("%d of the invoice and email tasks carry the delivery's request id, want 2", n)
	}
}
