package payments_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The test secrets of the gateways named here. A gateway whose package
// sends its notifications through the pipeline itself
// (gatewaytest.Pipeline) is not named here: deleting it deletes its
// pipeline tests with it.
const (
	stripeSecret = "whsec_test_0123456789abcdef"
)

// gatewayProviders are the receiving adapters of the gateways named here,
// and the sandbox's.
func gatewayProviders(t *testing.T) []payments.Provider {
	t.Helper()
	stripeProvider, err := stripe.NewProvider("whsec_old_rotated_out," + stripeSecret)
	if err != nil {
		t.Fatal(err)
	}
	return []payments.Provider{sandbox.NewProvider([][]byte{testenv.SandboxKey}), stripeProvider}
}

// gatewayFixture is the pipeline with those providers, on a fresh
// database.
func gatewayFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, gatewayProviders(t)...)
	t.Cleanup(pay.Close)
	return &fixture{t: t, db: db, orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), pay: pay}
}

// delivery is one HTTP delivery to a provider.
type delivery struct {
	provider string
	header   http.Header
	body     []byte
}

// kit is d as gatewaytest's checks send it.
func (d delivery) kit() gatewaytest.Delivery {
	return gatewaytest.Delivery{Provider: d.provider, Header: d.header, Body: d.body}
}

// fromKit is d as these tests send it.
func fromKit(d gatewaytest.Delivery) delivery {
	return delivery{provider: d.Provider, header: d.Header, body: d.Body}
}

func (f *fixture) send(d delivery) payments.Outcome {
	f.t.Helper()
	h := d.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return f.pay.Receive(context.Background(), payments.Delivery{Provider: d.provider, Header: h, Body: bytesReader(d.body), ContentType: "application/json"})
}

// stripeEvent builds a Stripe event of type typ about object, signed with
// stripe-go's own test helper.
func stripeEvent(id, typ string, object map[string]any) delivery {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2020-08-27",
		"created": time.Now().Unix(), "data": map[string]any{"object": object}})
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: b, Secret: stripeSecret, Timestamp: time.Now()})
	return delivery{provider: stripe.Name, header: http.Header{"Stripe-Signature": {signed.Header}}, body: b}
}

func paymentIntent(orderID, piID string, amount int64, currency string) map[string]any {
	return map[string]any{"id": piID, "object": "payment_intent", "amount": amount, "amount_received": amount,
		"currency": currency, "status": "succeeded", "metadata": map[string]string{"order_id": orderID}}
}

// gateway describes one provider's notifications for the shared tests
// (gatewaytest.Notifications).
type gateway struct {
	name string
	// paid is a notification that pays orderID's charge ref with amount
	// (Sekali's minor units) in currency; variant 0 and 1 are the two
	// notifications the gateway sends for one payment.
	paid func(orderID, ref string, amount int64, currency string, variant int) delivery
	// changed is d under its key with another body, genuine.
	changed func(d delivery) delivery
	// forged is a paid notification with a wrong signature or token.
	forged func(orderID, ref string) delivery
	// ignored is a notification the shop does not handle.
	ignored func(orderID string) delivery
}

// kit is g as gatewaytest.AppliesOnce sends it.
func (g gateway) kit() gatewaytest.Notifications {
	return gatewaytest.Notifications{
		Name: g.name,
		Paid: func(orderID, ref string, amount int64, currency string, variant int) gatewaytest.Delivery {
			return g.paid(orderID, ref, amount, currency, variant).kit()
		},
		Changed: func(d gatewaytest.Delivery) gatewaytest.Delivery { return g.changed(fromKit(d)).kit() },
		Forged:  func(orderID, ref string) gatewaytest.Delivery { return g.forged(orderID, ref).kit() },
		Ignored: func(orderID string) gatewaytest.Delivery { return g.ignored(orderID).kit() },
	}
}

// gatewayNamed is the entry of gateways called name.
func gatewayNamed(name string) gateway {
	for _, g := range gateways {
		if g.name == name {
			return g
		}
	}
	panic("no gateway " + name)
}

var gateways = []gateway{
	{
		name: "stripe",
		paid: func(orderID, ref string, amount int64, currency string, variant int) delivery {
			stripeAmount := amount * 100 // Stripe counts IDR (and USD) in hundredths
			if variant == 0 {
				return stripeEvent("evt_pi_"+ref, "payment_intent.succeeded", paymentIntent(orderID, ref, stripeAmount, lower(currency)))
			}
			return stripeEvent("evt_cs_"+ref, "checkout.session.completed", map[string]any{"id": "cs_" + ref, "object": "checkout.session",
				"client_reference_id": orderID, "amount_total": stripeAmount, "currency": lower(currency), "payment_status": "paid",
				"payment_intent": ref})
		},
		// A changed Stripe body must be signed again.
		changed: func(d delivery) delivery {
			var obj map[string]any
			json.Unmarshal(d.body, &obj)
			obj["extra_field_the_gateway_added"] = "something else"
			obj["livemode"] = true
			return stripeEventRaw(obj)
		},
		forged: func(orderID, ref string) delivery {
			d := stripeEvent("evt_forged_"+ref, "payment_intent.succeeded", paymentIntent(orderID, ref, 5000000, "idr"))
			signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: d.body, Secret: "whsec_not_ours_000", Timestamp: time.Now()})
			d.header.Set("Stripe-Signature", signed.Header)
			return d
		},
		ignored: func(orderID string) delivery {
			return stripeEvent("evt_customer_"+orderID, "customer.created", map[string]any{"id": "cus_1", "object": "customer"})
		},
	},
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Each gateway's notifications through the one pipeline
// (gatewaytest.AppliesOnce): a payment applies once, its repeat is a
// duplicate, the same key with another body a conflict, a forgery is
// refused, an event the shop does not handle is ignored, a wrong amount
// or currency is rejected, 50 concurrent copies make one effect, and the
// two notifications a gateway sends for one payment converge in either
// order. A gateway whose package runs the check itself is not listed.
func TestGatewaysApplyOnce(t *testing.T) {
	t.Parallel()
	for _, g := range gateways {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			gatewaytest.AppliesOnce(t, gatewaytest.NewPipeline(t, gatewayProviders(t)...), g.kit())
		})
	}
}

// stripeEventRaw signs an event given whole.
func stripeEventRaw(event map[string]any) delivery {
	b, _ := json.Marshal(event)
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: b, Secret: stripeSecret, Timestamp: time.Now()})
	return delivery{provider: stripe.Name, header: http.Header{"Stripe-Signature": {signed.Header}}, body: b}
}

// Each gateway's refund notification refunds the paid order's charge.
func TestGatewayRefunds(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	for _, tt := range []struct {
		name   string
		paid   func(id, ref string) delivery
		refund func(id, ref string) delivery
	}{
		{"stripe", func(id, ref string) delivery {
			return stripeEvent("evt_pi_"+ref, "payment_intent.succeeded", paymentIntent(id, ref, 5000000, "idr"))
		}, func(id, ref string) delivery {
			return stripeEvent("evt_refund_"+ref, "charge.refunded", map[string]any{"id": "ch_" + ref, "object": "charge",
				"payment_intent": ref, "amount_refunded": 5000000, "currency": "idr", "metadata": map[string]string{"order_id": id}})
		}},
	} {
		id, sku := f.orderIn(models.OrderPending)
		ref := "ref-refund-" + tt.name + "-" + id
		if out := f.send(tt.paid(id, ref)); out.Result != models.ResultProcessed {
			t.Fatalf("%s: paying: %+v", tt.name, out)
		}
		before := f.snapshot(id, sku)
		out := f.send(tt.refund(id, ref))
		after := f.snapshot(id, sku)
		if out.Result != models.ResultProcessed || after.status != models.OrderRefunded || after.payments[ref] != models.PaymentRefunded || after.stock != before.stock {
			t.Errorf("%s refund: %s, %+v; want the order and its payment refunded, the stock kept", tt.name, out.Result, after)
		}
		// After the refund: the refunded charge paid again (a late copy
		// under another key) is stale; a new charge is money taken for a
		// refunded order, recorded to be refunded.
		again := stripeEvent("evt_again_"+ref, "payment_intent.succeeded", paymentIntent(id, ref, 5000000, "idr"))
		if out := f.send(again); out.Result != models.ResultStale {
			t.Errorf("%s: the refunded charge paid again: %s, want stale", tt.name, out.Result)
		}
		if out := f.send(tt.paid(id, ref+"-new")); out.Result != models.ResultProcessed {
			t.Errorf("%s: a new charge on the refunded order: %+v", tt.name, out)
		}
		final := f.snapshot(id, sku)
		if final.status != models.OrderRefunded || final.payments[ref] != models.PaymentRefunded ||
			final.payments[ref+"-new"] != models.PaymentRefundRequired || final.stock != before.stock {
			t.Errorf("%s after the refund: %+v; want the order still refunded, the new charge refund_required", tt.name, final)
		}
	}
}

// Amounts are converted exactly, or refused: Stripe's 15000050 IDR
// hundredths have a fraction the rupiah cannot hold.
func TestGatewayAmountsAreExact(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	if out := f.send(stripeEvent("evt_frac", "payment_intent.succeeded", paymentIntent(id, "pi_frac", 5000050, "idr"))); out.Status() != 422 {
		t.Errorf("Stripe 5000050 IDR hundredths: %d %s", out.Status(), out.Result)
	}
	// Stripe's hundredths of IDR are Sekali's rupiah.
	if out := f.send(stripeEvent("evt_ok", "payment_intent.succeeded", paymentIntent(id, "pi_ok", price*100, "idr"))); out.Result != models.ResultProcessed {
		t.Errorf("Stripe %d IDR hundredths for a Rp %d order: %s (%s)", price*100, price, out.Result, out.Detail)
	}
}

// Stripe's retry of an event may count fewer pending_webhooks than its
// first delivery: that member describes the delivery, not the event, so
// the retry is a duplicate. Any other change under the event id is still
// a conflict.
func TestStripeRetryWithOtherPendingWebhooksIsADuplicate(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	event := func(pending int, amount int64) delivery {
		return stripeEventRaw(map[string]any{"id": "evt_retry_" + id, "object": "event", "type": "payment_intent.succeeded",
			"pending_webhooks": pending, "data": map[string]any{"object": paymentIntent(id, "pi_retry_"+id, amount, "idr")}})
	}
	if out := f.send(event(2, 5000000)); out.Result != models.ResultProcessed {
		t.Fatalf("first delivery: %+v", out)
	}
	if out := f.send(event(1, 5000000)); out.Result != models.ResultDuplicate {
		t.Errorf("the retry with pending_webhooks 1: %s (%s), want duplicate", out.Result, out.Detail)
	}
	if out := f.send(event(1, 5000100)); out.Result != models.ResultConflict {
		t.Errorf("another amount under the event id: %s, want conflict", out.Result)
	}
}

// Stripe's payment_intent.payment_failed is one declined attempt: the
// PaymentIntent returns to requires_payment_method and the customer tries
// again on it. The order stays pending with its stock until the
// payment_intent.succeeded that follows pays it, once; only
// payment_intent.canceled ends the payment, and the order with it.
func TestStripeFailedAttemptThenSuccessPaysOnce(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, sku := f.orderIn(models.OrderPending)
	before := f.snapshot(id, sku)
	failedPI := paymentIntent(id, "pi_retry_"+id, 5000000, "idr")
	failedPI["status"], failedPI["amount_received"] = "requires_payment_method", 0
	if out := f.send(stripeEvent("evt_failed_"+id, "payment_intent.payment_failed", failedPI)); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Fatalf("payment_failed: %s %s (%s), want processed with the order pending", out.Result, out.OrderStatus, out.Detail)
	}
	if s := f.snapshot(id, sku); s.stock != before.stock || s.payments["pi_retry_"+id] != models.PaymentFailed {
		t.Fatalf("after payment_failed: %+v; want the stock held and the attempt failed", s)
	}
	if out := f.send(stripeEvent("evt_ok_"+id, "payment_intent.succeeded", paymentIntent(id, "pi_retry_"+id, 5000000, "idr"))); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("succeeded after the failure: %+v", out)
	}
	if s := f.snapshot(id, sku); s.stock != before.stock || s.payments["pi_retry_"+id] != models.PaymentSucceeded || s.outbox != 2 {
		t.Errorf("after the success: %+v; want paid once, the stock never released", s)
	}

	// payment_intent.canceled ends the payment: the order fails and
	// releases its stock.
	other, sku := f.orderIn(models.OrderPending)
	before = f.snapshot(other, sku)
	canceled := paymentIntent(other, "pi_cancel_"+other, 5000000, "idr")
	canceled["status"], canceled["amount_received"] = "canceled", 0
	if out := f.send(stripeEvent("evt_cancel_"+other, "payment_intent.canceled", canceled)); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderFailed {
		t.Fatalf("canceled: %+v", out)
	}
	if s := f.snapshot(other, sku); s.stock != before.stock+1 {
		t.Errorf("after canceled: stock %d, want %d (released)", s.stock, before.stock+1)
	}
}

// refundsOf is what the database holds of an order's refunds: the
// payment's refunded total and each refund's key and amount.
func (f *fixture) refundsOf(orderID string) (refunded int64, refunds map[string]int64) {
	f.t.Helper()
	f.db.Raw("SELECT coalesce(sum(refunded_amount), 0) FROM payments WHERE order_id = ?", orderID).Scan(&refunded)
	var rows []models.Refund
	f.db.Find(&rows, "order_id = ?", orderID)
	refunds = map[string]int64{}
	for _, r := range rows {
		refunds[r.RefundKey] = r.Amount
	}
	return refunded, refunds
}

// Stripe states only the charge's cumulative amount_refunded (its refund
// list is not expanded at current API versions): each charge.refunded
// adds what its total adds, whatever order they come in.
func TestStripeRefundsByTheChargeTotal(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	pi := "pi_refunds_" + id
	f.send(stripeEvent("evt_pay_"+id, "payment_intent.succeeded", paymentIntent(id, pi, 5000000, "idr")))
	refunded := func(event string, total int64) payments.Outcome {
		return f.send(stripeEvent(event, "charge.refunded", map[string]any{"id": "ch_" + pi, "object": "charge", "payment_intent": pi,
			"amount": 5000000, "amount_refunded": total * 100, "refunded": total == price, "currency": "idr", "metadata": map[string]string{"order_id": id}}))
	}
	if out := refunded("evt_r1_"+id, 20000); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPartiallyRefunded {
		t.Fatalf("20000 refunded: %+v", out)
	}
	if out := refunded("evt_r2_"+id, 50000); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderRefunded {
		t.Fatalf("50000 refunded: %+v", out)
	}
	if out := refunded("evt_r1_late_"+id, 20000); out.Result != models.ResultStale {
		t.Errorf("an earlier total, late: %s, want stale", out.Result)
	}
	if total, rows := f.refundsOf(id); total != 50000 || len(rows) != 2 || rows[pi+":refunded:20000"] != 20000 || rows[pi+":refunded:50000"] != 30000 {
		t.Errorf("refunded %d in %v; want 20000 then 30000", total, rows)
	}
}

// A body two parsers could read differently is refused by every gateway
// before anything is written: keys equal but for case (encoding/json
// would fill one field from either, the last one winning) are a 400, in a
// gateway's own body and in one nested inside it. (A gateway whose
// package runs its pipeline tests checks its own there, with what it
// documents as a number sent in quotes, a 422.)
func TestAmbiguousBodiesAreRefusedByEveryGateway(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	// after writes extra right after the member member of body: a key
	// encoding/json cannot write beside its case variant.
	after := func(body []byte, member, extra string) []byte {
		if !strings.Contains(string(body), member) {
			t.Fatalf("no %s in %s", member, body)
		}
		return []byte(strings.Replace(string(body), member, member+extra, 1))
	}
	sbx := testenv.SandboxBody(id, "tx-case-sbx-"+id, models.EventPaid, price)
	sbx = after(sbx, `"payment_status":"paid"`, `,"PAYMENT_STATUS":"expired"`)
	stp := stripeEvent("evt_case_"+id, "payment_intent.succeeded", paymentIntent(id, "pi_case_"+id, 5000000, "idr"))
	stp.body = after(stp.body, `"status":"succeeded"`, `,"Status":"canceled"`) // inside data.object
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: stp.body, Secret: stripeSecret, Timestamp: time.Now()})
	stp.header = http.Header{"Stripe-Signature": {signed.Header}}
	for _, tc := range []struct {
		name string
		d    delivery
	}{
		{"sandbox", delivery{provider: sandbox.Name, header: testenv.SandboxHeaders("evt_case_"+id, sbx, time.Now()), body: sbx}},
		{"stripe", stp},
	} {
		if !json.Valid(tc.d.body) {
			t.Fatalf("%s: not JSON: %s", tc.name, tc.d.body)
		}
		if out := f.send(tc.d); out.Status() != 400 || out.Refusal != models.EInvalidPayload {
			t.Errorf("%s with keys equal but for case: %d %s (%s), want 400 invalid_payload\n%s", tc.name, out.Status(), out.Result, out.Detail, tc.d.body)
		}
	}
	var callbacks int64
	f.db.Model(&models.PaymentCallback{}).Where("order_id = ?", id).Count(&callbacks)
	if callbacks != 0 {
		t.Errorf("%d callbacks recorded from refused bodies", callbacks)
	}
}

// checkoutSession is a Checkout Session of orderID paying through
// PaymentIntent pi, with its payment_status.
func checkoutSession(orderID, pi, paymentStatus string) map[string]any {
	return map[string]any{"id": "cs_" + pi, "object": "checkout.session", "client_reference_id": orderID,
		"payment_intent": pi, "amount_total": 5000000, "currency": "idr", "payment_status": paymentStatus, "status": "complete"}
}

// Stripe Checkout with a delayed method (a bank debit): completed comes
// unpaid, then async_payment_succeeded pays the order, once — it used to
// be ignored, and the order expired with the money taken. A failed
// delayed payment ends that attempt, not the order; an expired session
// ends the payment and releases the stock.
func TestStripeAsyncCheckoutPaysOnce(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, sku := f.orderIn(models.OrderPending)
	pi := "pi_async_" + id
	if out := f.send(stripeEvent("evt_cs_done_"+id, "checkout.session.completed", checkoutSession(id, pi, "unpaid"))); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Fatalf("completed, unpaid: %+v", out)
	}
	succeeded := stripeEvent("evt_cs_async_"+id, "checkout.session.async_payment_succeeded", checkoutSession(id, pi, "paid"))
	if out := f.send(succeeded); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("async_payment_succeeded: %s %s (%s), want processed and paid", out.Result, out.OrderStatus, out.Detail)
	}
	if out := f.send(succeeded); out.Result != models.ResultDuplicate {
		t.Errorf("async_payment_succeeded again: %s, want duplicate", out.Result)
	}
	if out := f.send(stripeEvent("evt_pi_ok_"+id, "payment_intent.succeeded", paymentIntent(id, pi, 5000000, "idr"))); out.Result != models.ResultStale {
		t.Errorf("the PaymentIntent's own succeeded event: %s, want stale (one charge)", out.Result)
	}
	if s := f.snapshot(id, sku); s.status != models.OrderPaid || len(s.payments) != 1 || s.outbox != 2 {
		t.Errorf("after the delayed payment: %+v; want paid once", s)
	}

	failed, sku := f.orderIn(models.OrderPending)
	before := f.snapshot(failed, sku)
	if out := f.send(stripeEvent("evt_cs_fail_"+failed, "checkout.session.async_payment_failed", checkoutSession(failed, "pi_fail_"+failed, "unpaid"))); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Errorf("async_payment_failed: %s %s, want processed with the order pending", out.Result, out.OrderStatus)
	}
	expired := stripeEvent("evt_cs_exp_"+failed, "checkout.session.expired", map[string]any{"id": "cs_exp_" + failed, "object": "checkout.session",
		"client_reference_id": failed, "amount_total": 5000000, "currency": "idr", "payment_status": "unpaid", "status": "expired"})
	if out := f.send(expired); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderExpired {
		t.Errorf("checkout.session.expired: %s %s, want processed and expired", out.Result, out.OrderStatus)
	}
	if s := f.snapshot(failed, sku); s.stock != before.stock+1 {
		t.Errorf("after the session expired: stock %d, want %d (released)", s.stock, before.stock+1)
	}
}

// stripeDispute is a charge.dispute.* event of PaymentIntent pi.
func stripeDispute(id, typ, pi, status string) delivery {
	return stripeEvent(id, typ, map[string]any{"id": "du_" + pi, "object": "dispute", "amount": 5000000, "currency": "idr",
		"charge": "ch_" + pi, "payment_intent": pi, "status": status, "reason": "fraudulent"})
}

// A Stripe dispute names its PaymentIntent, not the order: it is recorded
// on that charge's payment (open, then lost) and in the order's story as
// its callbacks, and changes no order status. One of a charge the shop
// does not know is ignored; an "opened" that comes after the close is
// stale.
func TestStripeDisputesAreRecordedOnThePayment(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, sku := f.orderIn(models.OrderPending)
	pi := "pi_dispute_" + id
	f.send(stripeEvent("evt_pay_"+id, "payment_intent.succeeded", paymentIntent(id, pi, 5000000, "idr")))
	dispute := func() (d models.Dispute) {
		f.db.Raw("SELECT dispute FROM payments WHERE provider_reference = ?", pi).Scan(&d)
		return d
	}
	out := f.send(stripeDispute("evt_du_open_"+id, "charge.dispute.created", pi, "needs_response"))
	if out.Result != models.ResultProcessed || out.OrderID != id || out.OrderStatus != models.OrderPaid || dispute() != models.DisputeOpen {
		t.Fatalf("dispute created: %s for %q, order %s, payment's dispute %q; want processed, the order still paid, the dispute open", out.Result, out.OrderID, out.OrderStatus, dispute())
	}
	if out := f.send(stripeDispute("evt_du_lost_"+id, "charge.dispute.closed", pi, "lost")); out.Result != models.ResultProcessed || dispute() != models.DisputeLost {
		t.Errorf("dispute lost: %s, payment's dispute %q; want processed and lost", out.Result, dispute())
	}
	if out := f.send(stripeDispute("evt_du_late_"+id, "charge.dispute.updated", pi, "under_review")); out.Result != models.ResultStale || dispute() != models.DisputeLost {
		t.Errorf("an update after the close: %s, dispute %q; want stale, still lost", out.Result, dispute())
	}
	if s := f.snapshot(id, sku); s.status != models.OrderPaid || s.payments[pi] != models.PaymentSucceeded {
		t.Errorf("after a lost dispute: %+v; want the order paid, the payment succeeded (and marked lost)", s)
	}
	var events []string
	f.db.Model(&models.PaymentCallback{}).Where("order_id = ?", id).Order("id").Pluck("event_status", &events)
	if !slices.Equal(events, []string{"paid", "disputed", "dispute_lost", "disputed"}) {
		t.Errorf("the order's callbacks: %v; want its payment and its dispute's three", events)
	}
	if out := f.send(stripeDispute("evt_du_other_"+id, "charge.dispute.created", "pi_not_ours", "needs_response")); out.Status() != 200 || out.Result != models.ResultIgnored {
		t.Errorf("a dispute of a charge the shop does not know: %d %s, want 200 ignored", out.Status(), out.Result)
	}
	report, err := audit.WithoutJobs(f.db).Run(context.Background(), 0)
	if err != nil || !report.OK {
		t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}
