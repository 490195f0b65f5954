package sandboxgwtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// End to end: Sekali's refunds service asks a gateway's emulation
// through the gateway's refunder, and the emulation tells Sekali of the
// refund as the gateway does; the answer and the notification, in
// whichever order they come, are one refund of the order.

// Shop is Sekali's side: an order of one unit (OrderTotal), its payments
// pipeline behind /callbacks/{provider}, its refunds.
type Shop struct {
	t        *testing.T
	DB       *gorm.DB
	Log      *slog.Logger
	Pay      *payments.Service
	OrderID  string
	Callback string        // where the gateway delivers: Sekali's base URL
	ready    chan struct{} // closed once Pay is set
	gate     chan struct{} // closed when notifications may be received
	release  func()        // closes gate
}

// OrderTotal is the shop's order: one unit.
const OrderTotal = 150000

// NewShop has an order, and a callback endpoint that receives nothing
// until Open.
func NewShop(t *testing.T) *Shop {
	t.Helper()
	s := &Shop{t: t, DB: testenv.NewDB(t), Log: testenv.Logger(t), ready: make(chan struct{}), gate: make(chan struct{})}
	s.release = sync.OnceFunc(func() { close(s.gate) })
	testenv.MustCreateProduct(t, s.DB, "E2E", OrderTotal, 10)
	o, err := orders.NewService(s.DB, s.Log, time.Now, time.Hour, jobs.Tasks{}).Create(t.Context(),
		orders.CreateRequest{CustomerEmail: "budi@example.id", Items: []orders.ItemRequest{{SKU: "E2E", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	s.OrderID = o.ID
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-s.ready
		<-s.gate
		out := s.Pay.Receive(r.Context(), payments.Delivery{Provider: strings.TrimPrefix(r.URL.Path, "/callbacks/"),
			Header: r.Header, Body: r.Body, ContentType: r.Header.Get("Content-Type")})
		w.WriteHeader(out.Status())
		json.NewEncoder(w).Encode(map[string]string{"result": out.Word()})
	}))
	t.Cleanup(srv.Close)
	s.Callback = srv.URL
	return s
}

// Gateway is a sandbox gateway that delivers to the shop, logging into
// its log.
func (s *Shop) Gateway() *sandboxgw.Sandbox {
	g := sandboxgw.New(nil, testenv.SandboxKey, s.Callback, s.Log)
	s.t.Cleanup(g.Close)
	return g
}

// Open builds the payments pipeline of provider (once the emulation's
// address is known: a provider may confirm with its gateway's API).
// Unless hold, notifications are received from now on; else from
// Release. At the end, held notifications are released and the
// deliveries of g in flight end before the pipeline closes.
func (s *Shop) Open(g *sandboxgw.Sandbox, provider payments.Provider, hold bool) {
	s.Pay = payments.NewService(s.DB, s.Log, time.Now, metrics.New(), jobs.Tasks{}, provider)
	s.t.Cleanup(s.Pay.Close)
	s.t.Cleanup(func() { s.release(); g.Close() })
	close(s.ready)
	if !hold {
		s.release()
	}
}

// Release lets the held notifications in.
func (s *Shop) Release() { s.release() }

// Notify delivers f in sender's format, as the gateway would, and
// expects it processed.
func (s *Shop) Notify(sender payments.Sender, f payments.Fact) {
	s.t.Helper()
	header, body, err := payments.Notification(sender, f, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	out := s.Pay.Receive(s.t.Context(), payments.Delivery{Provider: sender.Provider(), Header: header,
		Body: bytes.NewReader(body), ContentType: "application/json"})
	if out.Result != models.ResultProcessed {
		s.t.Fatalf("%s %s: %s (%s)", sender.Provider(), f.Status, out.Word(), out.Detail)
	}
}

// RefundHalf asks for half the order back through refunder, and sends
// the request: done.
func (s *Shop) RefundHalf(refunder gatewaycalls.Refunder) *models.GatewayRequest {
	s.t.Helper()
	done := s.Send(refunds.NewService(s.DB, s.Log, time.Now, metrics.New(), s.Pay, jobs.Tasks{}, refunder), "")
	if done.Phase != models.GatewayDone {
		s.t.Fatalf("send: %+v", done)
	}
	return done
}

// Send asks for half the order back through svc and sends it, once.
func (s *Shop) Send(svc *refunds.Service, reason string) *models.GatewayRequest {
	s.t.Helper()
	var r *models.GatewayRequest
	err := store.Transaction(s.t.Context(), s.DB, func(tx *gorm.DB) error {
		var err error
		r, err = svc.RequestTx(tx, refunds.Request{OrderID: s.OrderID, Amount: "75000", Reason: cmp.Or(reason, "damaged in transit"), Admin: "admin@example.com"})
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

// ExpectHalfRefunded checks the order: partially refunded, by one
// counted refunds row of half, under key.
func (s *Shop) ExpectHalfRefunded(key string) {
	s.t.Helper()
	var o models.Order
	var p models.Payment
	var rows []models.Refund
	if err := s.DB.Take(&o, "id = ?", s.OrderID).Error; err != nil {
		s.t.Fatal(err)
	}
	if err := s.DB.Take(&p, "order_id = ?", s.OrderID).Error; err != nil {
		s.t.Fatal(err)
	}
	if err := s.DB.Where("order_id = ? AND status IN ?", s.OrderID, []models.RefundStatus{models.RefundPending, models.RefundSucceeded}).Find(&rows).Error; err != nil {
		s.t.Fatal(err)
	}
	if o.Status != models.OrderPartiallyRefunded || p.RefundedAmount != OrderTotal/2 || len(rows) != 1 ||
		rows[0].Amount != OrderTotal/2 || rows[0].RefundKey != key {
		s.t.Errorf("order %s, refunded %d, refunds %+v; want partially_refunded by one refund of %d, %s",
			o.Status, p.RefundedAmount, rows, OrderTotal/2, key)
	}
}

// MustAudit runs the integrity audit without the jobs, and expects it
// green.
func (s *Shop) MustAudit() {
	s.t.Helper()
	report, err := audit.WithoutJobs(s.DB).Run(s.t.Context(), 0)
	if err != nil || !report.OK {
		s.t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// ExpectRefundFailedLater checks a refund the gateway accepts and fails
// later (Faults.FailRefundsLater), asked through refunder of the charge
// the shop was paid with in the gateway's format: it is counted when
// accepted and given back when it fails, whichever of the answer and the
// notifications comes first — the order is paid again with its stock,
// the refund record failed with the gateway's reason, the charge
// refundable in full again — and the refund asked again (a new refund, a
// new key) goes through. The audit stays green throughout.
func (s *Shop) ExpectRefundFailedLater(g *sandboxgw.Sandbox, refunder gatewaycalls.Refunder) {
	s.t.Helper()
	t := s.t
	svc := refunds.NewService(s.DB, s.Log, time.Now, metrics.New(), s.Pay, jobs.Tasks{}, refunder)
	g.Faults().FailRefundsLater(1)
	first := s.Send(svc, "")
	testenv.Eventually(t, "the gateway's refund.failed applied", func() bool {
		var r models.GatewayRequest
		s.DB.Take(&r, first.ID)
		return r.Phase == models.GatewayFailed
	})
	var r models.GatewayRequest
	var o models.Order
	var p models.Payment
	var row models.Refund
	s.DB.Take(&r, first.ID)
	s.DB.Take(&o, "id = ?", s.OrderID)
	s.DB.Take(&p, "order_id = ?", s.OrderID)
	s.DB.Take(&row, "refund_key = ?", r.ProviderObjectID)
	if o.Status != models.OrderPaid || p.Status != models.PaymentSucceeded || p.RefundedAmount != 0 || row.Status != models.RefundFailed ||
		row.FailureReason == "" || r.LastError != payments.FailedAfterAcceptance {
		t.Errorf("after the refund failed: order %s, payment %s with %d refunded, refund %s (%q), request %s (%q); want the order paid again",
			o.Status, p.Status, p.RefundedAmount, row.Status, row.FailureReason, r.Phase, r.LastError)
	}
	if left, err := svc.Refundable(t.Context(), s.OrderID, ""); err != nil || left.Left != OrderTotal {
		t.Errorf("refundable after the failure: %+v, %v; want all %d", left, err, OrderTotal)
	}
	again := s.Send(svc, "the first refund failed at the bank")
	if again.IdempotencyKey == first.IdempotencyKey || again.Phase != models.GatewayDone {
		t.Errorf("asked again: %+v; want a new key, done", again)
	}
	testenv.Eventually(t, "the second refund succeeded", func() bool {
		var n int64
		s.DB.Model(&models.Refund{}).Where("order_id = ? AND status = ?", s.OrderID, models.RefundSucceeded).Count(&n)
		return n == 1
	})
	s.ExpectHalfRefunded(again.ProviderObjectID)
	s.MustAudit()
}

// Delivered waits until the gateway's first refund notification of order
// was answered, and expects that answer to be 200 with result. A gateway may
// tell one refund in several events, one after the other (a refund
// event, then one of the charge with its refunded total): the
// first is the one that tells Sekali of the refund, and the later ones
// find it applied. Deliveries lists the newest first.
func Delivered(t testing.TB, g *sandboxgw.Sandbox, orderID, result string) {
	t.Helper()
	var first sandboxgw.Delivery
	testenv.Eventually(t, "the gateway's refund notification answered", func() bool {
		ds := g.Deliveries(orderID)
		for i := len(ds) - 1; i >= 0; i-- {
			if ds[i].Event == string(models.EventRefunded) && ds[i].Status != 0 { // 0: no answer, sent again later
				first = ds[i]
				return true
			}
		}
		return false
	})
	if first.Status != http.StatusOK || first.Result != result {
		t.Errorf("the refund notification: %d %s, want 200 %s", first.Status, first.Result, result)
	}
}

// AnswersLate answers the refund only after Wait: the gateway's
// notification comes first.
type AnswersLate struct {
	gatewaycalls.Refunder
	Wait func()
}

// Refund implements gatewaycalls.Refunder.
func (r AnswersLate) Refund(ctx context.Context, req gatewaycalls.RefundRequest) (gatewaycalls.Refunded, error) {
	a, err := r.Refunder.Refund(ctx, req)
	r.Wait()
	return a, err
}
