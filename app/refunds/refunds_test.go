package refunds_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// price is the order's total: one unit.
const price = 100000

// fakeGateway refunds as a gateway that honours its idempotency key
// would: one refund per key, however often it is asked. answer, when
// set, decides a call's outcome after the gateway acted (a lost answer),
// or before (refuse).
type fakeGateway struct {
	mu      sync.Mutex
	calls   atomic.Int64
	refunds map[string]gatewaycalls.Refunded
	keys    []string
	answer  func(call int64) error
	refuse  error
	down    error         // when set, a call fails with it before the gateway acts (a 500)
	gate    chan struct{} // when set, a call waits for it to close
}

func (g *fakeGateway) Provider() string { return sandbox.Name }

func (g *fakeGateway) Refund(_ context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.Refunded, error) {
	n := g.calls.Add(1)
	if g.gate != nil {
		<-g.gate
	}
	if g.refuse != nil {
		return gatewaycalls.Refunded{}, g.refuse
	}
	if g.down != nil {
		return gatewaycalls.Refunded{}, g.down
	}
	g.mu.Lock()
	if g.refunds == nil {
		g.refunds = map[string]gatewaycalls.Refunded{}
	}
	g.keys = append(g.keys, r.Key)
	a, ok := g.refunds[r.Key]
	if !ok {
		a = gatewaycalls.Refunded{ObjectID: fmt.Sprintf("rf-%d", len(g.refunds)+1), RefundKey: r.Key, Amount: r.Amount}
		g.refunds[r.Key] = a
	}
	g.mu.Unlock()
	if g.answer != nil {
		if err := g.answer(n); err != nil {
			return gatewaycalls.Refunded{}, err // it refunded all the same
		}
	}
	return a, nil
}

// made is how many refunds the gateway made.
func (g *fakeGateway) made() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.refunds)
}

type env struct {
	t       *testing.T
	db      *gorm.DB
	gw      *fakeGateway
	pay     *payments.Service
	refunds *refunds.Service
	metrics *metrics.Set
	orderID string
}

// newEnv has an order paid through the sandbox, and the refunds of its
// charge through a fake gateway.
func newEnv(t *testing.T) *env {
	t.Helper()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	testenv.MustCreateProduct(t, db, "RF", price, 10)
	o, err := orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}).Create(context.Background(),
		orders.CreateRequest{CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: "RF", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New() // one Set for the payments and the refunds, as serve builds it
	pay := payments.NewService(db, log, time.Now, m, jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	t.Cleanup(pay.Close)
	e := &env{t: t, db: db, gw: &fakeGateway{}, pay: pay, metrics: m, orderID: o.ID}
	e.refunds = refunds.NewService(db, log, time.Now, m, pay, jobs.Tasks{}, e.gw)
	e.refunds.CallTimeout = 200 * time.Millisecond // a lease of 400 ms
	e.notify("evt_paid_"+o.ID, testenv.SandboxBody(o.ID, e.charge(), models.EventPaid, price))
	return e
}

// charge is the sandbox's reference of the order's payment.
func (e *env) charge() string { return "tx-" + e.orderID }

// notify delivers a signed sandbox notification.
func (e *env) notify(eventID string, body []byte) payments.Outcome {
	e.t.Helper()
	out := e.pay.Receive(context.Background(), payments.Delivery{Provider: sandbox.Name,
		Header: testenv.SandboxHeaders(eventID, body, time.Now()), Body: bytes.NewReader(body), ContentType: "application/json"})
	if out.Status() != 200 {
		e.t.Fatalf("notification %s: %+v", eventID, out)
	}
	return out
}

// ask asks for a refund of the order's charge in a transaction of its own.
func (e *env) ask(amount, reason string) (*models.GatewayRequest, error) {
	return e.request(refunds.Request{OrderID: e.orderID, Amount: amount, Reason: reason, Admin: "admin@example.com"})
}

// request asks for refund r in a transaction of its own.
func (e *env) request(r refunds.Request) (*models.GatewayRequest, error) {
	var rec *models.GatewayRequest
	err := store.Transaction(context.Background(), e.db, func(tx *gorm.DB) error {
		var err error
		rec, err = e.refunds.RequestTx(tx, r)
		return err
	})
	return rec, err
}

func (e *env) mustAsk(amount string) *models.GatewayRequest {
	e.t.Helper()
	r, err := e.ask(amount, "damaged in transit")
	if err != nil {
		e.t.Fatalf("refund %q: %v", amount, err)
	}
	return r
}

// state is the order's status, the payment's refunded total and the
// number of refunds rows.
func (e *env) state() (models.OrderStatus, int64, int64) {
	e.t.Helper()
	var o models.Order
	var p models.Payment
	var n int64
	if err := e.db.Take(&o, "id = ?", e.orderID).Error; err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Take(&p, "order_id = ?", e.orderID).Error; err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Model(&models.Refund{}).Where("order_id = ?", e.orderID).Count(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return o.Status, p.RefundedAmount, n
}

// Half, then the rest: each refund is one call and one refund row; the
// order is partially_refunded, then refunded. Sending a refund that is
// done again asks nothing.
func TestRefundHalfThenTheRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.mustAsk("50000")
	if first.Phase != models.GatewayPlanned || first.Amount != 50000 || first.IdempotencyKey != e.orderID+"-R1" ||
		first.Reason != "damaged in transit" || first.RequestedBy != "admin@example.com" {
		t.Fatalf("refund record %+v", first)
	}
	var queued int64
	e.db.Model(&models.OutboxMessage{}).Where("task_type = ? AND task_id = ?", jobs.TaskRefundSend, fmt.Sprintf("%s:%d", jobs.TaskRefundSend, first.ID)).Count(&queued)
	if queued != 1 {
		t.Fatalf("%d refund:send tasks in the outbox, want 1", queued)
	}
	done, err := e.refunds.Send(context.Background(), first.ID, "req-test")
	if err != nil || done.Phase != models.GatewayDone || done.ProviderObjectID != "rf-1" {
		t.Fatalf("send: %+v, %v", done, err)
	}
	if status, refunded, n := e.state(); status != models.OrderPartiallyRefunded || refunded != 50000 || n != 1 {
		t.Fatalf("after half: %s, refunded %d, %d refunds; want partially_refunded, 50000, 1", status, refunded, n)
	}
	if _, err := e.refunds.Send(context.Background(), first.ID, "req-test"); err != nil || e.gw.calls.Load() != 1 {
		t.Fatalf("send again: %v, %d calls; want nothing asked", err, e.gw.calls.Load())
	}
	rest := e.mustAsk("") // all that is left
	if rest.Amount != 50000 || rest.IdempotencyKey != e.orderID+"-R2" {
		t.Fatalf("the rest: %+v", rest)
	}
	if _, err := e.refunds.Send(context.Background(), rest.ID, "req-test"); err != nil {
		t.Fatal(err)
	}
	if status, refunded, n := e.state(); status != models.OrderRefunded || refunded != price || n != 2 {
		t.Fatalf("after the rest: %s, refunded %d, %d refunds; want refunded, %d, 2", status, refunded, n, price)
	}
	if left, err := e.refunds.Refundable(context.Background(), e.orderID, ""); err != nil || left.Left != 0 || left.Why == "" {
		t.Fatalf("refundable after all: %+v, %v", left, err)
	}
}

// Above what is left is refused, and nothing is written: not the record,
// not its job. So are a bad amount and a missing reason.
func TestRefundAboveWhatIsLeftIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustAsk("60000") // asked, not answered yet: it counts against what is left
	for _, c := range []struct{ amount, reason string }{
		{"40001", "too much"}, {"0", "nothing"}, {"-5", "negative"}, {"1e3", "exponent"}, {"12.5", "a fraction of a rupiah"}, {"100", " "},
	} {
		_, err := e.ask(c.amount, c.reason)
		if models.ErrorCode(err) != models.EInvalid {
			t.Errorf("amount %q reason %q: %v, want %s", c.amount, c.reason, err, models.EInvalid)
		}
	}
	var n int64
	e.db.Model(&models.GatewayRequest{}).Where("order_id = ? AND kind = ?", e.orderID, models.GatewayRefund).Count(&n)
	var tasks int64
	e.db.Model(&models.OutboxMessage{}).Where("task_type = ?", jobs.TaskRefundSend).Count(&tasks)
	if n != 1 || tasks != 1 || e.gw.calls.Load() != 0 {
		t.Fatalf("%d records, %d tasks, %d calls; want the first refund's only, nothing sent", n, tasks, e.gw.calls.Load())
	}
	if r := e.mustAsk("40000"); r.Amount != 40000 {
		t.Fatalf("exactly what is left: %+v", r)
	}
}

// Two admins refund the order in full at the same moment: one refund is
// recorded and sent, the other is refused as above what is left.
func TestTwoAdminsAtOnceRefundOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := make(chan struct{})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			<-start
			_, errs[i] = e.ask("", fmt.Sprintf("admin %d", i))
		})
	}
	close(start)
	wg.Wait()
	var ok, refused int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case models.ErrorCode(err) == models.EInvalid:
			refused++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d accepted, %d refused; want one of each", ok, refused)
	}
	var rs []models.GatewayRequest
	e.db.Find(&rs, "order_id = ? AND kind = ?", e.orderID, models.GatewayRefund)
	if len(rs) != 1 {
		t.Fatalf("%d refund records, want 1", len(rs))
	}
	if _, err := e.refunds.Send(context.Background(), rs[0].ID, "req-test"); err != nil {
		t.Fatal(err)
	}
	if status, refunded, n := e.state(); status != models.OrderRefunded || refunded != price || n != 1 || e.gw.made() != 1 {
		t.Fatalf("%s, refunded %d, %d rows, %d at the gateway; want one full refund", status, refunded, n, e.gw.made())
	}
}

// Five workers send the same refund at once: one calls the gateway, the
// others find it held (ErrBusy).
func TestConcurrentSendsCallOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The held call's lease lasts as long as the test may: on a busy
	// machine a send scheduled late must still find it held, not passed
	// (a passed lease taken over is TestLostAnswerIsRepeatedWithTheSameKey's).
	e.refunds.CallTimeout = testenv.Budget(t)
	r := e.mustAsk("")
	e.gw.gate = make(chan struct{})
	start := make(chan struct{})
	errs := make([]error, 5)
	var returned atomic.Int64
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			<-start
			_, errs[i] = e.refunds.Send(context.Background(), r.ID, "req-test")
			returned.Add(1)
		})
	}
	close(start)
	// The gateway holds the first call until the other four have come
	// back without calling (or, failing, until a second call came).
	testenv.Eventually(t, "the other sends return", func() bool { return returned.Load() == 4 || e.gw.calls.Load() > 1 })
	close(e.gw.gate)
	wg.Wait()
	var busy int
	for _, err := range errs {
		if errors.Is(err, refunds.ErrBusy) {
			busy++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if e.gw.calls.Load() != 1 || busy != 4 {
		t.Fatalf("%d calls, %d busy; want one call", e.gw.calls.Load(), busy)
	}
	if _, _, n := e.state(); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}

// The gateway refunds and its answer is lost: the refund stays sent (a
// timeout is never a failure) and keeps its lease; once the lease has
// passed, the repeat carries the same key and the gateway's answer is
// the refund it made. One refund at the gateway, one in the database.
func TestLostAnswerIsRepeatedWithTheSameKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustAsk("30000")
	e.gw.answer = func(call int64) error {
		if call == 1 {
			return context.DeadlineExceeded
		}
		return nil
	}
	// The lost call's lease lasts the test's whole budget, so that a busy
	// machine cannot let it pass before the send that must find it held;
	// the test then ends the lease itself, as time would.
	e.refunds.CallTimeout = testenv.Budget(t)
	if _, err := e.refunds.Send(context.Background(), r.ID, "req-test"); !errors.Is(err, refunds.ErrUnanswered) {
		t.Fatalf("first send: %v, want ErrUnanswered", err)
	}
	var row models.GatewayRequest
	e.db.Take(&row, r.ID)
	if row.Phase != models.GatewaySent || row.LastError == "" || row.LockedUntil == nil {
		t.Fatalf("after a lost answer: %+v; want sent, with its error and lease", row)
	}
	if _, _, n := e.state(); n != 0 {
		t.Fatalf("%d refunds recorded before the answer", n)
	}
	if _, err := e.refunds.Send(context.Background(), r.ID, "req-test"); !errors.Is(err, refunds.ErrBusy) {
		t.Fatalf("send within the lease: %v, want ErrBusy", err)
	}
	if err := e.db.Exec("UPDATE gateway_requests SET locked_until = now() - interval '1 second' WHERE id = ?", r.ID).Error; err != nil {
		t.Fatal(err)
	}
	done, err := e.refunds.Send(context.Background(), r.ID, "req-test")
	if err != nil {
		t.Fatalf("the repeat after the lease: %v", err)
	}
	keys := e.gw.keys
	if done.Phase != models.GatewayDone || done.Attempts != 2 || e.gw.made() != 1 || len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("done %+v, keys %v, %d at the gateway; want one refund asked twice with one key", done, keys, e.gw.made())
	}
	if status, refunded, n := e.state(); status != models.OrderPartiallyRefunded || refunded != 30000 || n != 1 {
		t.Fatalf("%s, refunded %d, %d rows", status, refunded, n)
	}
	e.assertCalls(map[string]float64{"unanswered": 1, "done": 1, "refused": 0})
}

// assertCalls checks sekali_gateway_calls_total of the refunds, by answer.
func (e *env) assertCalls(want map[string]float64) {
	e.t.Helper()
	for answer, n := range want {
		if got := testutil.ToFloat64(e.metrics.GatewayCalls.WithLabelValues(sandbox.Name, string(models.GatewayRefund), answer)); got != n {
			e.t.Errorf("sekali_gateway_calls_total{kind=refund,result=%s} = %v, want %v", answer, got, n)
		}
	}
}

// The gateway's notification of the refund comes before its answer is
// recorded (the process died in between, say): the answer then adds
// nothing. One refund, whichever comes first.
func TestNotificationAndAnswerConverge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustAsk("25000")
	body := []byte(fmt.Sprintf(`{"order_id":%q,"transaction_id":%q,"payment_status":"refunded","paid_amount":25000,"currency":"IDR","refund_id":%q}`,
		e.orderID, e.charge(), r.IdempotencyKey))
	e.notify("evt_refund_"+e.orderID, body)
	if status, refunded, n := e.state(); status != models.OrderPartiallyRefunded || refunded != 25000 || n != 1 {
		t.Fatalf("after the notification: %s, refunded %d, %d rows", status, refunded, n)
	}
	done, err := e.refunds.Send(context.Background(), r.ID, "req-test")
	if err != nil || done.Phase != models.GatewayDone {
		t.Fatalf("send: %+v, %v", done, err)
	}
	if status, refunded, n := e.state(); status != models.OrderPartiallyRefunded || refunded != 25000 || n != 1 {
		t.Fatalf("after the answer too: %s, refunded %d, %d rows; want one refund of 25000", status, refunded, n)
	}
	// And the other way round: the notification after the answer.
	e.notify("evt_refund_"+e.orderID+"_again", body)
	if _, refunded, n := e.state(); refunded != 25000 || n != 1 {
		t.Fatalf("after a late notification: refunded %d, %d rows", refunded, n)
	}
}

// The gateway says no: the refund fails for good, nothing is applied,
// and what it asked is left to refund again.
func TestRefusedRefundFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustAsk("")
	e.gw.refuse = &gatewaycalls.Refused{Status: 400, Message: "charge already refunded"}
	failed, err := e.refunds.Send(context.Background(), r.ID, "req-test")
	if err != nil || failed.Phase != models.GatewayFailed || failed.LastError == "" {
		t.Fatalf("send: %+v, %v; want failed with the gateway's words", failed, err)
	}
	if status, refunded, n := e.state(); status != models.OrderPaid || refunded != 0 || n != 0 {
		t.Fatalf("%s, refunded %d, %d rows; want nothing applied", status, refunded, n)
	}
	if left, err := e.refunds.Refundable(context.Background(), e.orderID, ""); err != nil || left.Left != price {
		t.Fatalf("left after a refusal: %+v, %v; want the whole payment", left, err)
	}
	e.assertCalls(map[string]float64{"refused": 1, "done": 0, "unanswered": 0})
	e.assertAlerted(r.ID)
}

// assertAlerted checks that refund.failed was raised once, for refund
// record id, with its send task.
func (e *env) assertAlerted(id int64) {
	e.t.Helper()
	var ids, tasks []string
	e.db.Model(&models.Alert{}).Where("type = ?", alerts.RefundFailed).Pluck("event_id", &ids)
	e.db.Model(&models.OutboxMessage{}).Where("task_type = ?", jobs.TaskAlertSend).Pluck("task_id", &tasks)
	want := alerts.RefundFailed + ":" + strconv.FormatInt(id, 10)
	if len(ids) != 1 || ids[0] != want || len(tasks) != 1 || tasks[0] != jobs.TaskAlertSend+":"+want {
		e.t.Errorf("alerts %v, send tasks %v; want %s once, with its task", ids, tasks, want)
	}
}

// An order that was not paid has nothing to refund.
func TestUnpaidOrderHasNothingToRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	db := e.db
	o, err := orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}).Create(context.Background(),
		orders.CreateRequest{CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: "RF", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	e.orderID = o.ID
	if _, err := e.ask("", "why not"); models.ErrorCode(err) != models.EInvalidTransition {
		t.Fatalf("refund of a pending order: %v, want %s", err, models.EInvalidTransition)
	}
	if _, err := e.ask("", "no such order"); err == nil {
		t.Fatal("refund of a pending order accepted")
	}
	e.orderID = "ORD-nope"
	if _, err := e.ask("", "no such order"); models.ErrorCode(err) != models.ENotFound {
		t.Fatalf("refund of no order: %v, want %s", err, models.ENotFound)
	}
}

// Refundable.Amount is the one check of a refund's amount: the console's
// confirm page and the refund itself both call it, so they refuse alike.
func TestRefundableAmount(t *testing.T) {
	t.Parallel()
	r := refunds.Refundable{OrderID: "ORD-A", Currency: "USD", Left: 5000, Open: 1000}
	for _, tt := range []struct {
		text  string
		want  int64
		error string // "" when the amount is taken
	}{
		{"", 5000, ""}, // all that is left
		{"10", 1000, ""},
		{"12.5", 1250, ""},
		{"50", 5000, ""},
		{"50.01", 0, "at most 50.00 USD is left to refund of order ORD-A; 10.00 USD is held back by refunds the gateway has not answered yet"},
		{"0", 0, "amount 0 is not a positive amount of USD"},
		{"0.001", 0, "amount 0.001 is not a positive amount of USD"}, // a cent cannot be split
		{"-1", 0, "amount must be a positive number"},
		{"1e3", 0, "amount must be a positive number"},
		{"12345678901234567", 0, "amount must be a positive number in major units, such as 75000 or 12.50 (it has more than 16 digits before the point)"},
		{"1.0000000", 0, "amount must be a positive number in major units, such as 75000 or 12.50 (it has more than 6 digits after the point)"},
		{"10000000000000.01", 0, "amount 10000000000000.01 is not a positive amount of USD: it is above 1000000000000000 minor units"},
	} {
		got, err := r.Amount(tt.text)
		switch {
		case tt.error == "" && (err != nil || got != tt.want):
			t.Errorf("Amount(%q) = %d, %v; want %d", tt.text, got, err, tt.want)
		case tt.error != "" && (models.ErrorCode(err) != models.EInvalid || !strings.HasPrefix(models.ErrorMessage(err), tt.error)):
			t.Errorf("Amount(%q) = %d, %v; want invalid: %q", tt.text, got, err, tt.error)
		}
	}
	if _, err := (refunds.Refundable{OrderID: "ORD-B", Currency: "IDR"}).Amount(""); models.ErrorMessage(err) != "at most 0 IDR is left to refund of order ORD-B" {
		t.Errorf("nothing left: %v", err)
	}
}

// A second charge of a paid order must go back: Owed offers it, a refund
// that names it by its reference refunds it alone — the order stays
// paid, its own charge untouched — and it is then owed no more.
func TestRefundASecondCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	second := "tx2-" + e.orderID
	e.notify("evt_paid_again_"+e.orderID, testenv.SandboxBody(e.orderID, second, models.EventPaid, price))
	owed, err := e.refunds.Owed(ctx, e.orderID)
	if err != nil || len(owed) != 1 || owed[0].Payment != second || owed[0].Left != price {
		t.Fatalf("owed %+v, %v; want the second charge, all of it", owed, err)
	}

	twice := refunds.Request{OrderID: e.orderID, Payment: second, Reason: "charged twice", Admin: "admin@example.com"}
	r, err := e.request(twice)
	var charge models.Payment
	if err := e.db.Take(&charge, "provider_reference = ?", second).Error; err != nil {
		t.Fatal(err)
	}
	if err != nil || r.Amount != price || r.PaymentID == nil || *r.PaymentID != charge.ID || r.IdempotencyKey != e.orderID+"-R1" {
		t.Fatalf("refund of the second charge: %+v, %v; want all of payment %d", r, err, charge.ID)
	}
	// While it is asked, the second charge is owed nothing more, and the
	// order's own charge can still be refunded in full.
	if owed, err := e.refunds.Owed(ctx, e.orderID); err != nil || len(owed) != 0 {
		t.Errorf("owed while the refund is open: %+v, %v; want none", owed, err)
	}
	if own, err := e.refunds.Refundable(ctx, e.orderID, ""); err != nil || own.Left != price || own.Payment != e.charge() {
		t.Errorf("the order's own charge: %+v, %v; want all of %s left", own, err, e.charge())
	}
	if _, err := e.refunds.Send(ctx, r.ID, "req-test"); err != nil {
		t.Fatal(err)
	}
	var o models.Order
	var own models.Payment
	e.db.Take(&o, "id = ?", e.orderID)
	e.db.Take(&charge, charge.ID)
	e.db.Take(&own, "provider_reference = ?", e.charge())
	if o.Status != models.OrderPaid || charge.Status != models.PaymentRefunded || charge.RefundedAmount != price || own.RefundedAmount != 0 {
		t.Errorf("after the refund: order %s, second charge %s refunded %d, own charge refunded %d; want paid, refunded %d, 0",
			o.Status, charge.Status, charge.RefundedAmount, own.RefundedAmount, price)
	}

	// Refunded, the charge has nothing left: asked again, 409; a payment
	// the order does not have is bad input, 422.
	if left, err := e.refunds.Refundable(ctx, e.orderID, second); err != nil || left.Left != 0 || left.Why == "" {
		t.Errorf("Refundable(second charge) = %+v, %v; want nothing left, and why", left, err)
	}
	if _, err := e.request(twice); models.ErrorCode(err) != models.EInvalidTransition {
		t.Errorf("the refunded charge again: %v; want %s", err, models.EInvalidTransition)
	}
	twice.Payment = "tx-nobody"
	if _, err := e.request(twice); models.ErrorCode(err) != models.EInvalid {
		t.Errorf("a payment the order does not have: %v; want %s", err, models.EInvalid)
	}
}

// A charge whose dispute is open (the bank holds the money) or lost (the
// bank took it back) refuses refunds: 409 charge_disputed, nothing
// written, and what is left to refund says why: a refund after a lost
// dispute would pay the money back twice. A dispute won gives the charge
// back to refunds.
func TestDisputedChargeRefusesRefunds(t *testing.T) {
	t.Parallel()
	for _, end := range []models.PaymentEvent{models.EventDisputeWon, models.EventDisputeLost} {
		e := newEnv(t)
		e.notify("evt_dispute_"+e.orderID, testenv.SandboxBody(e.orderID, e.charge(), models.EventDisputed, price))
		refused := func(when string) {
			t.Helper()
			r, err := e.ask("10000", "the customer asked")
			if models.ErrorCode(err) != models.EChargeDisputed || r != nil {
				t.Errorf("%s: a refund: %+v, %v; want %s", when, r, err, models.EChargeDisputed)
			}
			left, err := e.refunds.Refundable(context.Background(), e.orderID, "")
			if err != nil || left.Left != 0 || !strings.Contains(left.Why, "dispute") {
				t.Errorf("%s: refundable %+v, %v; want nothing, and why", when, left, err)
			}
			var asked int64
			e.db.Model(&models.GatewayRequest{}).Where("order_id = ? AND kind = ?", e.orderID, models.GatewayRefund).Count(&asked)
			if asked != 0 || e.gw.calls.Load() != 0 {
				t.Errorf("%s: %d refunds recorded, %d calls; want none", when, asked, e.gw.calls.Load())
			}
		}
		refused("the dispute open")
		e.notify("evt_dispute_end_"+e.orderID, testenv.SandboxBody(e.orderID, e.charge(), end, price))
		if end == models.EventDisputeLost {
			refused("the dispute lost")
			continue
		}
		if r, err := e.ask("", "the customer asked"); err != nil || r.Amount != price {
			t.Errorf("the dispute won: %+v, %v; want the whole charge refundable", r, err)
		}
	}
}

// A refund the gateway accepted and then failed: the failure gives its
// amount back and fails the refund record, so the charge can be refunded
// again, under a new key. Should a crash have left the record done beside
// its failed refund (between the answer's Done and the check that
// follows it), sending it again marks it failed.
func TestRefundFailedAfterAcceptance(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustAsk("")
	if done, err := e.refunds.Send(context.Background(), r.ID, "req-1"); err != nil || done.Phase != models.GatewayDone {
		t.Fatalf("send: %+v, %v", done, err)
	}
	body := fmt.Appendf(nil, `{"order_id":%q,"transaction_id":%q,"payment_status":"refunded","paid_amount":%d,"currency":"IDR","refund_id":%q,"refund_status":"failed","failure_reason":"account closed"}`,
		e.orderID, e.charge(), price, r.IdempotencyKey)
	e.notify("evt_failed_"+e.orderID, body)
	status, refunded, _ := e.state()
	var after models.GatewayRequest
	e.db.Take(&after, r.ID)
	if status != models.OrderPaid || refunded != 0 || after.Phase != models.GatewayFailed || after.LastError != payments.FailedAfterAcceptance {
		t.Fatalf("after the failure: order %s, refunded %d, record %s (%q); want paid, 0, failed", status, refunded, after.Phase, after.LastError)
	}
	if n := testutil.ToFloat64(e.metrics.RefundsFailed.WithLabelValues(sandbox.Name)); n != 1 {
		t.Errorf("sekali_refunds_failed_total = %v, want 1: the gateway's notification failed one refund", n)
	}
	again := e.mustAsk("")
	if again.Amount != price || again.IdempotencyKey != e.orderID+"-R2" {
		t.Errorf("asked again: %+v; want all of it under a new key", again)
	}

	// The record done beside its failed refund, as a crash would leave it.
	e.db.Model(&models.GatewayRequest{}).Where("id = ?", r.ID).Updates(map[string]any{"phase": models.GatewayDone, "last_error": ""})
	if sent, err := e.refunds.Send(context.Background(), r.ID, "req-2"); err != nil || sent.Phase != models.GatewayFailed {
		t.Errorf("sending the done record again: %+v, %v; want it failed", sent, err)
	}
	if calls := e.gw.calls.Load(); calls != 1 {
		t.Errorf("%d calls to the gateway, want 1: a done refund is never asked again", calls)
	}
	e.assertAlerted(r.ID) // failed twice, raised once
}

// refundBody is a sandbox notification of refund id of charge, in state,
// of amount.
func refundBody(orderID, charge, id string, state models.RefundStatus, amount int64) []byte {
	return fmt.Appendf(nil, `{"order_id":%q,"transaction_id":%q,"payment_status":"refunded","paid_amount":%d,"currency":"IDR","refund_id":%q,"refund_status":%q}`,
		orderID, charge, amount, id, state)
}

// paidOrder is a second order of the env's product, paid through the
// sandbox; it returns its id and its charge's reference.
func (e *env) paidOrder() (string, string) {
	e.t.Helper()
	o, err := orders.NewService(e.db, testenv.Logger(e.t), time.Now, time.Hour, jobs.Tasks{}).Create(context.Background(),
		orders.CreateRequest{CustomerEmail: "other@example.com", Items: []orders.ItemRequest{{SKU: "RF", Qty: 1}}})
	if err != nil {
		e.t.Fatal(err)
	}
	charge := "tx-" + o.ID
	e.notify("evt_paid_"+o.ID, testenv.SandboxBody(o.ID, charge, models.EventPaid, price))
	return o.ID, charge
}

// News about one charge changes only that charge's refunds, whatever
// refund it names. Order A's refund is done (the gateway's id rf-1,
// Sekali's key A-R1); a failure naming rf-1 told on order B's charge
// fails nothing of A's, and a failure naming A-R1 — a refund Sekali
// knows as A's — is rejected whole: nothing counted on B either.
func TestRefundNewsOfAnotherChargeChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustAsk("50000")
	if done, err := e.refunds.Send(context.Background(), r.ID, "req-1"); err != nil || done.Phase != models.GatewayDone || done.ProviderObjectID != "rf-1" {
		t.Fatalf("send: %+v, %v", done, err)
	}
	otherID, otherCharge := e.paidOrder()
	// The gateway's id of A's refund, failed, on B's charge.
	e.notify("evt_fail_rf1", refundBody(otherID, otherCharge, "rf-1", models.RefundFailed, 50000))
	if after := e.get(r.ID); after.Phase != models.GatewayDone {
		t.Fatalf("A's refund after a failure told on B's charge: %s (%q), want done", after.Phase, after.LastError)
	}
	// Sekali's key of A's refund, which names A's refunds row.
	body := refundBody(otherID, otherCharge, r.IdempotencyKey, models.RefundFailed, 50000)
	out := e.pay.Receive(context.Background(), payments.Delivery{Provider: sandbox.Name,
		Header: testenv.SandboxHeaders("evt_fail_key", body, time.Now()), Body: bytes.NewReader(body), ContentType: "application/json"})
	if out.Status() != 422 || out.Reason != models.ReasonRefundOfOtherCharge {
		t.Fatalf("a refund of A's told on B's charge: %d %s, want 422 %s", out.Status(), out.Reason, models.ReasonRefundOfOtherCharge)
	}
	if status, refunded, _ := e.state(); status != models.OrderPartiallyRefunded || refunded != 50000 {
		t.Fatalf("order A: %s with %d refunded; want partially_refunded with 50000", status, refunded)
	}
	var b models.Payment
	if err := e.db.Take(&b, "provider_reference = ?", otherCharge).Error; err != nil {
		t.Fatal(err)
	}
	var bOrder models.Order
	if err := e.db.Take(&bOrder, "id = ?", otherID).Error; err != nil {
		t.Fatal(err)
	}
	if b.RefundedAmount != 0 || b.Status != models.PaymentSucceeded || bOrder.Status != models.OrderPaid {
		t.Fatalf("order B: %s, payment %s with %d refunded; want paid, nothing refunded", bOrder.Status, b.Status, b.RefundedAmount)
	}
	var raised int64
	e.db.Model(&models.Alert{}).Where("type = ?", alerts.RefundFailed).Count(&raised)
	if raised != 0 {
		t.Fatalf("%d refund.failed alerts, want none: nothing failed", raised)
	}
}
