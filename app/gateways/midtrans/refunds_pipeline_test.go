package midtrans_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Midtrans's refund and chargeback notifications through the payments
// pipeline (pipeline_test.go): each restates the transaction — its
// gross_amount, every refund so far and their total — and is confirmed
// with the status API like every Midtrans notification.

// Refunds are amounts. Two partial refunds of one Midtrans transaction
// are two facts, each answered 200 (sharing the first's key, the second
// would be a 409 that Midtrans retries for days): the order is
// partially_refunded after the first and refunded when they reach the
// payment, the amounts exact, the stock kept. Midtrans's second,
// bank-confirmed notification of a refund and a repeat add nothing; a
// refund above what is left is refused with 422 and writes nothing.
func TestMidtransPartialRefundsAddUp(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, sku := p.Order()
	tx := "tx-refunds-" + id
	if out := p.Send(p.notification(id, tx, "settlement", "", "50000.00", "IDR")); out.Result != models.ResultProcessed {
		t.Fatalf("paying: %+v", out)
	}
	before := p.State(id, sku)
	first := midtrans.NotifiedRefund{RefundChargebackID: "202502070943231234", RefundAmount: "20000.00", RefundKey: "rk-1-" + id}
	second := midtrans.NotifiedRefund{RefundChargebackID: "202502070943231235", RefundAmount: "30000.00", RefundKey: "rk-2-" + id}

	out := p.Send(p.refund(id, tx, "partial_refund", false, first))
	if out.Status() != 200 || out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPartiallyRefunded {
		t.Fatalf("the first partial refund: %d %s %s (%s)", out.Status(), out.Result, out.OrderStatus, out.Detail)
	}
	if refunded, rows := p.refundsOf(id); refunded != 20000 || len(rows) != 1 || rows["rk-1-"+id] != 20000 {
		t.Errorf("after the first refund: refunded %d, refunds %v", refunded, rows)
	}
	// The same refund, now confirmed by the bank: a fact of its own, and
	// nothing new.
	if out := p.Send(p.refund(id, tx, "partial_refund", true, first)); out.Status() != 200 || out.Result != models.ResultStale {
		t.Errorf("the bank-confirmed notification of the first refund: %d %s, want 200 stale", out.Status(), out.Result)
	}
	out = p.Send(p.refund(id, tx, "refund", true, first, second))
	if out.Status() != 200 || out.Result != models.ResultProcessed || out.OrderStatus != models.OrderRefunded {
		t.Fatalf("the second refund: %d %s %s (%s)", out.Status(), out.Result, out.OrderStatus, out.Detail)
	}
	after := p.State(id, sku)
	if refunded, rows := p.refundsOf(id); refunded != 50000 || len(rows) != 2 || rows["rk-2-"+id] != 30000 ||
		after.Payments[tx] != models.PaymentRefunded || after.Stock != before.Stock {
		t.Errorf("after both refunds: refunded %d, refunds %v, %+v; want 50000 in two refunds, the payment refunded, the stock kept", refunded, rows, after)
	}
	if out := p.Send(p.refund(id, tx, "refund", true, first, second)); out.Result != models.ResultDuplicate {
		t.Errorf("the last notification again: %s, want duplicate", out.Result)
	}

	// Above what is left: 60000 of a 50000 charge.
	other, _ := p.Order()
	otherTx := "tx-over-" + other
	p.Send(p.notification(other, otherTx, "settlement", "", "50000.00", "IDR"))
	out = p.Send(p.refund(other, otherTx, "partial_refund", false, midtrans.NotifiedRefund{RefundAmount: "60000.00", RefundKey: "rk-over-" + other}))
	if out.Status() != 422 || out.Reason != models.ReasonRefundExceedsPayment {
		t.Errorf("a refund above the payment: %d %s %s, want 422 refund_exceeds_payment", out.Status(), out.Result, out.Reason)
	}
	if refunded, rows := p.refundsOf(other); refunded != 0 || len(rows) != 0 || p.State(other, "").Status != models.OrderPaid {
		t.Errorf("after a refused refund: refunded %d, refunds %v; want nothing written", refunded, rows)
	}
	p.Audit()
}

// The refunds of a Midtrans notification are not signed: whoever holds
// one genuine notification can fill them with "1e1000000", which math/big
// expanded into a million digits — 0.1 s of CPU an element, minutes for
// a 64 KiB body, and the handler kept computing after its connection
// closed. Such a body is refused with a 422 saying which bound it
// breaks (missing_field for too many refunds, invalid_request for an
// amount with an exponent), and writes nothing: more refunds than MaxRefunds
// before any is read, fewer at their first exponent. (How cheaply:
// BenchmarkCostlyRefundBodies.)
func TestMidtransExponentRefundsAreRefused(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, _ := p.Order()
	tx := "tx-exponent-" + id
	if out := p.Send(p.notification(id, tx, "settlement", "", "50000.00", "IDR")); out.Result != models.ResultProcessed {
		t.Fatalf("paying: %+v", out)
	}
	genuine := p.refund(id, tx, "partial_refund", false, midtrans.NotifiedRefund{RefundAmount: "20000.00", RefundKey: "rk-" + id})
	// withRefunds is the genuine notification with count refunds of
	// "1e1000000", or as many as fit in a delivery when count is 0.
	withRefunds := func(count int) gatewaytest.Delivery {
		room := payments.MaxBodyBytes - len(forge(genuine, map[string]any{"refunds": []any{}}).Body)
		var refunds []any
		for count == 0 || len(refunds) < count {
			r := map[string]any{"refund_amount": "1e1000000", "refund_key": fmt.Sprint(len(refunds))}
			b, _ := json.Marshal(r)
			if count == 0 && len(b)+1 > room { // +1: a comma
				break
			}
			room -= len(b) + 1
			refunds = append(refunds, r)
		}
		if count == 0 && len(refunds) <= payments.MaxRefunds {
			t.Fatalf("only %d refunds fit in %d bytes", len(refunds), payments.MaxBodyBytes)
		}
		return forge(genuine, map[string]any{"refunds": refunds})
	}
	for _, tt := range []struct {
		name string
		d    gatewaytest.Delivery
		code string
		says string
	}{
		{"as many refunds as 64 KiB holds", withRefunds(0), models.EMissingField, fmt.Sprintf("at most %d are read", payments.MaxRefunds)},
		{"MaxRefunds refunds", withRefunds(payments.MaxRefunds), models.EInvalid, `refunds[0].refund_amount "1e1000000" is not an amount of IDR: it has an exponent`},
		{"refund_amount", forge(genuine, map[string]any{"refund_amount": "1e1000000"}), models.EInvalid, "refund_amount \"1e1000000\" is not an amount of IDR: it has an exponent"},
	} {
		out := p.Send(tt.d)
		if out.Status() != 422 || out.Refusal != tt.code || !strings.Contains(out.Detail, tt.says) {
			t.Errorf("%s (%d bytes): %d %s (%s); want 422 %s: %s", tt.name, len(tt.d.Body), out.Status(), out.Refusal, out.Detail, tt.code, tt.says)
		}
	}
	if refunded, rows := p.refundsOf(id); refunded != 0 || len(rows) != 0 || p.State(id, "").Status != models.OrderPaid {
		t.Errorf("after the refused notifications: refunded %d, refunds %v; want nothing written, the order paid", refunded, rows)
	}
}

// Midtrans's chargeback and partial_chargeback mean the bank took the
// money back, so neither is ignored: each is
// a lost dispute of the charge, with what it took — a partial one, then
// the whole — confirmed with the status API like every Midtrans
// notification; the order's status is unchanged.
func TestMidtransChargebackIsALostDispute(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, _ := p.Order()
	tx := "tx-cb-" + id
	p.Send(p.notification(id, tx, "settlement", "", "50000.00", "IDR"))
	partial := signedBody(id, tx, "partial_chargeback", "", "50000.00", "IDR")
	var n map[string]any
	json.Unmarshal(partial.Body, &n)
	n["refund_amount"] = "20000.00"
	partial.Body, _ = json.Marshal(n)
	p.api.set(partial.Body)
	dispute := func(name string, d gatewaytest.Delivery, want models.Dispute, held int64) {
		t.Helper()
		out := p.Send(d)
		var pay models.Payment
		p.DB.Take(&pay, "order_id = ?", id)
		if out.Status() != 200 || out.Word() != models.ResultProcessed || out.OrderStatus != models.OrderPaid || pay.Dispute != want || pay.DisputedAmount != held {
			t.Errorf("%s: %d %s (%s), order %s; payment dispute %q of %d; want processed, %q of %d, the order paid",
				name, out.Status(), out.Word(), out.Detail, out.OrderStatus, pay.Dispute, pay.DisputedAmount, want, held)
		}
	}
	dispute("partial_chargeback", partial, models.DisputeLost, 20000)
	dispute("chargeback", p.notification(id, tx, "chargeback", "", "50000.00", "IDR"), models.DisputeLost, 50000)
	p.Audit()
}
