package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// Price is the price of the one unit every Pipeline order is of, in
// rupiah.
const Price = 50000

// Pipeline is Sekali's payments pipeline with a gateway's receiving
// adapter, on a database of its own (real PostgreSQL, dropped when the
// test ends): what a gateway's tests send its notifications through, in
// its own package.
type Pipeline struct {
	T      *testing.T
	DB     *gorm.DB
	Orders *orders.Service
	Pay    *payments.Service
	n      atomic.Int64
}

// NewPipeline starts the pipeline of providers on a fresh database.
func NewPipeline(t *testing.T, providers ...payments.Provider) *Pipeline {
	t.Helper()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, providers...)
	t.Cleanup(pay.Close)
	return &Pipeline{T: t, DB: db, Orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), Pay: pay}
}

// Delivery is one HTTP delivery to a provider.
type Delivery struct {
	Provider string
	Header   http.Header
	Body     []byte
}

// Send delivers d, as POST /callbacks/{provider} does.
func (p *Pipeline) Send(d Delivery) payments.Outcome {
	p.T.Helper()
	h := d.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return p.Pay.Receive(context.Background(), payments.Delivery{Provider: d.Provider, Header: h, Body: bytes.NewReader(d.Body), ContentType: "application/json"})
}

// Together delivers n copies of d at once, released together, and counts
// their outcomes by word (processed, duplicate, …).
func (p *Pipeline) Together(d Delivery, n int) map[string]int {
	p.T.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]string, n)
	for i := range results {
		wg.Go(func() {
			<-start
			results[i] = p.Send(d).Word()
		})
	}
	close(start)
	wg.Wait()
	counts := map[string]int{}
	for _, r := range results {
		counts[r]++
	}
	return counts
}

// Unconfirmed expects d, a notification its gateway's API does not
// confirm, answered 200 unconfirmed; what names it in the failure.
func (p *Pipeline) Unconfirmed(what string, d Delivery) {
	p.T.Helper()
	if out := p.Send(d); out.Status() != 200 || out.Result != models.ResultUnconfirmed {
		p.T.Errorf("%s: %d %s (%s), want 200 unconfirmed", what, out.Status(), out.Result, out.Detail)
	}
}

// Retried expects d, a paid notification of order orderID delivered
// during an outage of its gateway's API (outage starts it and returns its
// end), answered 503 with nothing written of the order — the gateway
// sends it again — and its retry once the API answers processed: the
// order paid.
func (p *Pipeline) Retried(what, orderID string, d Delivery, outage func() (end func())) {
	p.T.Helper()
	end := outage()
	out := p.Send(d)
	end()
	var pays int64
	p.DB.Model(&models.Payment{}).Where("order_id = ?", orderID).Count(&pays)
	if callbacks := p.Callbacks(orderID); out.Status() != 503 || callbacks != 0 || pays != 0 {
		p.T.Errorf("%s: %d %s, %d callbacks and %d payments written; want 503 and nothing", what, out.Status(), out.Result, callbacks, pays)
	}
	if out := p.Send(d); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		p.T.Errorf("%s, the retry with the API answering: %s %s (%s), want processed, paid", what, out.Result, out.OrderStatus, out.Detail)
	}
}

// Order creates a pending order of one unit of a fresh product (stock 2,
// at Price). It returns the order id and the SKU.
func (p *Pipeline) Order() (string, string) {
	p.T.Helper()
	sku := fmt.Sprintf("GW-%d", p.n.Add(1))
	testenv.MustCreateProduct(p.T, p.DB, sku, Price, 2)
	o, err := p.Orders.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "gw@example.com", Items: []orders.ItemRequest{{SKU: sku, Qty: 1}},
	})
	if err != nil {
		p.T.Fatal(err)
	}
	return o.ID, sku
}

// State is what a notification may change of an order.
type State struct {
	Status   models.OrderStatus
	Payments map[string]models.PaymentStatus // by provider reference
	Stock    int64
	Outbox   int64 // its tasks, but its expiry
}

// State is what the database holds of order orderID of product sku.
func (p *Pipeline) State(orderID, sku string) State {
	p.T.Helper()
	var o models.Order
	var pr models.Product
	var pays []models.Payment
	s := State{Payments: map[string]models.PaymentStatus{}}
	if err := p.DB.Take(&o, "id = ?", orderID).Error; err != nil {
		p.T.Fatal(err)
	}
	p.DB.Take(&pr, "sku = ?", sku)
	p.DB.Find(&pays, "order_id = ?", orderID)
	p.DB.Raw("SELECT count(*) FROM outbox_messages WHERE convert_from(payload, 'UTF8') LIKE ? AND task_type <> 'order:expire'", "%"+orderID+"%").Scan(&s.Outbox)
	for _, pay := range pays {
		s.Payments[pay.ProviderReference] = pay.Status
	}
	s.Status, s.Stock = o.Status, pr.Stock
	return s
}

// Money is what the database holds of an order's charge and refunds.
type Money struct {
	Order    models.OrderStatus
	Payment  models.PaymentStatus
	Refunded int64
	Refunds  map[string]models.RefundStatus // by refund key
	Reasons  map[string]string              // a refund's failure reason, by refund key
	Emails   int64                          // refund_succeeded email tasks
	Stock    int64
}

// Money is what the database holds of order orderID's first charge and
// its refunds.
func (p *Pipeline) Money(orderID, sku string) Money {
	p.T.Helper()
	m := Money{Refunds: map[string]models.RefundStatus{}, Reasons: map[string]string{}}
	var o models.Order
	var pay models.Payment
	var pr models.Product
	p.DB.Take(&o, "id = ?", orderID)
	p.DB.Where("order_id = ?", orderID).Order("id").Take(&pay)
	p.DB.Take(&pr, "sku = ?", sku)
	m.Order, m.Payment, m.Refunded, m.Stock = o.Status, pay.Status, pay.RefundedAmount, pr.Stock
	var rows []models.Refund
	p.DB.Find(&rows, "order_id = ?", orderID)
	for _, r := range rows {
		m.Refunds[r.RefundKey], m.Reasons[r.RefundKey] = r.Status, r.FailureReason
	}
	p.DB.Raw("SELECT count(*) FROM outbox_messages WHERE task_type = 'email:send' AND convert_from(payload, 'UTF8')::jsonb ->> 'template' = 'refund_succeeded' AND convert_from(payload, 'UTF8')::jsonb ->> 'order_id' = ?", orderID).Scan(&m.Emails)
	return m
}

// Callbacks is how many callbacks of order orderID are recorded.
func (p *Pipeline) Callbacks(orderID string) int64 {
	p.T.Helper()
	var n int64
	p.DB.Model(&models.PaymentCallback{}).Where("order_id = ?", orderID).Count(&n)
	return n
}

// Audit fails the test unless the audit finds the database consistent.
func (p *Pipeline) Audit() {
	p.T.Helper()
	report, err := audit.WithoutJobs(p.DB).Run(context.Background(), 0)
	if err != nil || !report.OK {
		p.T.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// Rewrite is d with its body, a JSON object, changed by change; the
// header is d's (a body the gateway signs must be signed again).
func Rewrite(d Delivery, change func(obj map[string]any)) Delivery {
	dec := json.NewDecoder(bytes.NewReader(d.Body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		panic(fmt.Sprintf("gatewaytest.Rewrite: %v: %s", err, d.Body))
	}
	change(obj)
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return Delivery{Provider: d.Provider, Header: d.Header.Clone(), Body: b}
}

// WithMembers is d with members set in its body's top-level object.
func WithMembers(d Delivery, members map[string]any) Delivery {
	return Rewrite(d, func(obj map[string]any) { maps.Copy(obj, members) })
}

// Notifications are one gateway's notifications, as AppliesOnce sends
// them.
type Notifications struct {
	Name string
	// Paid is a notification that pays orderID's charge ref with amount
	// (Sekali's minor units) in currency; variant 0 and 1 are the two
	// notifications the gateway sends for one payment.
	Paid func(orderID, ref string, amount int64, currency string, variant int) Delivery
	// Changed is d under its key with another body, genuine (signed
	// again where the gateway signs the body).
	Changed func(d Delivery) Delivery
	// Forged is a paid notification with a wrong signature or token.
	Forged func(orderID, ref string) Delivery
	// Ignored is a notification the shop does not handle.
	Ignored func(orderID string) Delivery
}

// AppliesOnce checks a gateway's notifications through the one pipeline
// p: a payment applies once, its repeat is a duplicate, the same key with
// another body a conflict, a forgery is refused, an event the shop does
// not handle is ignored, a wrong amount or currency is rejected, 50
// concurrent copies make one effect, and the two notifications a gateway
// sends for one payment converge in either order; the audit finds the
// database consistent after. p is t's own (NewPipeline(t, …)).
func AppliesOnce(t *testing.T, p *Pipeline, g Notifications) {
	t.Helper()
	id, _ := p.Order()
	ref := "ref-" + g.Name + "-" + id
	pay := g.Paid(id, ref, Price, "IDR", 0)
	if out := p.Send(pay); out.Status() != 200 || out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("valid: %d %s %s (%s)", out.Status(), out.Result, out.OrderStatus, out.Detail)
	}
	if out := p.Send(pay); out.Result != models.ResultDuplicate {
		t.Errorf("the same notification again: %s, want duplicate", out.Result)
	}
	if out := p.Send(g.Changed(pay)); out.Status() != 409 || out.Result != models.ResultConflict {
		t.Errorf("the same key with another body: %d %s, want 409 conflict", out.Status(), out.Result)
	}
	if out := p.Send(g.Forged(id, ref)); out.Status() != 401 {
		t.Errorf("a forgery: %d %s, want 401", out.Status(), out.Result)
	}
	out := p.Send(g.Ignored(id))
	if out.Status() != 200 || out.Result != models.ResultIgnored {
		t.Errorf("an event the shop does not handle: %d %s, want 200 ignored", out.Status(), out.Result)
	}

	// A wrong amount or currency is rejected, and changes nothing.
	other, _ := p.Order()
	if out := p.Send(g.Paid(other, "ref-amount-"+other, Price+1, "IDR", 0)); out.Status() != 422 || out.Reason != models.ReasonAmountMismatch {
		t.Errorf("wrong amount: %d %s %s", out.Status(), out.Result, out.Reason)
	}
	if out := p.Send(g.Paid(other, "ref-currency-"+other, Price, "USD", 0)); out.Status() != 422 || out.Reason != models.ReasonCurrencyMismatch {
		t.Errorf("wrong currency: %d %s %s", out.Status(), out.Result, out.Reason)
	}

	// 50 copies at once: one effect.
	storm, sku := p.Order()
	if counts := p.Together(g.Paid(storm, "ref-storm-"+storm, Price, "IDR", 0), 50); counts[models.ResultProcessed] != 1 || counts[models.ResultDuplicate] != 49 {
		t.Errorf("50 concurrent copies: %v, want 1 processed and 49 duplicate", counts)
	}
	if s := p.State(storm, sku); s.Status != models.OrderPaid || len(s.Payments) != 1 {
		t.Errorf("after the storm: %+v, want paid with one payment", s)
	}

	// The two notifications of one payment, in either order: the first
	// pays, the second is stale.
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		o, sku := p.Order()
		r := fmt.Sprintf("ref-seq-%d-%s", order[0], o)
		first, second := p.Send(g.Paid(o, r, Price, "IDR", order[0])), p.Send(g.Paid(o, r, Price, "IDR", order[1]))
		if first.Result != models.ResultProcessed || second.Result != models.ResultStale {
			t.Errorf("notifications %v: %s then %s, want processed then stale (%s)", order, first.Result, second.Result, second.Detail)
		}
		if s := p.State(o, sku); s.Status != models.OrderPaid || len(s.Payments) != 1 {
			t.Errorf("notifications %v: %+v, want paid with one payment", order, s)
		}
	}

	// The ignored delivery's row is written just after its answer.
	testenv.Eventually(t, "one ignored delivery row of "+g.Name, func() bool {
		var n int64
		p.DB.Model(&models.CallbackDelivery{}).Where("outcome = 'ignored' AND provider = ? AND callback_id IS NULL", g.Name).Count(&n)
		return n == 1
	})
	p.Audit()
}
