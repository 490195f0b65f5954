package xendit_test

import (
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// Xendit's callback token is static: whoever learns it can write any
// callback, with the valid token. Every paid one is therefore confirmed
// with Xendit's invoice API (GET /v2/invoices/{id}) and changes nothing
// of its own: an invoice the API does not know, or knows for another
// amount, currency, order or status, is answered 200 unconfirmed, with a
// note of what each side said, and what the API says is applied instead
// — which here pays nothing.
func TestXenditForgedPaidCallbacksChangeNothing(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	unpaid := func(name, id, sku string) {
		t.Helper()
		s := p.State(id, sku)
		for _, status := range s.Payments {
			if status == models.PaymentSucceeded {
				t.Errorf("after %s: %+v; want no payment succeeded", name, s)
			}
		}
		if s.Status != models.OrderPending || s.Outbox != 0 {
			t.Errorf("after %s: %+v; want the order pending, no invoice or email", name, s)
		}
	}

	// An invoice Xendit never made.
	unknown, sku := p.Order()
	p.Unconfirmed("an invoice Xendit does not know", invoiceCallback(unknown, "inv-forged-"+unknown, "PAID", "50000", "IDR"))
	unpaid("an unknown invoice", unknown, sku)

	// Xendit's invoice, paid for less than the order: the API's fact
	// is applied, and rejected for its amount.
	cheap, sku := p.Order()
	p.genuine(invoiceCallback(cheap, "inv-cheap-"+cheap, "PAID", "1000", "IDR"))
	p.Unconfirmed("another amount", invoiceCallback(cheap, "inv-cheap-"+cheap, "PAID", "50000", "IDR"))
	unpaid("another amount", cheap, sku)

	// Paid in another currency.
	usd, sku := p.Order()
	p.genuine(invoiceCallback(usd, "inv-usd-"+usd, "PAID", "50000", "USD"))
	p.Unconfirmed("another currency", invoiceCallback(usd, "inv-usd-"+usd, "PAID", "50000", "IDR"))
	unpaid("another currency", usd, sku)

	// Opened and not paid: Xendit says PENDING.
	pending, sku := p.Order()
	p.genuine(invoiceCallback(pending, "inv-pending-"+pending, "PENDING", "50000", "IDR"))
	p.Unconfirmed("an invoice still pending", invoiceCallback(pending, "inv-pending-"+pending, "PAID", "50000", "IDR"))
	p.Unconfirmed("an invoice still pending, as SETTLED", invoiceCallback(pending, "inv-pending-"+pending, "SETTLED", "50000", "IDR"))
	unpaid("a pending invoice", pending, sku)

	// Another order's genuine payment, re-sent for this one under a
	// webhook-id of its own (under its own key it is a conflict): it
	// pays that order once, and this one nothing.
	other, otherSKU := p.Order()
	genuine := p.genuine(invoiceCallback(other, "inv-other-"+other, "PAID", "50000", "IDR"))
	if out := p.Send(genuine); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("the genuine payment: %d %s (%s)", out.Status(), out.Result, out.Detail)
	}
	victim, sku := p.Order()
	forged := gatewaytest.WithMembers(genuine, map[string]any{"external_id": victim})
	forged.Header = forged.Header.Clone()
	forged.Header.Set("Webhook-Id", "whk-forged-"+victim)
	p.Unconfirmed("another order's invoice", forged)
	unpaid("another order's invoice", victim, sku)
	if s := p.State(other, otherSKU); s.Status != models.OrderPaid || len(s.Payments) != 1 {
		t.Errorf("the paying order after its invoice was re-sent: %+v; want paid once", s)
	}

	// The deliveries say why: unconfirmed, with both sides in the note.
	// (Each delivery's row is written just after its answer.)
	testenv.Eventually(t, "the unconfirmed deliveries' rows", func() bool {
		var n int64
		p.DB.Model(&models.CallbackDelivery{}).Where("provider = ? AND outcome = ? AND note LIKE ?",
			xendit.Name, models.OutcomeUnconfirmed, "%the status API%").Count(&n)
		return n == 6
	})
	var note string
	p.DB.Raw("SELECT note FROM callback_deliveries WHERE outcome = 'unconfirmed' AND note LIKE ?", "%inv-forged-"+unknown+"%").Scan(&note)
	if !strings.Contains(note, "paid of inv-forged-"+unknown) || !strings.Contains(note, "does not know") {
		t.Errorf("the note of the unknown invoice: %q", note)
	}
	p.DB.Raw("SELECT note FROM callback_deliveries WHERE outcome = 'unconfirmed' AND note LIKE ?", "%inv-cheap-"+cheap+"%").Scan(&note)
	if !strings.Contains(note, "IDR 50000") || !strings.Contains(note, "says paid of inv-cheap-"+cheap+" for order "+cheap+", IDR 1000") {
		t.Errorf("the note of the cheaper invoice: %q", note)
	}
	p.Audit()
}

// Xendit's API down — answering 5xx, or nothing — is answered 503 with
// nothing written, so that Xendit sends the callback again; the retry,
// once the API is back, pays the order once.
func TestXenditAPIDownIsRetried(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	for name, outage := range map[string]int32{"answering 503": unavailable, "not answering": unreachable} {
		id, sku := p.Order()
		d := p.genuine(invoiceCallback(id, "inv-down-"+id, "PAID", "50000", "IDR"))
		p.Retried("the API "+name, id, d, func() func() {
			p.outage.Store(outage)
			return func() { p.outage.Store(up) }
		})
		paidOnce(t, p, id, sku, "inv-down-"+id)
	}
	p.Audit()
}

// A genuine payment as Xendit calls back about it — with a webhook-id,
// which the API does not know, 20 copies at once — is confirmed and pays
// once. A PAID callback that comes after Xendit settled the invoice (the
// API says SETTLED) is the same payment, and pays; the SETTLED callback
// after it is stale.
func TestXenditGenuinePaidCallbackPaysOnce(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, sku := p.Order()
	paid := p.genuine(invoiceCallback(id, "inv-genuine-"+id, "PAID", "50000", "IDR"))
	paid.Header.Set("Webhook-Id", "whk-paid-"+id)
	if counts := p.Together(paid, 20); counts[models.ResultProcessed] != 1 || counts[models.ResultDuplicate] != 19 {
		t.Errorf("20 copies of the genuine callback at once: %v, want 1 processed and 19 duplicate", counts)
	}
	paidOnce(t, p, id, sku, "inv-genuine-"+id)

	late, sku := p.Order()
	inv := "inv-late-" + late
	paid = invoiceCallback(late, inv, "PAID", "50000", "IDR")
	paid.Header.Set("Webhook-Id", "whk-paid-"+late)
	settled := p.genuine(invoiceCallback(late, inv, "SETTLED", "50000", "IDR")) // Xendit settled it before the PAID callback came
	settled.Header.Set("Webhook-Id", "whk-settled-"+late)
	if out := p.Send(paid); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Errorf("the PAID callback, the API saying SETTLED: %s %s (%s), want processed, paid", out.Result, out.OrderStatus, out.Detail)
	}
	if out := p.Send(settled); out.Result != models.ResultStale {
		t.Errorf("the SETTLED callback: %s (%s), want stale", out.Result, out.Detail)
	}
	paidOnce(t, p, late, sku, inv)
	p.Audit()
}

// paidOnce expects order id paid once, by invoice inv, with its invoice
// and email tasks.
func paidOnce(t *testing.T, p *pipeline, id, sku, inv string) {
	t.Helper()
	var pays []models.Payment
	p.DB.Find(&pays, "order_id = ?", id)
	if s := p.State(id, sku); s.Status != models.OrderPaid || s.Outbox != 2 || len(pays) != 1 || pays[0].Amount != price || pays[0].ProviderReference != inv {
		t.Errorf("order %s: %+v, payments %+v; want paid once at %d by %s, with its invoice and email", id, s, pays, price, inv)
	}
}
