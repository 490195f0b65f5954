package sandboxgw_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/midtrans"
	stripegw "github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbound"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// The refunders Sekali asks the gateways with, against the sandbox
// gateway's emulation of their APIs and its faults: whatever the faults,
// a refund asked again with its key is the one refund.

// refundOfCharge is the refund of amount of charge under key, at attempt.
func refundOfCharge(order, key, charge string, amount int64, attempt int) outbound.RefundRequest {
	return outbound.RefundRequest{OrderID: order, Key: key, Charge: charge, Amount: amount, Currency: "IDR",
		Reason: "damaged in transit", Attempt: attempt}
}

// refundLate asks for r with a deadline that passes once the gateway has
// refunded and holds its answer (Faults.TimeOutAfterActing), and returns
// the error.
func refundLate(t *testing.T, g *sandboxgw.Gateway, f outbound.Refunder, r outbound.RefundRequest) error {
	t.Helper()
	g.Faults().TimeOutAfterActing(1)
	ctx := newPassingDeadline(t.Context())
	t.Cleanup(ctx.pass)
	done := make(chan error, 1)
	go func() {
		_, err := f.Refund(ctx, r)
		done <- err
	}()
	testenv.Eventually(t, "the gateway refunded and holds its answer", func() bool { return g.Faults().Held() == 1 })
	ctx.pass()
	return <-done
}

// unknown fails the test unless err is an error that says nothing of
// whether the gateway refunded: not nil, not a refusal.
func unknown(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || outbound.IsRefused(err) {
		t.Fatalf("%s: %v, want an error that is not a refusal", what, err)
	}
}

// refused fails the test unless err is the gateway's refusal, with
// status.
func refused(t *testing.T, what string, err error, status int) {
	t.Helper()
	var r *outbound.Refused
	if !errors.As(err, &r) || r.Status != status {
		t.Errorf("%s: %v, want refused with status %d", what, err, status)
	}
}

func stripeRefunder(t *testing.T, base string) *stripegw.Refunder {
	t.Helper()
	f, err := stripegw.NewRefunder(stripeKey, base+sandboxgw.StripeAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// stripeRefunds lists the refunds Stripe holds of PaymentIntent pi.
func stripeRefunds(t *testing.T, sc *stripe.Client, pi string) []*stripe.Refund {
	t.Helper()
	var out []*stripe.Refund
	for re, err := range sc.V1Refunds.List(t.Context(), &stripe.RefundListParams{PaymentIntent: stripe.String(pi)}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, re)
	}
	return out
}

// paid makes the gateway know that charge was paid amount, in format.
func paid(g *sandboxgw.Gateway, format, charge string, amount int64) {
	g.Reported(format, payments.Fact{TransactionID: charge, Status: models.EventPaid, Amount: amount, Currency: "IDR"})
}

// A Stripe refund answers with the refund, by its id, and the charge's
// refunded total, as charge.refunded states it; two partial refunds
// state the growing total. The same request again is Stripe's replay of
// the one refund. A repeat looks first: it finds the refund by its
// metadata.refund_key even where Stripe's key would refuse it (other
// parameters, or a key Stripe no longer keeps). A key reused with other
// parameters on a first call is Stripe's idempotency_error: refused.
func TestStripeRefunderOnce(t *testing.T) {
	t.Parallel()
	g, base, sc := stripeEmulator(t)
	f := stripeRefunder(t, base)
	ctx := t.Context()
	paid(g, stripegw.Name, "pi_rf_1", 150000)
	first, err := f.Refund(ctx, refundOfCharge("ORD-RF-1", "ORD-RF-1-R1", "pi_rf_1", 50000, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ObjectID, "re_") || first.Amount != 50000 || first.Total != 50000 || first.RefundKey != first.ObjectID || first.Pending {
		t.Fatalf("first %+v", first)
	}
	if again, err := f.Refund(ctx, refundOfCharge("ORD-RF-1", "ORD-RF-1-R1", "pi_rf_1", 50000, 1)); err != nil || again != first {
		t.Errorf("the same request again: %+v, %v; want %+v", again, err, first)
	}
	second, err := f.Refund(ctx, refundOfCharge("ORD-RF-1", "ORD-RF-1-R2", "pi_rf_1", 25000, 1))
	if err != nil || second.Amount != 25000 || second.Total != 75000 || second.ObjectID == first.ObjectID {
		t.Errorf("second: %+v, %v; want 25000 of a total of 75000", second, err)
	}
	r := refundOfCharge("ORD-RF-1", "ORD-RF-1-R1", "pi_rf_1", 50000, 2)
	r.Reason = "said otherwise" // Stripe's key would answer idempotency_error
	if found, err := f.Refund(ctx, r); err != nil || found.ObjectID != first.ObjectID || found.Amount != 50000 || found.Total != 75000 {
		t.Errorf("a repeat: %+v, %v; want %s, as listed now", found, err, first.ObjectID)
	}
	r.Attempt = 1
	_, err = f.Refund(ctx, r)
	refused(t, "the key with other parameters", err, 400)
	if n := len(stripeRefunds(t, sc, "pi_rf_1")); n != 2 {
		t.Errorf("%d refunds at Stripe, want 2", n)
	}
}

// A 500 before Stripe acted is not a refusal; the repeat refunds, once.
func TestStripeRefunderFailNext(t *testing.T) {
	t.Parallel()
	g, base, sc := stripeEmulator(t)
	f := stripeRefunder(t, base)
	g.Faults().FailNext(1)
	_, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-2", "ORD-RF-2-R1", "pi_rf_2", 50000, 1))
	unknown(t, "FailNext", err)
	a, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-2", "ORD-RF-2-R1", "pi_rf_2", 50000, 2))
	if err != nil || a.Total != 50000 {
		t.Fatalf("the repeat: %+v, %v", a, err)
	}
	if all := stripeRefunds(t, sc, "pi_rf_2"); len(all) != 1 || all[0].ID != a.ObjectID {
		t.Errorf("refunds %v, want only %s", all, a.ObjectID)
	}
}

// Stripe refunds and does not answer; the caller's deadline passes: not
// a refusal. The repeat finds that refund: one at Stripe.
func TestStripeRefunderTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, base, sc := stripeEmulator(t)
	f := stripeRefunder(t, base)
	err := refundLate(t, g, f, refundOfCharge("ORD-RF-3", "ORD-RF-3-R1", "pi_rf_3", 50000, 1))
	unknown(t, "no answer", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer: %v, want the deadline", err)
	}
	made := stripeRefunds(t, sc, "pi_rf_3")
	if len(made) != 1 {
		t.Fatalf("%d refunds, want 1", len(made))
	}
	a, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-3", "ORD-RF-3-R1", "pi_rf_3", 50000, 2))
	if err != nil || a.ObjectID != made[0].ID || a.Amount != 50000 || a.Total != 50000 {
		t.Errorf("the repeat: %+v, %v; want %s", a, err, made[0].ID)
	}
	if n := len(stripeRefunds(t, sc, "pi_rf_3")); n != 1 {
		t.Errorf("%d refunds, want 1", n)
	}
}

// Above what is left of a PaymentIntent is Stripe's 400: refused. A
// request without a key is refused before it is sent.
func TestStripeRefunderRefusals(t *testing.T) {
	t.Parallel()
	g, base, sc := stripeEmulator(t)
	f := stripeRefunder(t, base)
	paid(g, stripegw.Name, "pi_rf_4", 1000)
	_, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-4", "ORD-RF-4-R1", "pi_rf_4", 1001, 1))
	refused(t, "above the payment", err, 400)
	_, err = f.Refund(t.Context(), refundOfCharge("ORD-RF-4", "", "pi_rf_4", 1000, 1))
	refused(t, "no key", err, 0)
	if n := len(stripeRefunds(t, sc, "pi_rf_4")); n != 0 {
		t.Errorf("%d refunds, want 0", n)
	}
}

func midtransRefunder(t *testing.T, base string) *midtrans.Refunder {
	t.Helper()
	f, err := midtrans.NewRefunder(midtransKey, base+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A Midtrans refund answers with its refund_key, as Midtrans's refund
// notification names it. A refund_key is single-use: on a repeat, the
// 406 "Duplicate refund ID" is the earlier attempt's refund; on a first
// call it is someone else's, and refused.
func TestMidtransRefunderOnce(t *testing.T) {
	t.Parallel()
	g, m := midtransEmulator(t)
	f := midtransRefunder(t, m.base)
	m.transaction("ORD-RF-5", "tx-rf-5", models.EventPaid, 150000)
	want := outbound.Refunded{ObjectID: "ORD-RF-5-R1", RefundKey: "ORD-RF-5-R1", Amount: 50000}
	if a, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-5", "ORD-RF-5-R1", "tx-rf-5", 50000, 1)); err != nil || a != want {
		t.Fatalf("refund: %+v, %v; want %+v", a, err, want)
	}
	if a, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-5", "ORD-RF-5-R1", "tx-rf-5", 50000, 2)); err != nil || a != want {
		t.Errorf("a repeat: %+v, %v; want %+v", a, err, want)
	}
	_, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-5", "ORD-RF-5-R1", "tx-rf-5", 50000, 1))
	refused(t, "the key on a first call", err, 406)
	if n := g.MidtransRefunded("tx-rf-5"); n != 50000 {
		t.Errorf("Midtrans refunded %d, want 50000", n)
	}
}

// A 500 before Midtrans acted is not a refusal; the repeat refunds, once.
func TestMidtransRefunderFailNext(t *testing.T) {
	t.Parallel()
	g, m := midtransEmulator(t)
	f := midtransRefunder(t, m.base)
	m.transaction("ORD-RF-6", "tx-rf-6", models.EventPaid, 150000)
	g.Faults().FailNext(1)
	_, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-6", "ORD-RF-6-R1", "tx-rf-6", 50000, 1))
	unknown(t, "FailNext", err)
	if a, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-6", "ORD-RF-6-R1", "tx-rf-6", 50000, 2)); err != nil || a.RefundKey != "ORD-RF-6-R1" {
		t.Fatalf("the repeat: %+v, %v", a, err)
	}
	if n := g.MidtransRefunded("tx-rf-6"); n != 50000 {
		t.Errorf("Midtrans refunded %d, want 50000", n)
	}
}

// Midtrans refunds and does not answer: not a refusal. The repeat gets
// 406 for the key, which is that refund: one at Midtrans.
func TestMidtransRefunderTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, m := midtransEmulator(t)
	f := midtransRefunder(t, m.base)
	m.transaction("ORD-RF-7", "tx-rf-7", models.EventPaid, 150000)
	err := refundLate(t, g, f, refundOfCharge("ORD-RF-7", "ORD-RF-7-R1", "tx-rf-7", 50000, 1))
	unknown(t, "no answer", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer: %v, want the deadline", err)
	}
	want := outbound.Refunded{ObjectID: "ORD-RF-7-R1", RefundKey: "ORD-RF-7-R1", Amount: 50000}
	if a, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-7", "ORD-RF-7-R1", "tx-rf-7", 50000, 2)); err != nil || a != want {
		t.Errorf("the repeat: %+v, %v; want %+v", a, err, want)
	}
	if n := g.MidtransRefunded("tx-rf-7"); n != 50000 {
		t.Errorf("Midtrans refunded %d, want 50000", n)
	}
}

// Above what is left (414) and a transaction not settled (412) are
// refused; an unknown transaction (404) is not — Sekali's setting, such
// as MIDTRANS_API_URL, may be wrong — and nor is it refunded; another
// currency than IDR is refused before it is sent.
func TestMidtransRefunderRefusals(t *testing.T) {
	t.Parallel()
	g, m := midtransEmulator(t)
	f := midtransRefunder(t, m.base)
	m.transaction("ORD-RF-8", "tx-rf-8", models.EventPaid, 1000)
	_, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-8", "ORD-RF-8-R1", "tx-rf-8", 1001, 1))
	refused(t, "above the payment", err, 414)
	m.transaction("ORD-RF-9", "tx-rf-9", models.EventPending, 1000)
	_, err = f.Refund(t.Context(), refundOfCharge("ORD-RF-9", "ORD-RF-9-R1", "tx-rf-9", 1000, 1))
	refused(t, "a pending transaction", err, 412)
	_, err = f.Refund(t.Context(), refundOfCharge("ORD-RF-10", "ORD-RF-10-R1", "tx-none", 1000, 1))
	unknown(t, "an unknown transaction", err)
	r := refundOfCharge("ORD-RF-8", "ORD-RF-8-R2", "tx-rf-8", 1000, 1)
	r.Currency = "USD"
	_, err = f.Refund(t.Context(), r)
	refused(t, "USD", err, 0)
	if n := g.MidtransRefunded("tx-rf-8"); n != 0 {
		t.Errorf("Midtrans refunded %d, want 0", n)
	}
}

func xenditRefunder(t *testing.T, base string) *xendit.Refunder {
	t.Helper()
	f, err := xendit.NewRefunder(xenditKey, base+sandboxgw.XenditAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A Xendit refund answers with its id (PENDING counts); the same key
// again is Xendit's 409 DUPLICATE_ERROR, and the refunder finds the
// refund by its reference_id: one refund.
func TestXenditRefunderOnce(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	f := xenditRefunder(t, x.base)
	paid(g, xendit.Name, "inv-rf-11", 150000)
	first, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-11", "ORD-RF-11-R1", "inv-rf-11", 50000, 1))
	if err != nil || first.ObjectID == "" || first.RefundKey != first.ObjectID || first.Amount != 50000 || first.Total != 0 {
		t.Fatalf("refund: %+v, %v", first, err)
	}
	if !first.Pending {
		t.Errorf("the first answer is not pending: Xendit answers a refund PENDING")
	}
	settled := first
	settled.Pending = false // Xendit's list shows it SUCCEEDED: the gateway settles at once
	for attempt := 1; attempt <= 2; attempt++ {
		if again, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-11", "ORD-RF-11-R1", "inv-rf-11", 50000, attempt)); err != nil || again != settled {
			t.Errorf("again at attempt %d: %+v, %v; want %+v", attempt, again, err, settled)
		}
	}
	if list := x.refunds("inv-rf-11"); len(list) != 1 || list[0]["id"] != first.ObjectID {
		t.Errorf("refunds %v, want only %s", list, first.ObjectID)
	}
}

// A 500 before Xendit acted is not a refusal; the repeat finds no refund
// and makes the one.
func TestXenditRefunderFailNext(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	f := xenditRefunder(t, x.base)
	paid(g, xendit.Name, "inv-rf-12", 150000)
	g.Faults().FailNext(1)
	_, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-12", "ORD-RF-12-R1", "inv-rf-12", 50000, 1))
	unknown(t, "FailNext", err)
	a, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-12", "ORD-RF-12-R1", "inv-rf-12", 50000, 2))
	if err != nil {
		t.Fatal(err)
	}
	if list := x.refunds("inv-rf-12"); len(list) != 1 || list[0]["id"] != a.ObjectID {
		t.Errorf("refunds %v, want only %s", list, a.ObjectID)
	}
}

// Xendit refunds and does not answer: not a refusal. The repeat finds
// that refund by its reference_id before it would create: one refund.
func TestXenditRefunderTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	f := xenditRefunder(t, x.base)
	paid(g, xendit.Name, "inv-rf-13", 150000)
	err := refundLate(t, g, f, refundOfCharge("ORD-RF-13", "ORD-RF-13-R1", "inv-rf-13", 50000, 1))
	unknown(t, "no answer", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer: %v, want the deadline", err)
	}
	made := x.refunds("inv-rf-13")
	if len(made) != 1 {
		t.Fatalf("%d refunds, want 1", len(made))
	}
	a, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-13", "ORD-RF-13-R1", "inv-rf-13", 50000, 2))
	if err != nil || a.ObjectID != made[0]["id"] || a.Amount != 50000 {
		t.Errorf("the repeat: %+v, %v; want %v", a, err, made[0]["id"])
	}
	if n := len(x.refunds("inv-rf-13")); n != 1 {
		t.Errorf("%d refunds, want 1", n)
	}
}

// Above what is left is Xendit's 400 MAXIMUM_REFUND_AMOUNT_REACHED:
// refused. An unknown invoice (404 DATA_NOT_FOUND) is not — Sekali's
// setting may be wrong — and nothing is refunded.
func TestXenditRefunderRefusals(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	f := xenditRefunder(t, x.base)
	paid(g, xendit.Name, "inv-rf-14", 1000)
	_, err := f.Refund(t.Context(), refundOfCharge("ORD-RF-14", "ORD-RF-14-R1", "inv-rf-14", 1001, 1))
	refused(t, "above the payment", err, 400)
	_, err = f.Refund(t.Context(), refundOfCharge("ORD-RF-15", "ORD-RF-15-R1", "inv-none", 1000, 1))
	unknown(t, "an unknown invoice", err)
	if n := len(x.refunds("inv-rf-14")); n != 0 {
		t.Errorf("%d refunds, want 0", n)
	}
}

// End to end: Sekali's refunds service asks the gateway's emulation
// through the gateway's refunder, and the emulation tells Sekali of the
// refund as the gateway does; the answer and the notification, in
// whichever order they come, are one refund of the order.

// shop is Sekali's side: an order of one unit, its payments pipeline
// behind /callbacks/{provider}, its refunds.
type shop struct {
	t        *testing.T
	db       *gorm.DB
	log      *slog.Logger
	pay      *payments.Service
	orderID  string
	callback string        // where the gateway delivers: Sekali's base URL
	ready    chan struct{} // closed once pay is set
	gate     chan struct{} // closed when notifications may be received
	release  func()        // closes gate
}

// orderTotal is the shop's order: one unit.
const orderTotal = 150000

// newShop has an order, and a callback endpoint that receives nothing
// until open.
func newShop(t *testing.T) *shop {
	t.Helper()
	s := &shop{t: t, db: testenv.NewDB(t), log: testenv.Logger(t), ready: make(chan struct{}), gate: make(chan struct{})}
	s.release = sync.OnceFunc(func() { close(s.gate) })
	testenv.MustCreateProduct(t, s.db, "E2E", orderTotal, 10)
	o, err := orders.NewService(s.db, s.log, time.Now, time.Hour, jobs.Tasks{}).Create(t.Context(),
		orders.CreateRequest{CustomerEmail: "budi@example.id", Items: []orders.ItemRequest{{SKU: "E2E", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	s.orderID = o.ID
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-s.ready
		<-s.gate
		out := s.pay.Receive(r.Context(), payments.Delivery{Provider: strings.TrimPrefix(r.URL.Path, "/callbacks/"),
			Header: r.Header, Body: r.Body, ContentType: r.Header.Get("Content-Type")})
		w.WriteHeader(out.Status())
		json.NewEncoder(w).Encode(map[string]string{"result": out.Word()})
	}))
	t.Cleanup(srv.Close)
	s.callback = srv.URL
	return s
}

// open builds the payments pipeline of provider (once the emulation's
// address is known: a Midtrans provider confirms with its status API).
// Unless hold, notifications are received from now on; else from
// release. At the end, held notifications are released and the
// deliveries of g in flight end before the pipeline closes.
func (s *shop) open(g *sandboxgw.Gateway, provider payments.Provider, hold bool) {
	s.pay = payments.NewService(s.db, s.log, time.Now, metrics.New(), jobs.Tasks{}, provider)
	s.t.Cleanup(s.pay.Close)
	s.t.Cleanup(func() { s.release(); g.Close() })
	close(s.ready)
	if !hold {
		s.release()
	}
}

// notify delivers f in sender's format, as the gateway would, and
// expects it processed.
func (s *shop) notify(sender payments.Sender, f payments.Fact) {
	s.t.Helper()
	header, body, err := payments.Notification(sender, f, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	out := s.pay.Receive(s.t.Context(), payments.Delivery{Provider: sender.Provider(), Header: header,
		Body: bytes.NewReader(body), ContentType: "application/json"})
	if out.Result != models.ResultProcessed {
		s.t.Fatalf("%s %s: %s (%s)", sender.Provider(), f.Status, out.Word(), out.Detail)
	}
}

// refundHalf asks for half the order back through refunder, and sends
// the request: done.
func (s *shop) refundHalf(refunder outbound.Refunder) *models.GatewayRequest {
	s.t.Helper()
	svc := refunds.NewService(s.db, s.log, time.Now, s.pay, jobs.Tasks{}, refunder)
	var r *models.GatewayRequest
	err := store.Transaction(s.t.Context(), s.db, func(tx *gorm.DB) error {
		var err error
		r, err = svc.RequestTx(tx, refunds.Request{OrderID: s.orderID, Amount: "75000", Reason: "damaged in transit", Admin: "admin@example.com"})
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
	done, err := svc.Send(s.t.Context(), r.ID, "req-test")
	if err != nil || done.Phase != models.GatewayDone {
		s.t.Fatalf("send: %+v, %v", done, err)
	}
	return done
}

// expectHalfRefunded checks the order: partially refunded, by one
// counted refunds row of half, under key.
func (s *shop) expectHalfRefunded(key string) {
	s.t.Helper()
	var o models.Order
	var p models.Payment
	var rows []models.Refund
	if err := s.db.Take(&o, "id = ?", s.orderID).Error; err != nil {
		s.t.Fatal(err)
	}
	if err := s.db.Take(&p, "order_id = ?", s.orderID).Error; err != nil {
		s.t.Fatal(err)
	}
	if err := s.db.Where("order_id = ? AND status IN ?", s.orderID, []models.RefundStatus{models.RefundPending, models.RefundSucceeded}).Find(&rows).Error; err != nil {
		s.t.Fatal(err)
	}
	if o.Status != models.OrderPartiallyRefunded || p.RefundedAmount != orderTotal/2 || len(rows) != 1 ||
		rows[0].Amount != orderTotal/2 || rows[0].RefundKey != key {
		s.t.Errorf("order %s, refunded %d, refunds %+v; want partially_refunded by one refund of %d, %s",
			o.Status, p.RefundedAmount, rows, orderTotal/2, key)
	}
}

// delivered waits until the gateway's refund notification of order was
// answered, and expects it answered 200 with result.
func delivered(t *testing.T, g *sandboxgw.Gateway, orderID, result string) {
	t.Helper()
	var d sandboxgw.Delivery
	testenv.Eventually(t, "the gateway's refund notification answered", func() bool {
		for _, d = range g.Deliveries(orderID) {
			if d.Event == string(models.EventRefunded) && d.Status != 0 {
				return true
			}
		}
		return false
	})
	if d.Status != http.StatusOK || d.Result != result {
		t.Errorf("the refund notification: %d %s, want 200 %s", d.Status, d.Result, result)
	}
}

// answersLate answers the refund only after wait: the gateway's
// notification comes first.
type answersLate struct {
	outbound.Refunder
	wait func()
}

func (r answersLate) Refund(ctx context.Context, req outbound.RefundRequest) (outbound.Refunded, error) {
	a, err := r.Refunder.Refund(ctx, req)
	r.wait()
	return a, err
}

// The answer names the refund (re_…); charge.refunded states only the
// charge's total. They converge on one counted refund, the named one,
// whichever comes first: a total that came first stands for the refund
// until the answer names it, and is then superseded.
func TestStripeRefundEndToEnd(t *testing.T) {
	t.Parallel()
	for _, notificationFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "answer first", true: "notification first"}[notificationFirst], func(t *testing.T) {
			t.Parallel()
			sender, err := stripegw.NewSender(stripeWebhookSecret)
			if err != nil {
				t.Fatal(err)
			}
			provider, err := stripegw.NewProvider(stripeWebhookSecret)
			if err != nil {
				t.Fatal(err)
			}
			s := newShop(t)
			g := sandboxgw.New(nil, testenv.SandboxKey, s.callback, s.log)
			g.Speak(sender)
			g.SpeakStripeAPI(stripeKey)
			g.Retries = nil
			base := serve(t, g)
			t.Cleanup(g.Close)
			s.open(g, provider, !notificationFirst)
			payment := payments.Fact{EventID: "evt_paid_" + s.orderID, OrderID: s.orderID, TransactionID: "pi_e2e_" + s.orderID,
				Status: models.EventPaid, Amount: orderTotal, Currency: "IDR"}
			s.notify(sender, payment)
			g.Reported(stripegw.Name, payment)
			var refunder outbound.Refunder = stripeRefunder(t, base)
			if notificationFirst {
				refunder = answersLate{refunder, func() { delivered(t, g, s.orderID, models.ResultProcessed) }}
			}
			r := s.refundHalf(refunder)
			if !strings.HasPrefix(r.ProviderObjectID, "re_") {
				t.Errorf("refund %+v", r)
			}
			if !notificationFirst {
				s.release()
				delivered(t, g, s.orderID, models.ResultStale)
			}
			s.expectHalfRefunded(r.ProviderObjectID)
		})
	}
}

// Midtrans names the refund by its refund_key, in the answer and in the
// notification, which Sekali confirms with the emulated status API.
func TestMidtransRefundEndToEnd(t *testing.T) {
	t.Parallel()
	sender, err := midtrans.NewSender(midtransKey)
	if err != nil {
		t.Fatal(err)
	}
	s := newShop(t)
	g := sandboxgw.New(nil, testenv.SandboxKey, s.callback, s.log)
	g.Speak(sender)
	g.Retries = nil
	m := midtransAPI{t: t, base: serve(t, g), key: midtransKey, sender: sender}
	t.Cleanup(g.Close)
	provider, err := midtrans.NewProvider(midtransKey, m.base+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	s.open(g, provider, true)
	tx := "tx-e2e-" + s.orderID
	m.transaction(s.orderID, tx, models.EventPaid, orderTotal)
	s.notify(sender, payments.Fact{OrderID: s.orderID, TransactionID: tx, Status: models.EventPaid, Amount: orderTotal, Currency: "IDR"})
	if r := s.refundHalf(midtransRefunder(t, m.base)); r.ProviderObjectID != s.orderID+"-R1" {
		t.Errorf("refund %+v", r)
	}
	s.release()
	delivered(t, g, s.orderID, models.ResultStale)
	s.expectHalfRefunded(s.orderID + "-R1")
}

// A refund the gateway accepts and fails later — Stripe's pending then
// refund.failed, Xendit's PENDING then its refund.failed callback — is
// counted when accepted and given back when it fails, whichever of the
// answer and the notifications comes first: the order is paid again with
// its stock, the refund record failed with the gateway's reason, the
// charge refundable in full again, and the refund asked again (a new
// refund, a new key) goes through. The audit stays green throughout.
func TestRefundFailedLaterEndToEnd(t *testing.T) {
	t.Parallel()
	const token = "xnd-callback-token-later-0123"
	for _, gw := range []string{stripegw.Name, xendit.Name} {
		t.Run(gw, func(t *testing.T) {
			t.Parallel()
			s := newShop(t)
			g := sandboxgw.New(nil, testenv.SandboxKey, s.callback, s.log)
			g.Retries = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}
			var sender payments.Sender
			var provider payments.Provider
			var refunder outbound.Refunder
			charge := "inv-later-" + s.orderID
			switch gw {
			case stripegw.Name:
				sender, provider, charge = must(stripegw.NewSender(stripeWebhookSecret)), must(stripegw.NewProvider(stripeWebhookSecret)), "pi_later_"+s.orderID
				g.SpeakStripeAPI(stripeKey)
				refunder = stripeRefunder(t, serve(t, g))
			case xendit.Name:
				sender, provider = must(xendit.NewSender(token)), must(xendit.NewProvider(token))
				g.SpeakXenditAPI(xenditKey)
				refunder = xenditRefunder(t, serve(t, g))
			}
			g.Speak(sender)
			s.open(g, provider, false)
			payment := payments.Fact{EventID: "evt-paid-" + s.orderID, OrderID: s.orderID, TransactionID: charge,
				Status: models.EventPaid, Amount: orderTotal, Currency: "IDR"}
			s.notify(sender, payment)
			g.Reported(gw, payment)
			svc := refunds.NewService(s.db, s.log, time.Now, s.pay, jobs.Tasks{}, refunder)

			g.Faults().FailRefundsLater(1)
			first := s.send(svc, "")
			testenv.Eventually(t, "the gateway's refund.failed applied", func() bool {
				var r models.GatewayRequest
				s.db.Take(&r, first.ID)
				return r.Phase == models.GatewayFailed
			})
			var r models.GatewayRequest
			var o models.Order
			var p models.Payment
			var row models.Refund
			s.db.Take(&r, first.ID)
			s.db.Take(&o, "id = ?", s.orderID)
			s.db.Take(&p, "order_id = ?", s.orderID)
			s.db.Take(&row, "refund_key = ?", r.ProviderObjectID)
			if o.Status != models.OrderPaid || p.Status != models.PaymentSucceeded || p.RefundedAmount != 0 || row.Status != models.RefundFailed ||
				row.FailureReason == "" || r.LastError != payments.FailedAfterAcceptance {
				t.Errorf("after the refund failed: order %s, payment %s with %d refunded, refund %s (%q), request %s (%q); want the order paid again",
					o.Status, p.Status, p.RefundedAmount, row.Status, row.FailureReason, r.Phase, r.LastError)
			}
			if left, err := svc.Refundable(t.Context(), s.orderID, ""); err != nil || left.Left != orderTotal {
				t.Errorf("refundable after the failure: %+v, %v; want all %d", left, err, orderTotal)
			}
			again := s.send(svc, "the first refund failed at the bank")
			if again.IdempotencyKey == first.IdempotencyKey || again.Phase != models.GatewayDone {
				t.Errorf("asked again: %+v; want a new key, done", again)
			}
			testenv.Eventually(t, "the second refund succeeded", func() bool {
				var n int64
				s.db.Model(&models.Refund{}).Where("order_id = ? AND status = ?", s.orderID, models.RefundSucceeded).Count(&n)
				return n == 1
			})
			s.expectHalfRefunded(again.ProviderObjectID)
			s.mustAudit()
		})
	}
}

// send asks for half the order back through svc and sends it, once.
func (s *shop) send(svc *refunds.Service, reason string) *models.GatewayRequest {
	s.t.Helper()
	var r *models.GatewayRequest
	err := store.Transaction(s.t.Context(), s.db, func(tx *gorm.DB) error {
		var err error
		r, err = svc.RequestTx(tx, refunds.Request{OrderID: s.orderID, Amount: "75000", Reason: cmp.Or(reason, "damaged in transit"), Admin: "admin@example.com"})
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
	sent, err := svc.Send(s.t.Context(), r.ID, "req-test")
	if err != nil {
		s.t.Fatalf("send: %v", err)
	}
	return sent
}

// mustAudit runs the integrity audit without the jobs, and expects it
// green.
func (s *shop) mustAudit() {
	s.t.Helper()
	report, err := audit.WithoutJobs(s.db).Run(s.t.Context(), 0)
	if err != nil || !report.OK {
		s.t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// must is v, or the test stops at err.
func must[V any](v V, err error) V {
	if err != nil {
		panic(err)
	}
	return v
}

// The answer records Xendit's refund PENDING, by its id; Xendit's
// refund.succeeded callback, where the gateway sends it, makes it
// succeeded.
func TestXenditRefundEndToEnd(t *testing.T) {
	t.Parallel()
	const token = "xnd-callback-token-e2e-0123"
	sender, err := xendit.NewSender(token)
	if err != nil {
		t.Fatal(err)
	}
	provider, err := xendit.NewProvider(token)
	if err != nil {
		t.Fatal(err)
	}
	s := newShop(t)
	g, x := xenditEmulator(t)
	s.open(g, provider, false)
	payment := payments.Fact{EventID: "evt-paid-" + s.orderID, OrderID: s.orderID, TransactionID: "inv-e2e-" + s.orderID,
		Status: models.EventPaid, Amount: orderTotal, Currency: "IDR"}
	s.notify(sender, payment)
	g.Reported(xendit.Name, payment)
	r := s.refundHalf(xenditRefunder(t, x.base))
	if list := x.refunds(payment.TransactionID); len(list) != 1 || list[0]["id"] != r.ProviderObjectID {
		t.Errorf("refunds at Xendit %v, want only %s", list, r.ProviderObjectID)
	}
	s.expectHalfRefunded(r.ProviderObjectID)
}
