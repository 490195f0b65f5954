package payments_test

import (
	"context"
	"testing"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/models"
)

// stripeRefundEvent is Stripe's event of type typ about refund reID of
// PaymentIntent pi, of amount (Sekali's rupiah) in state status; orderID
// "" is a refund made in Stripe's dashboard (no metadata).
func stripeRefundEvent(id, typ, orderID, pi, reID string, amount int64, status, reason string) delivery {
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
// refunded total.
func stripeChargeRefunded(id, orderID, pi string, total int64) delivery {
	return stripeEvent(id, "charge.refunded", map[string]any{"id": "ch_" + pi, "object": "charge", "payment_intent": pi,
		"amount": price * 100, "amount_refunded": total * 100, "refunded": total == price, "currency": "idr",
		"metadata": map[string]string{"order_id": orderID}})
}

// moneyOf is what the database holds of an order's charge and refunds.
type moneyOf struct {
	order    models.OrderStatus
	payment  models.PaymentStatus
	refunded int64
	rows     map[string]models.RefundStatus // by refund key
	reasons  map[string]string
	emails   int64 // refund_succeeded email tasks
	stock    int64
}

func (f *fixture) money(orderID, sku string) moneyOf {
	f.t.Helper()
	m := moneyOf{rows: map[string]models.RefundStatus{}, reasons: map[string]string{}}
	var o models.Order
	var p models.Payment
	var pr models.Product
	f.db.Take(&o, "id = ?", orderID)
	f.db.Where("order_id = ?", orderID).Order("id").Take(&p)
	f.db.Take(&pr, "sku = ?", sku)
	m.order, m.payment, m.refunded, m.stock = o.Status, p.Status, p.RefundedAmount, pr.Stock
	var rows []models.Refund
	f.db.Find(&rows, "order_id = ?", orderID)
	for _, r := range rows {
		m.rows[r.RefundKey], m.reasons[r.RefundKey] = r.Status, r.FailureReason
	}
	f.db.Raw("SELECT count(*) FROM outbox_messages WHERE task_type = 'email:send' AND convert_from(payload, 'UTF8')::jsonb ->> 'template' = 'refund_succeeded' AND convert_from(payload, 'UTF8')::jsonb ->> 'order_id' = ?", orderID).Scan(&m.emails)
	return m
}

func (f *fixture) mustAudit() {
	f.t.Helper()
	report, err := audit.WithoutJobs(f.db).Run(context.Background(), 0)
	if err != nil || !report.OK {
		f.t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// A Stripe refund accepted as pending counts — the order refunded — and
// its refund.failed gives the money back: the order paid again, the
// payment succeeded with nothing refunded, the stock untouched, the
// refund row failed with Stripe's reason, and no email. It used to stay
// counted (refund.failed was "ignored"): the order said refunded while
// the customer got nothing. A charge.refunded of before the failure,
// delivered after it, counts nothing again; a second refund that
// succeeds refunds the order, and its customer gets one email.
func TestStripeRefundFailedAfterAcceptanceGivesTheMoneyBack(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, sku := f.orderIn(models.OrderPending)
	pi := "pi_fail_" + id
	if out := f.send(gatewayNamed("stripe").paid(id, pi, price, "IDR", 0)); out.OrderStatus != models.OrderPaid {
		t.Fatalf("paying: %+v", out)
	}
	paid := f.money(id, sku)

	step := func(name string, d delivery, result string, want moneyOf) {
		t.Helper()
		out := f.send(d)
		got := f.money(id, sku)
		if out.Status() != 200 || out.Word() != result || got.order != want.order || got.payment != want.payment ||
			got.refunded != want.refunded || got.emails != want.emails || got.stock != paid.stock {
			t.Errorf("%s: %d %s (%s); order %s, payment %s, %d refunded, %d emails, stock %d; want %s: %s, %s, %d, %d emails, stock %d",
				name, out.Status(), out.Word(), out.Detail, got.order, got.payment, got.refunded, got.emails, got.stock,
				result, want.order, want.payment, want.refunded, want.emails, paid.stock)
		}
	}
	step("refund.created, pending", stripeRefundEvent("evt_rc_"+id, "refund.created", id, pi, "re_1_"+id, price, "pending", ""),
		models.ResultProcessed, moneyOf{order: models.OrderRefunded, payment: models.PaymentRefunded, refunded: price})
	step("the same refund told again", stripeRefundEvent("evt_rc2_"+id, "charge.refund.updated", id, pi, "re_1_"+id, price, "pending", ""),
		models.ResultStale, moneyOf{order: models.OrderRefunded, payment: models.PaymentRefunded, refunded: price})
	step("refund.failed", stripeRefundEvent("evt_rf_"+id, "refund.failed", id, pi, "re_1_"+id, price, "failed", "expired_or_canceled_card"),
		models.ResultProcessed, moneyOf{order: models.OrderPaid, payment: models.PaymentSucceeded, refunded: 0})
	if m := f.money(id, sku); m.rows["re_1_"+id] != models.RefundFailed || m.reasons["re_1_"+id] != "expired_or_canceled_card" {
		t.Errorf("the failed refund's row: %s %q", m.rows["re_1_"+id], m.reasons["re_1_"+id])
	}
	f.mustAudit()
	step("charge.refunded told before the failure, delivered after it", stripeChargeRefunded("evt_cr_"+id, id, pi, price),
		models.ResultStale, moneyOf{order: models.OrderPaid, payment: models.PaymentSucceeded, refunded: 0})
	step("a late succeeded of the failed refund", stripeRefundEvent("evt_ru_"+id, "refund.updated", id, pi, "re_1_"+id, price, "succeeded", ""),
		models.ResultStale, moneyOf{order: models.OrderPaid, payment: models.PaymentSucceeded, refunded: 0})
	step("a second refund, succeeded", stripeRefundEvent("evt_r2_"+id, "refund.created", id, pi, "re_2_"+id, price, "succeeded", ""),
		models.ResultProcessed, moneyOf{order: models.OrderRefunded, payment: models.PaymentRefunded, refunded: price, emails: 1})
	f.mustAudit()
}

// Stripe's charge.refunded names no refund: a total above what is named
// counts as refunds not named yet, until Stripe names them. The named
// refund then takes the total's place — one refund counted once, in
// either order — and a refund made in Stripe's dashboard (no order in its
// metadata) is found by its PaymentIntent.
func TestStripeChargeTotalThenNamedRefundCountsOnce(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, sku := f.orderIn(models.OrderPending)
	pi := "pi_named_" + id
	f.send(gatewayNamed("stripe").paid(id, pi, price, "IDR", 0))
	if out := f.send(stripeChargeRefunded("evt_cr1_"+id, id, pi, 20000)); out.OrderStatus != models.OrderPartiallyRefunded {
		t.Fatalf("charge.refunded of 20000: %+v", out)
	}
	// The dashboard refund that total was about, named: nothing more counts.
	out := f.send(stripeRefundEvent("evt_rc1_"+id, "refund.created", "", pi, "re_a_"+id, 20000, "pending", ""))
	m := f.money(id, sku)
	placeholder := pi + ":refunded:20000"
	if out.Word() != models.ResultProcessed || m.refunded != 20000 || m.rows["re_a_"+id] != models.RefundPending || m.rows[placeholder] != models.RefundSuperseded {
		t.Errorf("the named refund after the total: %s (%s); %d refunded, rows %v; want 20000, the total superseded", out.Word(), out.Detail, m.refunded, m.rows)
	}
	if out := f.send(stripeRefundEvent("evt_ru1_"+id, "refund.updated", "", pi, "re_a_"+id, 20000, "succeeded", "")); out.Word() != models.ResultProcessed {
		t.Errorf("pending → succeeded: %s (%s)", out.Word(), out.Detail)
	}
	// A second refund named first, then the total that includes it.
	f.send(stripeRefundEvent("evt_rc2_"+id, "refund.created", id, pi, "re_b_"+id, 30000, "succeeded", ""))
	if out := f.send(stripeChargeRefunded("evt_cr2_"+id, id, pi, 50000)); out.Word() != models.ResultStale {
		t.Errorf("the total after its refunds were named: %s, want stale", out.Word())
	}
	m = f.money(id, sku)
	if m.order != models.OrderRefunded || m.refunded != price || m.emails != 2 || m.rows["re_b_"+id] != models.RefundSucceeded {
		t.Errorf("after: %+v; want refunded in full, each named refund's email once", m)
	}
	f.mustAudit()
}
