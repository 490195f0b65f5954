package stripe_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Stripe's events through Sekali's payments pipeline, on a database of
// their own (gatewaytest.Pipeline): what app/payments checks of every
// gateway, and what only Stripe's events do to an order, in Stripe's
// package — deleting the package deletes them with it.

const price = gatewaytest.Price

// provider is the receiving adapter during a rotation: an old endpoint
// secret first, then the one the events here are signed with.
func provider(t testing.TB) *stripe.Provider {
	t.Helper()
	p, err := stripe.NewProvider("whsec_old_rotated_out," + secret)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stripeEvent builds a Stripe event of type typ about object, signed with
// stripe-go's own test helper.
func stripeEvent(id, typ string, object map[string]any) gatewaytest.Delivery {
	return stripeEventRaw(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2020-08-27",
		"created": time.Now().Unix(), "data": map[string]any{"object": object}})
}

// stripeEventRaw signs an event given whole.
func stripeEventRaw(event map[string]any) gatewaytest.Delivery {
	b, _ := json.Marshal(event)
	return signed(b, secret)
}

// signed is body as Stripe delivers it, signed now with endpoint secret
// whsec.
func signed(body []byte, whsec string) gatewaytest.Delivery {
	s := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: whsec, Timestamp: time.Now()})
	return gatewaytest.Delivery{Provider: stripe.Name, Header: http.Header{"Stripe-Signature": {s.Header}}, Body: body}
}

// paymentIntent is a succeeded PaymentIntent of orderID, amount in
// Stripe's units (hundredths of a rupiah).
func paymentIntent(orderID, piID string, amount int64, currency string) map[string]any {
	return map[string]any{"id": piID, "object": "payment_intent", "amount": amount, "amount_received": amount,
		"currency": currency, "status": "succeeded", "metadata": map[string]string{"order_id": orderID}}
}

// checkoutSession is a Checkout Session of orderID paying through
// PaymentIntent pi, with its payment_status.
func checkoutSession(orderID, pi, paymentStatus string) map[string]any {
	return map[string]any{"id": "cs_" + pi, "object": "checkout.session", "client_reference_id": orderID,
		"payment_intent": pi, "amount_total": 5000000, "currency": "idr", "payment_status": paymentStatus, "status": "complete"}
}

// stripeDispute is a charge.dispute.* event of PaymentIntent pi.
func stripeDispute(id, typ, pi, status string) gatewaytest.Delivery {
	return stripeEvent(id, typ, map[string]any{"id": "du_" + pi, "object": "dispute", "amount": 5000000, "currency": "idr",
		"charge": "ch_" + pi, "payment_intent": pi, "status": status, "reason": "fraudulent"})
}

// stripeRefundEvent is Stripe's event of type typ about refund reID of
// PaymentIntent pi, of amount (Sekali's rupiah) in state status; orderID
// "" is a refund made in Stripe's dashboard (no metadata).
func stripeRefundEvent(id, typ, orderID, pi, reID string, amount int64, status, reason string) gatewaytest.Delivery {
	object := map[string]any{"id": reID, "object": "refund", "amount": amount * 100, "currency": "idr",
		"payment_intent": pi, "charge": "ch_" + pi, "status": status, "metadata": map[string]string{}}
	if orderID != "" {
		object["metadata"] = map[string]string{"order_id": orderID, "refund_key": orderID + "-R1"}
	}
	if reason != "" {
		object["failure_reason"] = reason
	}
	return stripeEvent(id, typ, object)
}

// stripeChargeRefunded is Stripe's charge.refunded: only the charge's
// refunded total (Sekali's rupiah).
func stripeChargeRefunded(id, orderID, pi string, total int64) gatewaytest.Delivery {
	return stripeEvent(id, "charge.refunded", map[string]any{"id": "ch_" + pi, "object": "charge", "payment_intent": pi,
		"amount": price * 100, "amount_refunded": total * 100, "refunded": total == price, "currency": "idr",
		"metadata": map[string]string{"order_id": orderID}})
}

// paying is the event that pays orderID's charge ref with amount (Sekali's
// minor units) in currency: variant 0 is payment_intent.succeeded,
// variant 1 checkout.session.completed, paid — the two events Stripe
// sends for one Checkout payment.
func paying(orderID, ref string, amount int64, currency string, variant int) gatewaytest.Delivery {
	stripeAmount := amount * 100 // Stripe counts IDR (and USD) in hundredths
	if variant == 0 {
		return stripeEvent("evt_pi_"+ref, "payment_intent.succeeded", paymentIntent(orderID, ref, stripeAmount, strings.ToLower(currency)))
	}
	return stripeEvent("evt_cs_"+ref, "checkout.session.completed", map[string]any{"id": "cs_" + ref, "object": "checkout.session",
		"client_reference_id": orderID, "amount_total": stripeAmount, "currency": strings.ToLower(currency), "payment_status": "paid",
		"payment_intent": ref})
}

// Stripe's events apply once (gatewaytest.AppliesOnce):
// payment_intent.succeeded and checkout.session.completed of one payment,
// in either order, are one payment; an event under its id with another
// body (signed again: Stripe signs the body) is a conflict; one signed
// with another endpoint secret is refused; an event type Sekali does not
// act on is ignored.
func TestStripeCallbacksApplyOnce(t *testing.T) {
	t.Parallel()
	gatewaytest.AppliesOnce(t, gatewaytest.NewPipeline(t, provider(t)), gatewaytest.Notifications{
		Name: stripe.Name,
		Paid: paying,
		Changed: func(d gatewaytest.Delivery) gatewaytest.Delivery {
			var obj map[string]any
			json.Unmarshal(d.Body, &obj)
			obj["extra_field_the_gateway_added"] = "something else"
			obj["livemode"] = true
			return stripeEventRaw(obj)
		},
		Forged: func(orderID, ref string) gatewaytest.Delivery {
			d := stripeEvent("evt_forged_"+ref, "payment_intent.succeeded", paymentIntent(orderID, ref, 5000000, "idr"))
			return signed(d.Body, "whsec_not_ours_000")
		},
		Ignored: func(orderID string) gatewaytest.Delivery {
			return stripeEvent("evt_customer_"+orderID, "customer.created", map[string]any{"id": "cus_1", "object": "customer"})
		},
	})
}

// charge.refunded refunds the paid order's charge, the stock kept. After
// the refund, the refunded charge paid again (a late copy under another
// event id) is stale; a new charge is money taken for a refunded order,
// recorded to be refunded.
func TestStripeChargeRefundedRefundsThePaidOrder(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, sku := p.Order()
	ref := "ref-refund-stripe-" + id
	pay := func(ref string) gatewaytest.Delivery {
		return stripeEvent("evt_pi_"+ref, "payment_intent.succeeded", paymentIntent(id, ref, 5000000, "idr"))
	}
	if out := p.Send(pay(ref)); out.Result != models.ResultProcessed {
		t.Fatalf("paying: %+v", out)
	}
	before := p.State(id, sku)
	out := p.Send(stripeEvent("evt_refund_"+ref, "charge.refunded", map[string]any{"id": "ch_" + ref, "object": "charge",
		"payment_intent": ref, "amount_refunded": 5000000, "currency": "idr", "metadata": map[string]string{"order_id": id}}))
	after := p.State(id, sku)
	if out.Result != models.ResultProcessed || after.Status != models.OrderRefunded || after.Payments[ref] != models.PaymentRefunded || after.Stock != before.Stock {
		t.Errorf("refund: %s, %+v; want the order and its payment refunded, the stock kept", out.Result, after)
	}
	again := stripeEvent("evt_again_"+ref, "payment_intent.succeeded", paymentIntent(id, ref, 5000000, "idr"))
	if out := p.Send(again); out.Result != models.ResultStale {
		t.Errorf("the refunded charge paid again: %s, want stale", out.Result)
	}
	if out := p.Send(pay(ref + "-new")); out.Result != models.ResultProcessed {
		t.Errorf("a new charge on the refunded order: %+v", out)
	}
	final := p.State(id, sku)
	if final.Status != models.OrderRefunded || final.Payments[ref] != models.PaymentRefunded ||
		final.Payments[ref+"-new"] != models.PaymentRefundRequired || final.Stock != before.Stock {
		t.Errorf("after the refund: %+v; want the order still refunded, the new charge refund_required", final)
	}
}

// Amounts are converted exactly, or refused: Stripe's 5000050 IDR
// hundredths have a fraction the rupiah cannot hold; its hundredths of
// IDR are Sekali's rupiah.
func TestStripeAmountsAreExact(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, _ := p.Order()
	if out := p.Send(stripeEvent("evt_frac", "payment_intent.succeeded", paymentIntent(id, "pi_frac", 5000050, "idr"))); out.Status() != 422 {
		t.Errorf("Stripe 5000050 IDR hundredths: %d %s", out.Status(), out.Result)
	}
	if out := p.Send(stripeEvent("evt_ok", "payment_intent.succeeded", paymentIntent(id, "pi_ok", price*100, "idr"))); out.Result != models.ResultProcessed {
		t.Errorf("Stripe %d IDR hundredths for a Rp %d order: %s (%s)", price*100, price, out.Result, out.Detail)
	}
}

// An event two parsers could read differently is refused before anything
// is written: members equal but for case inside data.object
// (encoding/json would fill one field from either, the last one winning)
// are a 400, however genuine the signature.
func TestStripeAmbiguousCallbacksAreRefused(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, _ := p.Order()
	d := stripeEvent("evt_case_"+id, "payment_intent.succeeded", paymentIntent(id, "pi_case_"+id, 5000000, "idr"))
	if !strings.Contains(string(d.Body), `"status":"succeeded"`) {
		t.Fatalf("no status in %s", d.Body)
	}
	body := []byte(strings.Replace(string(d.Body), `"status":"succeeded"`, `"status":"succeeded","Status":"canceled"`, 1))
	if !json.Valid(body) {
		t.Fatalf("not JSON: %s", body)
	}
	if out := p.Send(signed(body, secret)); out.Status() != 400 || out.Refusal != models.EInvalidPayload {
		t.Errorf("members equal but for case: %d %s (%s), want 400 invalid_payload\n%s", out.Status(), out.Result, out.Detail, body)
	}
	if n := p.Callbacks(id); n != 0 {
		t.Errorf("%d callbacks recorded from a refused body", n)
	}
}

// Stripe's retry of an event may count fewer pending_webhooks than its
// first delivery: that member describes the delivery, not the event, so
// the retry is a duplicate. Any other change under the event id is still
// a conflict.
func TestStripeRetryWithOtherPendingWebhooksIsADuplicate(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, _ := p.Order()
	event := func(pending int, amount int64) gatewaytest.Delivery {
		return stripeEventRaw(map[string]any{"id": "evt_retry_" + id, "object": "event", "type": "payment_intent.succeeded",
			"pending_webhooks": pending, "data": map[string]any{"object": paymentIntent(id, "pi_retry_"+id, amount, "idr")}})
	}
	if out := p.Send(event(2, 5000000)); out.Result != models.ResultProcessed {
		t.Fatalf("first delivery: %+v", out)
	}
	if out := p.Send(event(1, 5000000)); out.Result != models.ResultDuplicate {
		t.Errorf("the retry with pending_webhooks 1: %s (%s), want duplicate", out.Result, out.Detail)
	}
	if out := p.Send(event(1, 5000100)); out.Result != models.ResultConflict {
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
	p := gatewaytest.NewPipeline(t, provider(t))
	id, sku := p.Order()
	before := p.State(id, sku)
	failedPI := paymentIntent(id, "pi_retry_"+id, 5000000, "idr")
	failedPI["status"], failedPI["amount_received"] = "requires_payment_method", 0
	if out := p.Send(stripeEvent("evt_failed_"+id, "payment_intent.payment_failed", failedPI)); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Fatalf("payment_failed: %s %s (%s), want processed with the order pending", out.Result, out.OrderStatus, out.Detail)
	}
	if s := p.State(id, sku); s.Stock != before.Stock || s.Payments["pi_retry_"+id] != models.PaymentFailed {
		t.Fatalf("after payment_failed: %+v; want the stock held and the attempt failed", s)
	}
	if out := p.Send(stripeEvent("evt_ok_"+id, "payment_intent.succeeded", paymentIntent(id, "pi_retry_"+id, 5000000, "idr"))); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("succeeded after the failure: %+v", out)
	}
	if s := p.State(id, sku); s.Stock != before.Stock || s.Payments["pi_retry_"+id] != models.PaymentSucceeded || s.Outbox != 2 {
		t.Errorf("after the success: %+v; want paid once, the stock never released", s)
	}

	// payment_intent.canceled ends the payment: the order fails and
	// releases its stock.
	other, sku := p.Order()
	before = p.State(other, sku)
	canceled := paymentIntent(other, "pi_cancel_"+other, 5000000, "idr")
	canceled["status"], canceled["amount_received"] = "canceled", 0
	if out := p.Send(stripeEvent("evt_cancel_"+other, "payment_intent.canceled", canceled)); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderFailed {
		t.Fatalf("canceled: %+v", out)
	}
	if s := p.State(other, sku); s.Stock != before.Stock+1 {
		t.Errorf("after canceled: stock %d, want %d (released)", s.Stock, before.Stock+1)
	}
}

// refundsOf is what the database holds of an order's refunds: its
// payments' refunded total and each refund's key and amount.
func refundsOf(p *gatewaytest.Pipeline, orderID string) (refunded int64, refunds map[string]int64) {
	p.T.Helper()
	p.DB.Raw("SELECT coalesce(sum(refunded_amount), 0) FROM payments WHERE order_id = ?", orderID).Scan(&refunded)
	var rows []models.Refund
	p.DB.Find(&rows, "order_id = ?", orderID)
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
	p := gatewaytest.NewPipeline(t, provider(t))
	id, _ := p.Order()
	pi := "pi_refunds_" + id
	p.Send(stripeEvent("evt_pay_"+id, "payment_intent.succeeded", paymentIntent(id, pi, 5000000, "idr")))
	refunded := func(event string, total int64) payments.Outcome {
		return p.Send(stripeEvent(event, "charge.refunded", map[string]any{"id": "ch_" + pi, "object": "charge", "payment_intent": pi,
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
	if total, rows := refundsOf(p, id); total != 50000 || len(rows) != 2 || rows[pi+":refunded:20000"] != 20000 || rows[pi+":refunded:50000"] != 30000 {
		t.Errorf("refunded %d in %v; want 20000 then 30000", total, rows)
	}
}

// Stripe Checkout with a delayed method (a bank debit): completed comes
// unpaid, then async_payment_succeeded pays the order, once — were it
// ignored, the order would expire with the money taken. A failed
// delayed payment ends that attempt, not the order; an expired session
// ends the payment and releases the stock.
func TestStripeAsyncCheckoutPaysOnce(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, sku := p.Order()
	pi := "pi_async_" + id
	if out := p.Send(stripeEvent("evt_cs_done_"+id, "checkout.session.completed", checkoutSession(id, pi, "unpaid"))); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Fatalf("completed, unpaid: %+v", out)
	}
	succeeded := stripeEvent("evt_cs_async_"+id, "checkout.session.async_payment_succeeded", checkoutSession(id, pi, "paid"))
	if out := p.Send(succeeded); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("async_payment_succeeded: %s %s (%s), want processed and paid", out.Result, out.OrderStatus, out.Detail)
	}
	if out := p.Send(succeeded); out.Result != models.ResultDuplicate {
		t.Errorf("async_payment_succeeded again: %s, want duplicate", out.Result)
	}
	if out := p.Send(stripeEvent("evt_pi_ok_"+id, "payment_intent.succeeded", paymentIntent(id, pi, 5000000, "idr"))); out.Result != models.ResultStale {
		t.Errorf("the PaymentIntent's own succeeded event: %s, want stale (one charge)", out.Result)
	}
	if s := p.State(id, sku); s.Status != models.OrderPaid || len(s.Payments) != 1 || s.Outbox != 2 {
		t.Errorf("after the delayed payment: %+v; want paid once", s)
	}

	failed, sku := p.Order()
	before := p.State(failed, sku)
	if out := p.Send(stripeEvent("evt_cs_fail_"+failed, "checkout.session.async_payment_failed", checkoutSession(failed, "pi_fail_"+failed, "unpaid"))); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Errorf("async_payment_failed: %s %s, want processed with the order pending", out.Result, out.OrderStatus)
	}
	expired := stripeEvent("evt_cs_exp_"+failed, "checkout.session.expired", map[string]any{"id": "cs_exp_" + failed, "object": "checkout.session",
		"client_reference_id": failed, "amount_total": 5000000, "currency": "idr", "payment_status": "unpaid", "status": "expired"})
	if out := p.Send(expired); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderExpired {
		t.Errorf("checkout.session.expired: %s %s, want processed and expired", out.Result, out.OrderStatus)
	}
	if s := p.State(failed, sku); s.Stock != before.Stock+1 {
		t.Errorf("after the session expired: stock %d, want %d (released)", s.Stock, before.Stock+1)
	}
}

// A Stripe dispute names its PaymentIntent, not the order: it is recorded
// on that charge's payment (open, then lost) and in the order's story as
// its callbacks, and changes no order status. One of a charge the shop
// does not know is ignored; an "opened" that comes after the close is
// stale.
func TestStripeDisputesAreRecordedOnThePayment(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, sku := p.Order()
	pi := "pi_dispute_" + id
	p.Send(stripeEvent("evt_pay_"+id, "payment_intent.succeeded", paymentIntent(id, pi, 5000000, "idr")))
	dispute := func() (d models.Dispute) {
		p.DB.Raw("SELECT dispute FROM payments WHERE provider_reference = ?", pi).Scan(&d)
		return d
	}
	out := p.Send(stripeDispute("evt_du_open_"+id, "charge.dispute.created", pi, "needs_response"))
	if out.Result != models.ResultProcessed || out.OrderID != id || out.OrderStatus != models.OrderPaid || dispute() != models.DisputeOpen {
		t.Fatalf("dispute created: %s for %q, order %s, payment's dispute %q; want processed, the order still paid, the dispute open", out.Result, out.OrderID, out.OrderStatus, dispute())
	}
	if out := p.Send(stripeDispute("evt_du_lost_"+id, "charge.dispute.closed", pi, "lost")); out.Result != models.ResultProcessed || dispute() != models.DisputeLost {
		t.Errorf("dispute lost: %s, payment's dispute %q; want processed and lost", out.Result, dispute())
	}
	if out := p.Send(stripeDispute("evt_du_late_"+id, "charge.dispute.updated", pi, "under_review")); out.Result != models.ResultStale || dispute() != models.DisputeLost {
		t.Errorf("an update after the close: %s, dispute %q; want stale, still lost", out.Result, dispute())
	}
	if s := p.State(id, sku); s.Status != models.OrderPaid || s.Payments[pi] != models.PaymentSucceeded {
		t.Errorf("after a lost dispute: %+v; want the order paid, the payment succeeded (and marked lost)", s)
	}
	var events []string
	p.DB.Model(&models.PaymentCallback{}).Where("order_id = ?", id).Order("id").Pluck("event_status", &events)
	if !slices.Equal(events, []string{"paid", "disputed", "dispute_lost", "disputed"}) {
		t.Errorf("the order's callbacks: %v; want its payment and its dispute's three", events)
	}
	if out := p.Send(stripeDispute("evt_du_other_"+id, "charge.dispute.created", "pi_not_ours", "needs_response")); out.Status() != 200 || out.Result != models.ResultIgnored {
		t.Errorf("a dispute of a charge the shop does not know: %d %s, want 200 ignored", out.Status(), out.Result)
	}
	p.Audit()
}

// A Stripe refund accepted as pending counts — the order refunded — and
// its refund.failed gives the money back: the order paid again, the
// payment succeeded with nothing refunded, the stock untouched, the
// refund row failed with Stripe's reason, and no email; were the refund
// still counted, the order would say refunded while the customer got
// nothing. A
// charge.refunded of before the failure,
// delivered after it, counts nothing again; a second refund that
// succeeds refunds the order, and its customer gets one email.
func TestStripeRefundFailedAfterAcceptanceGivesTheMoneyBack(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, sku := p.Order()
	pi := "pi_fail_" + id
	if out := p.Send(paying(id, pi, price, "IDR", 0)); out.OrderStatus != models.OrderPaid {
		t.Fatalf("paying: %+v", out)
	}
	before := p.Money(id, sku)

	step := func(name string, d gatewaytest.Delivery, result string, want gatewaytest.Money) {
		t.Helper()
		out := p.Send(d)
		got := p.Money(id, sku)
		if out.Status() != 200 || out.Word() != result || got.Order != want.Order || got.Payment != want.Payment ||
			got.Refunded != want.Refunded || got.Emails != want.Emails || got.Stock != before.Stock {
			t.Errorf("%s: %d %s (%s); order %s, payment %s, %d refunded, %d emails, stock %d; want %s: %s, %s, %d, %d emails, stock %d",
				name, out.Status(), out.Word(), out.Detail, got.Order, got.Payment, got.Refunded, got.Emails, got.Stock,
				result, want.Order, want.Payment, want.Refunded, want.Emails, before.Stock)
		}
	}
	step("refund.created, pending", stripeRefundEvent("evt_rc_"+id, "refund.created", id, pi, "re_1_"+id, price, "pending", ""),
		models.ResultProcessed, gatewaytest.Money{Order: models.OrderRefunded, Payment: models.PaymentRefunded, Refunded: price})
	step("the same refund told again", stripeRefundEvent("evt_rc2_"+id, "charge.refund.updated", id, pi, "re_1_"+id, price, "pending", ""),
		models.ResultStale, gatewaytest.Money{Order: models.OrderRefunded, Payment: models.PaymentRefunded, Refunded: price})
	step("refund.failed", stripeRefundEvent("evt_rf_"+id, "refund.failed", id, pi, "re_1_"+id, price, "failed", "expired_or_canceled_card"),
		models.ResultProcessed, gatewaytest.Money{Order: models.OrderPaid, Payment: models.PaymentSucceeded, Refunded: 0})
	if m := p.Money(id, sku); m.Refunds["re_1_"+id] != models.RefundFailed || m.Reasons["re_1_"+id] != "expired_or_canceled_card" {
		t.Errorf("the failed refund's row: %s %q", m.Refunds["re_1_"+id], m.Reasons["re_1_"+id])
	}
	p.Audit()
	step("charge.refunded told before the failure, delivered after it", stripeChargeRefunded("evt_cr_"+id, id, pi, price),
		models.ResultStale, gatewaytest.Money{Order: models.OrderPaid, Payment: models.PaymentSucceeded, Refunded: 0})
	step("a late succeeded of the failed refund", stripeRefundEvent("evt_ru_"+id, "refund.updated", id, pi, "re_1_"+id, price, "succeeded", ""),
		models.ResultStale, gatewaytest.Money{Order: models.OrderPaid, Payment: models.PaymentSucceeded, Refunded: 0})
	step("a second refund, succeeded", stripeRefundEvent("evt_r2_"+id, "refund.created", id, pi, "re_2_"+id, price, "succeeded", ""),
		models.ResultProcessed, gatewaytest.Money{Order: models.OrderRefunded, Payment: models.PaymentRefunded, Refunded: price, Emails: 1})
	p.Audit()
}

// Stripe's charge.refunded names no refund: a total above what is named
// counts as refunds not named yet, until Stripe names them. The named
// refund then takes the total's place — one refund counted once, in
// either order — and a refund made in Stripe's dashboard (no order in its
// metadata) is found by its PaymentIntent.
func TestStripeChargeTotalThenNamedRefundCountsOnce(t *testing.T) {
	t.Parallel()
	p := gatewaytest.NewPipeline(t, provider(t))
	id, sku := p.Order()
	pi := "pi_named_" + id
	p.Send(paying(id, pi, price, "IDR", 0))
	if out := p.Send(stripeChargeRefunded("evt_cr1_"+id, id, pi, 20000)); out.OrderStatus != models.OrderPartiallyRefunded {
		t.Fatalf("charge.refunded of 20000: %+v", out)
	}
	// The dashboard refund that total was about, named: nothing more counts.
	out := p.Send(stripeRefundEvent("evt_rc1_"+id, "refund.created", "", pi, "re_a_"+id, 20000, "pending", ""))
	m := p.Money(id, sku)
	placeholder := pi + ":refunded:20000"
	if out.Word() != models.ResultProcessed || m.Refunded != 20000 || m.Refunds["re_a_"+id] != models.RefundPending || m.Refunds[placeholder] != models.RefundSuperseded {
		t.Errorf("the named refund after the total: %s (%s); %d refunded, rows %v; want 20000, the total superseded", out.Word(), out.Detail, m.Refunded, m.Refunds)
	}
	if out := p.Send(stripeRefundEvent("evt_ru1_"+id, "refund.updated", "", pi, "re_a_"+id, 20000, "succeeded", "")); out.Word() != models.ResultProcessed {
		t.Errorf("pending → succeeded: %s (%s)", out.Word(), out.Detail)
	}
	// A second refund named first, then the total that includes it.
	p.Send(stripeRefundEvent("evt_rc2_"+id, "refund.created", id, pi, "re_b_"+id, 30000, "succeeded", ""))
	if out := p.Send(stripeChargeRefunded("evt_cr2_"+id, id, pi, 50000)); out.Word() != models.ResultStale {
		t.Errorf("the total after its refunds were named: %s, want stale", out.Word())
	}
	m = p.Money(id, sku)
	if m.Order != models.OrderRefunded || m.Refunded != price || m.Emails != 2 || m.Refunds["re_b_"+id] != models.RefundSucceeded {
		t.Errorf("after: %+v; want refunded in full, each named refund's email once", m)
	}
	p.Audit()
}
