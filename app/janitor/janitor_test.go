package janitor_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/janitor"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The gateways are built from the registry by their variables, as
// serve builds them — this package names none of them (a gateway is
// deleted with its package and its line in the registry) — with their
// APIs at their emulations.
var vars = map[string]map[string]string{
	"stripe": {"STRIPE_SECRET_KEY": "sk_test_janitor_0123456789", "STRIPE_WEBHOOK_SECRET": "whsec_janitor_0123456789"},
	"xendit": {"XENDIT_SECRET_KEY": "xnd_development_janitor_0123456789", "XENDIT_CALLBACK_TOKEN": "xnd-callback-token-janitor-0123456789"},
}

// apiVariable is each gateway's API URL variable.
var apiVariable = map[string]string{"stripe": "STRIPE_API_URL", "xendit": "XENDIT_API_URL"}

// price is the order's total: one unit, in IDR.
const price = 100000

// env is a shop whose orders are paid and refunded through Stripe's and
// Xendit's emulations of their APIs, which keep their notifications
// instead of sending them — as if every one was lost — and a janitor of
// both gateways. Each API is reached over a line the test can cut
// (testenv.Line).
type env struct {
	t        *testing.T
	db       *gorm.DB
	orders   *orders.Service
	pay      *payments.Service
	refunds  *refunds.Service
	gateways map[string]payments.Gateway
	emulated map[string]*gatewaytest.Emulated
	lines    map[string]*testenv.Line
	pages    map[string]*gatewaycalls.Pages
	janitor  *janitor.Janitor
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	m := metrics.New()
	testenv.MustCreateProduct(t, db, "JN", price, 100)
	e := &env{t: t, db: db, orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}),
		gateways: map[string]payments.Gateway{}, emulated: map[string]*gatewaytest.Emulated{}, lines: map[string]*testenv.Line{},
		pages: map[string]*gatewaycalls.Pages{}}
	var providers []payments.Provider
	var refunders []gatewaycalls.Refunder
	for name := range vars {
		g := e.build(name, "http://127.0.0.1:1") // its emulation, served
		x := gatewaytest.Emulate(t, g.Emulator)
		e.emulated[name], e.lines[name] = x, testenv.NewLine(t, x.Base)
		g = e.build(name, e.lines[name].URL+g.Emulator.Path()) // its calls, to it
		e.gateways[name] = g
		providers, refunders = append(providers, g.Provider), append(refunders, g.Refunder)
		e.pages[name] = gatewaycalls.NewPages(db, g.Pages, log, time.Now, m)
		e.pages[name].CallTimeout = 500 * time.Millisecond
	}
	e.pay = payments.NewService(db, log, time.Now, m, jobs.Tasks{}, providers...)
	t.Cleanup(e.pay.Close)
	e.refunds = refunds.NewService(db, log, time.Now, m, e.pay, jobs.Tasks{}, refunders...)
	e.refunds.CallTimeout = 500 * time.Millisecond
	e.janitor = e.newJanitor()
	return e
}

// build is gateway name from the registry, its API at apiURL.
func (e *env) build(name, apiURL string) payments.Gateway {
	e.t.Helper()
	entry, ok := gateways.Find(name)
	if !ok {
		e.t.Skipf("no gateway %s in the registry", name)
	}
	g, err := entry.New(config.Env{Getenv: func(k string) string {
		if k == apiVariable[name] {
			return apiURL
		}
		return vars[name][k]
	}})
	if err != nil || g.Provider == nil || g.Refunder == nil || g.Pages == nil || g.Emulator == nil {
		e.t.Fatalf("the %s gateway: %+v, %v", name, g, err)
	}
	return g
}

// newJanitor is a janitor of e's gateways, as a worker of its own builds
// it.
func (e *env) newJanitor() *janitor.Janitor {
	j := janitor.New(e.db, testenv.Logger(e.t), time.Now, metrics.New(), e.refunds, gateways.Schedules(),
		e.gateways["stripe"].Pages, e.gateways["xendit"].Pages)
	j.CallTimeout = 500 * time.Millisecond
	return j
}

// wait is the wait of gateway name's schedule after its asks-th ask.
func wait(name string, asks int) time.Duration { return gateways.Schedules().Of(name).Wait(asks) }

// order makes a pending order of one unit.
func (e *env) order() *models.Order {
	e.t.Helper()
	o, err := e.orders.Create(context.Background(), orders.CreateRequest{CustomerEmail: "buyer@example.com",
		Items: []orders.ItemRequest{{SKU: "JN", Qty: 1}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// paid makes an order paid through provider: the gateway's emulation
// knows the charge, and its notification of the payment is applied.
func (e *env) paid(provider string) (*models.Order, string) {
	e.t.Helper()
	o := e.order()
	charge := map[string]string{"stripe": "pi_", "xendit": "inv-"}[provider] + o.ID
	e.emulated[provider].Paid(o.ID, charge, price, "IDR")
	h, body, err := payments.Notification(e.gateways[provider].Sender, payments.Fact{EventID: "evt_paid_" + o.ID, OrderID: o.ID,
		TransactionID: charge, Status: models.EventPaid, Amount: price, Currency: "IDR"}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	out := e.pay.Receive(context.Background(), payments.Delivery{Provider: provider, Header: h, Body: bytes.NewReader(body), ContentType: "application/json"})
	if out.Result != models.ResultProcessed {
		e.t.Fatalf("the %s payment of %s: %+v", provider, o.ID, out)
	}
	return o, charge
}

// askRefund asks for a refund of half of o's charge, as an admin does.
func (e *env) askRefund(o *models.Order) *models.GatewayRequest {
	e.t.Helper()
	var r *models.GatewayRequest
	err := store.Transaction(context.Background(), e.db, func(tx *gorm.DB) error {
		var err error
		r, err = e.refunds.RequestTx(tx, refunds.Request{OrderID: o.ID, Amount: "50000", Reason: "one mug broke", Admin: "admin@example.com"})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// row reads gateway request id.
func (e *env) row(id int64) models.GatewayRequest {
	e.t.Helper()
	var r models.GatewayRequest
	if err := e.db.Take(&r, id).Error; err != nil {
		e.t.Fatal(err)
	}
	return r
}

// due makes request id's next ask due now, and its call's lease, if it
// has one, over: the time the schedule would have let pass.
func (e *env) due(id int64) {
	e.t.Helper()
	err := e.db.Exec(`UPDATE gateway_requests SET next_ask_at = now() - interval '1 second',
		locked_until = CASE WHEN locked_until IS NULL THEN NULL ELSE now() - interval '1 second' END WHERE id = ?`, id).Error
	if err != nil {
		e.t.Fatal(err)
	}
}

// run runs the janitor once and returns its report.
func (e *env) run() janitor.Report {
	e.t.Helper()
	rep, err := e.janitor.Run(context.Background())
	if err != nil || rep.Failed > 0 {
		e.t.Fatalf("janitor run: %+v, %v", rep, err)
	}
	return rep
}

// refundState is the state of o's refunds rows, and its payment's
// refunded total.
func (e *env) refundState(o *models.Order) ([]models.RefundStatus, int64) {
	e.t.Helper()
	var rs []models.Refund
	var p models.Payment
	if err := e.db.Order("id").Find(&rs, "order_id = ?", o.ID).Error; err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Take(&p, "order_id = ?", o.ID).Error; err != nil {
		e.t.Fatal(err)
	}
	var st []models.RefundStatus
	for _, r := range rs {
		st = append(st, r.Status)
	}
	return st, p.RefundedAmount
}

// scheduled checks that r is unknown, asked asks times, its next ask
// about wait from now.
func scheduled(t *testing.T, what string, r models.GatewayRequest, asks int, wait time.Duration) {
	t.Helper()
	if r.UnknownSince == nil || r.NextAskAt == nil || r.Asks != asks {
		t.Fatalf("%s: %+v; want unknown, asked %d times, its next ask set", what, r, asks)
	}
	if in := time.Until(*r.NextAskAt); in < wait-time.Minute || in > wait+time.Minute {
		t.Errorf("%s: next ask in %v, want about %v", what, in, wait)
	}
}

// ended checks that r's schedule has ended after asks asks.
func ended(t *testing.T, what string, r models.GatewayRequest, asks int) {
	t.Helper()
	if r.UnknownSince != nil || r.NextAskAt != nil || r.Asks != asks {
		t.Errorf("%s: %+v; want its schedule ended after %d asks", what, r, asks)
	}
}

// A refund whose answer is unknown is asked about on Stripe's schedule:
// not before its first ask is due; then sent again with its key, once
// per due time — Stripe failing the first ask too: still unknown, the
// next ask after Stripe's first wait — until Stripe answers, which is
// final: the janitor asks no more. One refund at the gateway, counted
// once.
func TestJanitorSendsAnUnansweredRefundAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o, _ := e.paid("stripe")
	r := e.askRefund(o)
	e.emulated["stripe"].FailNext(1)
	if _, err := e.refunds.Send(context.Background(), r.ID, "job"); !errors.Is(err, refunds.ErrUnanswered) {
		t.Fatalf("Stripe's 500: %v, want unanswered", err)
	}
	scheduled(t, "after Stripe's 500", e.row(r.ID), 0, gatewaycalls.FirstAsk)
	if rep := e.run(); rep.Due != 0 {
		t.Fatalf("a run before the first ask is due: %+v; want nothing asked", rep)
	}

	e.due(r.ID)
	e.emulated["stripe"].FailNext(1)
	if rep := e.run(); rep.Due != 1 || rep.Results[janitor.Unknown] != 1 {
		t.Fatalf("the first ask, Stripe failing: %+v; want one ask, still unknown", rep)
	}
	got := e.row(r.ID)
	if got.Phase != models.GatewaySent {
		t.Fatalf("after an unanswered ask: %s, want sent", got.Phase)
	}
	scheduled(t, "after an unanswered ask", got, 1, wait("stripe", 1))
	if rep := e.run(); rep.Due != 0 {
		t.Fatalf("a run before the second ask is due: %+v", rep)
	}

	e.due(r.ID)
	if rep := e.run(); rep.Results[janitor.Final] != 1 {
		t.Fatalf("the second ask: %+v; want final", rep)
	}
	got = e.row(r.ID)
	if got.Phase != models.GatewayDone || !strings.HasPrefix(got.ProviderObjectID, "re_") {
		t.Fatalf("after the second ask: %+v; want done with Stripe's refund", got)
	}
	ended(t, "once Stripe answered", got, 2)
	if states, refunded := e.refundState(o); len(states) != 1 || states[0] != models.RefundSucceeded || refunded != 50000 {
		t.Errorf("refunds %v, %d refunded; want the one refund Stripe made, counted once", states, refunded)
	}
	if rep := e.run(); rep.Due != 0 {
		t.Errorf("a run after the final answer: %+v; want nothing asked", rep)
	}
}

// A refund Stripe made and whose answer was lost (Stripe held it until
// the call gave up) is sent again with its key at its first ask, and
// Stripe's answer is the refund it made then: one refund.
func TestJanitorSendsALostRefundAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o, _ := e.paid("stripe")
	r := e.askRefund(o)
	e.lose(r)
	e.due(r.ID)
	if rep := e.run(); rep.Results[janitor.Final] != 1 {
		t.Fatalf("the first ask: %+v; want final", rep)
	}
	got := e.row(r.ID)
	if got.Phase != models.GatewayDone || got.Attempts != 2 {
		t.Fatalf("after the first ask: %+v; want done after a second call", got)
	}
	ended(t, "once Stripe answered", got, 1)
	if states, refunded := e.refundState(o); len(states) != 1 || refunded != 50000 {
		t.Errorf("refunds %v, %d refunded; want the one refund Stripe made, counted once", states, refunded)
	}
}

// lose sends refund r, which Stripe makes, and loses Stripe's answer.
func (e *env) lose(r *models.GatewayRequest) {
	e.t.Helper()
	err := gatewaytest.Late(e.t, e.emulated["stripe"], "Stripe refunded and holds its answer", func(ctx context.Context) error {
		_, err := e.refunds.Send(ctx, r.ID, "job")
		return err
	})
	if !errors.Is(err, refunds.ErrUnanswered) {
		e.t.Fatalf("the lost answer: %v, want unanswered", err)
	}
}

// A refund Xendit accepted (PENDING) and whose callback never came is
// looked up on Xendit's schedule until Xendit says what became of it:
// Xendit out of reach at the first look-up leaves it pending and asked
// once; the second finds it SUCCEEDED, which is applied as its callback would be.
func TestJanitorAsksAPendingRefundUntilItSettles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o, _ := e.paid("xendit")
	r := e.askRefund(o)
	if _, err := e.refunds.Send(context.Background(), r.ID, "job"); err != nil {
		t.Fatal(err)
	}
	got := e.row(r.ID)
	if got.Phase != models.GatewayDone {
		t.Fatalf("after Xendit's answer: %s, want done", got.Phase)
	}
	scheduled(t, "accepted, pending", got, 0, gatewaycalls.FirstAsk)
	if states, _ := e.refundState(o); len(states) != 1 || states[0] != models.RefundPending {
		t.Fatalf("refunds %v, want one pending", states)
	}

	e.due(r.ID)
	e.lines["xendit"].Cut(true)
	if rep := e.run(); rep.Results[janitor.Unknown] != 1 {
		t.Fatalf("the first look-up, Xendit out of reach: %+v; want still unknown", rep)
	}
	e.lines["xendit"].Cut(false)
	scheduled(t, "after an unanswered look-up", e.row(r.ID), 1, wait("xendit", 1))
	if states, _ := e.refundState(o); len(states) != 1 || states[0] != models.RefundPending {
		t.Fatalf("refunds %v, want still one pending", states)
	}

	e.due(r.ID)
	if rep := e.run(); rep.Results[janitor.Final] != 1 {
		t.Fatalf("the second look-up: %+v; want final", rep)
	}
	ended(t, "once Xendit said", e.row(r.ID), 2)
	if states, refunded := e.refundState(o); len(states) != 1 || states[0] != models.RefundSucceeded || refunded != 50000 {
		t.Errorf("refunds %v, %d refunded; want the refund succeeded, counted once", states, refunded)
	}
}

// A refund Stripe accepted (pending) and then failed, whose refund.failed
// never came: the janitor's look-up finds it failed, and the failure is
// applied as the event would apply it — the charge gets the amount back,
// the order is paid again, the refund request fails.
func TestJanitorFindsAPendingRefundFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o, _ := e.paid("stripe")
	r := e.askRefund(o)
	e.emulated["stripe"].FailRefundsLater(1)
	if _, err := e.refunds.Send(context.Background(), r.ID, "job"); err != nil {
		t.Fatal(err)
	}
	if states, refunded := e.refundState(o); len(states) != 1 || states[0] != models.RefundPending || refunded != 50000 {
		t.Fatalf("refunds %v, %d refunded; want one pending, counted", states, refunded)
	}
	e.due(r.ID)
	if rep := e.run(); rep.Results[janitor.Final] != 1 {
		t.Fatalf("the look-up: %+v; want final", rep)
	}
	got := e.row(r.ID)
	if got.Phase != models.GatewayFailed || got.LastError != payments.FailedAfterAcceptance {
		t.Errorf("the request: %s, %q; want failed after acceptance", got.Phase, got.LastError)
	}
	ended(t, "once Stripe said it failed", got, 1)
	var after models.Order
	e.db.Take(&after, "id = ?", o.ID)
	if states, refunded := e.refundState(o); len(states) != 1 || states[0] != models.RefundFailed || refunded != 0 || after.Status != models.OrderPaid {
		t.Errorf("refunds %v, %d refunded, order %s; want the refund failed, nothing refunded, the order paid", states, refunded, after.Status)
	}
}

// pageItems are the items of a one-unit order, as the shop sends them.
var pageItems = []gatewaycalls.PageItem{{SKU: "JN", Name: "JN", Qty: 1, UnitPrice: price}}

// openLost opens o's page at provider and loses the answer: the gateway
// acted and held its answer until the press gave up.
func (e *env) openLost(provider string, o *models.Order) models.GatewayRequest {
	e.t.Helper()
	err := gatewaytest.Late(e.t, e.emulated[provider], "the gateway made the page and holds its answer", func(ctx context.Context) error {
		_, err := e.pages[provider].Open(ctx, o, pageItems, "https://shop.example/orders/"+o.ID+"?t=tok")
		return err
	})
	if models.ErrorCode(err) != models.EUnavailable {
		e.t.Fatalf("the lost page: %v, want unavailable", err)
	}
	var r models.GatewayRequest
	if err := e.db.Take(&r, "order_id = ? AND kind = ?", o.ID, models.GatewayCreatePayment).Error; err != nil {
		e.t.Fatal(err)
	}
	return r
}

// A payment page whose answer was lost is looked up, not opened again
// (a repeat would need the customer's token): Stripe's session, found by
// its order, makes the request done with its page. A Xendit invoice that
// was never made (Xendit failed before it acted) is found missing: the
// request is planned again, and the customer's next Pay opens it.
func TestJanitorLooksUpALostPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := e.order()
	r := e.openLost("stripe", o)
	scheduled(t, "the lost page", r, 0, gatewaycalls.FirstAsk)
	e.due(r.ID)
	if rep := e.run(); rep.Results[janitor.Final] != 1 {
		t.Fatalf("the look-up: %+v; want final", rep)
	}
	got := e.row(r.ID)
	if got.Phase != models.GatewayDone || !strings.HasPrefix(got.ProviderObjectID, "cs_") || got.RedirectURL == "" || strings.Contains(got.RedirectURL, "t=tok") {
		t.Errorf("the page found: %+v; want done with the session, its URL without the token", got)
	}
	ended(t, "the page found", got, 1)

	o2 := e.order()
	e.emulated["xendit"].FailNext(1)
	if _, err := e.pages["xendit"].Open(context.Background(), o2, pageItems, "https://shop.example/orders/"+o2.ID+"?t=tok"); models.ErrorCode(err) != models.EUnavailable {
		t.Fatalf("Xendit failing: %v, want unavailable", err)
	}
	var r2 models.GatewayRequest
	e.db.Take(&r2, "order_id = ?", o2.ID)
	e.due(r2.ID)
	if rep := e.run(); rep.Results[janitor.Final] != 1 {
		t.Fatalf("the look-up of the invoice never made: %+v; want final", rep)
	}
	got = e.row(r2.ID)
	if got.Phase != models.GatewayPlanned || !strings.Contains(got.LastError, "no page") {
		t.Errorf("the invoice never made: %s, %q; want planned again, saying why", got.Phase, got.LastError)
	}
	ended(t, "the invoice never made", got, 1)
	if page, err := e.pages["xendit"].Open(context.Background(), o2, pageItems, "https://shop.example/orders/"+o2.ID+"?t=tok"); err != nil || page.ObjectID == "" {
		t.Errorf("the next Pay: %+v, %v; want the invoice", page, err)
	}
}

// A lost page of an order that is over needs no asking: the janitor
// ends its schedule and says why. A page at a gateway that cannot be
// asked for it (Midtrans's Snap) is not asked about, and not counted:
// the janitor looks again after the gateway's wait.
func TestJanitorAsksNothingItNeedNot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := e.order()
	r := e.openLost("stripe", o)
	if _, err := e.orders.Cancel(context.Background(), o.ID, "the customer changed their mind"); err != nil {
		t.Fatal(err)
	}
	e.due(r.ID)
	if rep := e.run(); rep.Results[janitor.Known] != 1 {
		t.Fatalf("the page of a cancelled order: %+v; want known, nothing asked", rep)
	}
	got := e.row(r.ID)
	ended(t, "the page of a cancelled order", got, 0)
	if !strings.Contains(got.LastError, "cancelled, and needs no page") {
		t.Errorf("its last error: %q", got.LastError)
	}

	o2 := e.order()
	past := time.Now().Add(-time.Minute)
	snap := models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: o2.ID, Provider: "midtrans", IdempotencyKey: o2.ID,
		Amount: price, Currency: "IDR", Phase: models.GatewaySent, Attempts: 1, LockedUntil: &past, UnknownSince: &past, NextAskAt: &past}
	if err := e.db.Create(&snap).Error; err != nil {
		t.Fatal(err)
	}
	if rep := e.run(); rep.Results[janitor.CannotAsk] != 1 {
		t.Fatalf("a Snap page: %+v; want cannot ask", rep)
	}
	scheduled(t, "a Snap page", e.row(snap.ID), 0, wait("midtrans", 1))
}

// Four janitors at once — four workers' runs of the same minute —
// over the same three lost refunds: each refund is asked about once,
// sent again once, and counted once.
func TestJanitorsAtOnceAskOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []int64
	var paid []*models.Order
	for range 3 {
		o, _ := e.paid("stripe")
		r := e.askRefund(o)
		e.lose(r)
		e.due(r.ID)
		ids, paid = append(ids, r.ID), append(paid, o)
	}
	const n = 4
	janitors := make([]*janitor.Janitor, n)
	for i := range janitors {
		janitors[i] = e.newJanitor()
	}
	start := make(chan struct{})
	reports := make([]janitor.Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			reports[i], errs[i] = janitors[i].Run(context.Background())
		})
	}
	close(start)
	wg.Wait()
	final := 0
	for i := range n {
		if errs[i] != nil || reports[i].Failed > 0 {
			t.Errorf("janitor %d: %+v, %v", i, reports[i], errs[i])
		}
		final += reports[i].Results[janitor.Final]
	}
	if final != len(ids) {
		t.Errorf("%d final answers in all, want one per refund (%d): %+v", final, len(ids), reports)
	}
	for i, id := range ids {
		got := e.row(id)
		if got.Phase != models.GatewayDone || got.Asks != 1 || got.Attempts != 2 {
			t.Errorf("refund %d: %s after %d asks and %d calls; want done, asked once, sent once more", id, got.Phase, got.Asks, got.Attempts)
		}
		if states, refunded := e.refundState(paid[i]); len(states) != 1 || refunded != 50000 {
			t.Errorf("order %s: refunds %v, %d refunded; want one, counted once", paid[i].ID, states, refunded)
		}
	}
}

// "Ask now" asks about a lost refund at once, whether or not its next
// ask is due, by the janitor's own code; asked again once it is known,
// it asks nothing.
func TestAskNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o, _ := e.paid("stripe")
	r := e.askRefund(o)
	e.lose(r)
	// Its lease over, its next ask still a minute away.
	e.db.Exec("UPDATE gateway_requests SET locked_until = now() - interval '1 second' WHERE id = ?", r.ID)
	a, err := e.janitor.AskNow(context.Background(), r.ID, "req-admin")
	if err != nil || a.Result != janitor.Final || a.Request.Phase != models.GatewayDone || a.Request.Asks != 1 {
		t.Fatalf("ask now: %+v, %v; want final, done, asked once", a, err)
	}
	a, err = e.janitor.AskNow(context.Background(), r.ID, "req-admin")
	if err != nil || a.Result != janitor.Known || a.Request.Asks != 1 || a.Request.Attempts != 2 {
		t.Errorf("ask now once known: %+v, %v; want known, nothing asked", a, err)
	}
	if _, err := e.janitor.AskNow(context.Background(), 999999, "req-admin"); models.ErrorCode(err) != models.ENotFound {
		t.Errorf("ask now of no request: %v, want not found", err)
	}
}

// The audit's check 10 reports an outcome unknown past the end of its
// gateway's schedule — a lost refund, a refund pending at the gateway —
// and is green again once the janitor has asked and the gateway said.
func TestAuditReportsUnknownsPastTheirSchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o, _ := e.paid("stripe")
	lost := e.askRefund(o)
	e.lose(lost)
	o2, _ := e.paid("xendit")
	pending := e.askRefund(o2)
	if _, err := e.refunds.Send(context.Background(), pending.ID, "job"); err != nil {
		t.Fatal(err)
	}
	a := audit.New(e.db).WithSchedules(gateways.Schedules())
	unknowns := func() []audit.Violation {
		t.Helper()
		rep, err := a.Run(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		var vs []audit.Violation
		for _, v := range rep.Violations {
			if v.Check == "unknown outcomes" {
				vs = append(vs, v)
			}
		}
		return vs
	}
	if vs := unknowns(); len(vs) != 0 {
		t.Fatalf("unknowns within their schedules: %+v; want none reported", vs)
	}
	// A week and more later, neither asked about: past both schedules' ends.
	if err := e.db.Exec("UPDATE gateway_requests SET unknown_since = now() - interval '10 days' WHERE id IN ?", []int64{lost.ID, pending.ID}).Error; err != nil {
		t.Fatal(err)
	}
	vs := unknowns()
	if len(vs) != 2 {
		t.Fatalf("reported %+v; want the lost refund and the pending one", vs)
	}
	for _, v := range vs {
		if !strings.Contains(v.Detail, "past the end of its schedule") || (v.Ref != "order:"+o.ID && v.Ref != "order:"+o2.ID) {
			t.Errorf("the violation %+v does not say what and whose", v)
		}
	}
	for _, id := range []int64{lost.ID, pending.ID} {
		e.db.Exec("UPDATE gateway_requests SET locked_until = now() - interval '1 second' WHERE id = ? AND locked_until IS NOT NULL", id)
		if a, err := e.janitor.AskNow(context.Background(), id, "req-admin"); err != nil || a.Result != janitor.Final {
			t.Fatalf("ask now %d: %+v, %v; want final", id, a, err)
		}
	}
	if vs := unknowns(); len(vs) != 0 {
		t.Errorf("after the gateways said: %+v; want none reported", vs)
	}
}
