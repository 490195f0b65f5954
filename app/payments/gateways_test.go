package payments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
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
	midtransKey = "SB-Mid-server-TEST0123456789abcdef"
)

// gatewayProviders are the receiving adapters of the gateways named here,
// and the sandbox's.
func gatewayProviders(t *testing.T) []payments.Provider {
	t.Helper()
	midtransProvider, err := midtrans.NewProvider(midtransKey, midtransAPI.URL())
	if err != nil {
		t.Fatal(err)
	}
	return []payments.Provider{sandbox.NewProvider([][]byte{testenv.SandboxKey}), midtransProvider}
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

// midtransNotification builds a signed Midtrans notification of a
// transaction's new state, and makes that the state midtransAPI answers:
// a genuine notification.
func midtransNotification(orderID, txID, status, fraud, gross, currency string) delivery {
	d := midtransBody(orderID, txID, status, fraud, gross, currency)
	midtransAPI.set(d.body)
	return d
}

// midtransBody builds a signed Midtrans notification, and tells the API
// nothing.
func midtransBody(orderID, txID, status, fraud, gross, currency string) delivery {
	n := midtrans.Notification{OrderID: orderID, TransactionID: txID, TransactionStatus: status, FraudStatus: fraud,
		StatusCode: "200", GrossAmount: gross, Currency: currency, PaymentType: "bank_transfer"}
	switch status {
	case "pending":
		n.StatusCode = "201"
	case "deny", "cancel", "expire":
		n.StatusCode = "202"
	}
	n.SignatureKey = midtrans.Signature(n, midtransKey)
	b, _ := json.Marshal(n)
	return delivery{provider: midtrans.Name, body: b}
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

var gateways = []gateway{
	{
		name: "midtrans",
		paid: func(orderID, ref string, amount int64, currency string, variant int) delivery {
			gross := fmt.Sprintf("%d.00", amount)
			if variant == 0 {
				return midtransNotification(orderID, ref, "capture", "accept", gross, currency)
			}
			return midtransNotification(orderID, ref, "settlement", "", gross, currency)
		},
		// The signature covers only some fields: a changed body still
		// verifies.
		changed: func(d delivery) delivery {
			return fromKit(gatewaytest.WithMembers(d.kit(), map[string]any{"payment_type": "credit_card"}))
		},
		forged: func(orderID, ref string) delivery {
			d := midtransNotification(orderID, ref, "settlement", "", "50000.00", "IDR")
			var n map[string]any
			json.Unmarshal(d.body, &n)
			n["signature_key"] = midtrans.Signature(midtrans.Notification{OrderID: orderID, StatusCode: "200", GrossAmount: "50000.00"}, "SB-Mid-server-NOT-OURS")
			d.body, _ = json.Marshal(n)
			return d
		},
		ignored: func(orderID string) delivery {
			return midtransNotification(orderID, "tx-authorized-refund", "pending_refund", "", "50000.00", "IDR")
		},
	},
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

// Each gateway's refund notification refunds the paid order's charge.
func TestGatewayRefunds(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	for _, tt := range []struct {
		name   string
		paid   func(id, ref string) delivery
		refund func(id, ref string) delivery
	}{
		{"midtrans", func(id, ref string) delivery {
			return midtransNotification(id, ref, "settlement", "", "50000.00", "IDR")
		},
			func(id, ref string) delivery { return midtransNotification(id, ref, "refund", "", "50000.00", "IDR") }},
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
		again := midtransNotification(id, ref, "capture", "accept", "50000.00", "IDR")
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

// Amounts are converted exactly, or refused: Midtrans's "150000.50" IDR has
// a fraction the rupiah cannot hold.
func TestGatewayAmountsAreExact(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	if out := f.send(midtransNotification(id, "tx-frac", "settlement", "", "50000.50", "IDR")); out.Status() != 422 || out.Refusal != models.EMissingField {
		t.Errorf("Midtrans 50000.50 IDR: %d %s", out.Status(), out.Result)
	}
}

// fraud_status goes into Midtrans's key and its signature does not cover
// it: anything but Midtrans's own values is refused with a 422 before a
// key is written — never a NUL that fails the insert and answers 503 for
// ever.
func TestMidtransFraudStatusIsChecked(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	for _, fraud := range []string{"\x00", "maybe", strings.Repeat("a", 300)} {
		out := f.send(midtransNotification(id, "tx-fraud-"+id, "settlement", fraud, "50000.00", "IDR"))
		if out.Status() != 422 {
			t.Errorf("fraud_status %q: %d %s, want 422", fraud, out.Status(), out.Result)
		}
	}
	if out := f.send(midtransNotification(id, "tx-fraud-"+id, "settlement", "accept", "50000.00", "IDR")); out.Result != models.ResultProcessed {
		t.Errorf("fraud_status accept: %+v", out)
	}
}

// forge re-signs a genuine Midtrans notification after changing fields
// the signature does not cover (it covers order_id, status_code and
// gross_amount only): what an attacker holding one genuine notification
// can send. The status API is told nothing.
func forge(genuine delivery, changes map[string]any) delivery {
	var n map[string]any
	json.Unmarshal(genuine.body, &n)
	maps.Copy(n, changes)
	b, _ := json.Marshal(n)
	return delivery{provider: midtrans.Name, body: b}
}

// Midtrans's signature covers three fields, so a holder of one genuine
// notification can rewrite the rest. Every such forgery is confirmed
// with the status API first and changes nothing of its own: the delivery
// is answered 200 unconfirmed, with a note of what each side said, and
// what the API says is applied instead — which here is nothing new.
func TestMidtransForgedNotificationsChangeNothing(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	ctx := context.Background()
	unconfirmed := func(name string, d delivery) {
		t.Helper()
		if out := f.send(d); out.Status() != 200 || out.Result != models.ResultUnconfirmed {
			t.Errorf("%s: %d %s (%s), want 200 unconfirmed", name, out.Status(), out.Result, out.Detail)
		}
	}

	// A genuine pending notification re-sent as a settlement of another
	// transaction: Midtrans does not know that transaction.
	pending, sku := f.orderIn(models.OrderPending)
	genuine := midtransNotification(pending, "tx-pend-"+pending, "pending", "", "50000.00", "IDR")
	if out := f.send(genuine); out.Result != models.ResultProcessed {
		t.Fatalf("the genuine pending notification: %+v", out)
	}
	unconfirmed("pending re-sent as a settlement", forge(genuine, map[string]any{"transaction_status": "settlement", "transaction_id": "tx-forged-" + pending}))
	unconfirmed("pending re-sent as its own settlement", forge(genuine, map[string]any{"transaction_status": "settlement"}))
	if s := f.snapshot(pending, sku); s.status != models.OrderPending || s.outbox != 0 || s.payments["tx-forged-"+pending] != "" {
		t.Errorf("after forged settlements: %+v; want the order pending, nothing paid, no invoice", s)
	}

	// A genuine deny re-sent as a settlement.
	denied, sku := f.orderIn(models.OrderPending)
	deny := midtransNotification(denied, "tx-deny-"+denied, "deny", "", "50000.00", "IDR")
	if out := f.send(deny); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Fatalf("the genuine deny: %+v", out)
	}
	unconfirmed("deny re-sent as a settlement", forge(deny, map[string]any{"transaction_status": "settlement"}))
	if s := f.snapshot(denied, sku); s.status != models.OrderPending || s.payments["tx-deny-"+denied] != models.PaymentFailed || s.outbox != 0 {
		t.Errorf("after a deny forged into a settlement: %+v; want pending, the attempt failed", s)
	}

	// A genuine settlement re-sent as a refund.
	paid, sku := f.orderIn(models.OrderPending)
	settlement := midtransNotification(paid, "tx-paid-"+paid, "settlement", "", "50000.00", "IDR")
	if out := f.send(settlement); out.Result != models.ResultProcessed {
		t.Fatalf("the genuine settlement: %+v", out)
	}
	unconfirmed("settlement re-sent as a refund", forge(settlement, map[string]any{"transaction_status": "refund"}))
	if s := f.snapshot(paid, sku); s.status != models.OrderPaid || s.payments["tx-paid-"+paid] != models.PaymentSucceeded {
		t.Errorf("after a settlement forged into a refund: %+v; want paid", s)
	}

	// The same body with "currency":"USD", before the genuine one came:
	// the API's answer — the settlement in rupiah — is what pays the
	// order; the genuine notification then is a duplicate.
	usd, sku := f.orderIn(models.OrderPending)
	inIDR := midtransNotification(usd, "tx-usd-"+usd, "settlement", "", "50000.00", "IDR")
	unconfirmed("a settlement re-written in USD", forge(inIDR, map[string]any{"currency": "USD"}))
	var pays []models.Payment
	f.db.Find(&pays, "order_id = ?", usd)
	if len(pays) != 1 || pays[0].Currency != "IDR" || pays[0].Amount != price || f.snapshot(usd, sku).status != models.OrderPaid {
		t.Errorf("after a USD forgery: payments %+v; want one IDR payment of %d, applied from the API's answer", pays, price)
	}
	if out := f.send(inIDR); out.Result != models.ResultDuplicate {
		t.Errorf("the genuine notification after the API's answer was applied: %s, want duplicate", out.Result)
	}

	// The deliveries say why: unconfirmed, with both sides in the note.
	testenv.Eventually(t, "the unconfirmed deliveries' rows", func() bool {
		var n int64
		f.db.Model(&models.CallbackDelivery{}).Where("outcome = ? AND note LIKE ?", models.OutcomeUnconfirmed, "%the status API%").Count(&n)
		return n == 5
	})
	var note string
	f.db.Raw("SELECT note FROM callback_deliveries WHERE outcome = 'unconfirmed' AND note LIKE ?", "%tx-forged-"+pending+"%").Scan(&note)
	if !strings.Contains(note, "paid of tx-forged-"+pending) || !strings.Contains(note, "does not know") {
		t.Errorf("the note of the forged settlement: %q", note)
	}

	// The API down: 503, so that Midtrans retries; nothing is written.
	down, _ := f.orderIn(models.OrderPending)
	midtransAPI.down.Store(true)
	out := f.send(midtransNotification(down, "tx-down-"+down, "settlement", "", "50000.00", "IDR"))
	midtransAPI.down.Store(false)
	var callbacks int64
	f.db.Model(&models.PaymentCallback{}).Where("order_id = ?", down).Count(&callbacks)
	if out.Status() != 503 || callbacks != 0 {
		t.Errorf("the status API down: %d %s with %d callbacks recorded; want 503 and none", out.Status(), out.Result, callbacks)
	}
	report, err := audit.WithoutJobs(f.db).Run(ctx, 0)
	if err != nil || !report.OK {
		t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// Midtrans answers most errors of its API with HTTP 200 and the error in
// the body's status_code. A genuine settlement confirmed while the status
// API answers so is answered 503 — Midtrans retries it — with nothing
// written; it used to be 200 "unconfirmed" ("the API does not know the
// transaction"), which Midtrans never resends, and the money was taken
// for an order that then expired. The retry, once the API is well, pays.
func TestMidtransAPIErrorInA200IsAnError(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	for _, code := range []string{"500", "401", "505"} {
		id, sku := f.orderIn(models.OrderPending)
		settlement := midtransNotification(id, "tx-err"+code+"-"+id, "settlement", "", "50000.00", "IDR")
		midtransAPI.errInBody.Store(&code)
		out := f.send(settlement)
		midtransAPI.errInBody.Store(nil)
		var callbacks, deliveries int64
		f.db.Model(&models.PaymentCallback{}).Where("order_id = ?", id).Count(&callbacks)
		f.db.Model(&models.Payment{}).Where("order_id = ?", id).Count(&deliveries)
		if out.Status() != 503 || callbacks != 0 || deliveries != 0 {
			t.Errorf("status_code %s in a 200: %d %s, %d callbacks and %d payments written; want 503 and nothing", code, out.Status(), out.Result, callbacks, deliveries)
		}
		if out := f.send(settlement); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
			t.Errorf("the retry with the API well: %s %s (%s), want processed, paid", out.Result, out.OrderStatus, out.Detail)
		}
		if s := f.snapshot(id, sku); s.status != models.OrderPaid || s.outbox != 2 {
			t.Errorf("after the retry: %+v; want paid with its invoice and email", s)
		}
	}
}

// A status-API answer with another gross_amount is stored under the
// notification's own key, rejected (amount_mismatch). It must not hold
// that key against the truth: the genuine notification resent once the
// API answers right pays the order once — it used to be a 409 conflict
// for ever, and so was the poll.
func TestMidtransWrongAPIAnswerThenGenuineNotificationPaysOnce(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, sku := f.orderIn(models.OrderPending)
	tx := "tx-wrong-" + id
	genuine := midtransBody(id, tx, "settlement", "", "50000.00", "IDR")
	midtransAPI.set(midtransBody(id, tx, "settlement", "", "65000.00", "IDR").body) // the API answers wrongly
	if out := f.send(genuine); out.Result != models.ResultUnconfirmed {
		t.Fatalf("the genuine notification while the API is wrong: %s (%s), want unconfirmed", out.Result, out.Detail)
	}
	var cb models.PaymentCallback
	f.db.Take(&cb, "provider = ? AND idempotency_key = ?", midtrans.Name, tx+":settlement")
	if cb.Status != models.CallbackRejected || cb.Result != models.ReasonAmountMismatch {
		t.Fatalf("the API's answer: %s %s, want rejected %s", cb.Status, cb.Result, models.ReasonAmountMismatch)
	}

	midtransAPI.set(genuine.body) // the API recovers
	if out := f.send(genuine); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("the genuine notification resent: %d %s (%s), want processed, paid", out.Status(), out.Result, out.Detail)
	}
	if out := f.send(genuine); out.Result != models.ResultDuplicate {
		t.Errorf("once more: %s, want duplicate", out.Result)
	}
	if out := f.pay.ApplyPolled(context.Background(), midtrans.Name, mustParseMidtrans(t, genuine.body)); out.Result != models.ResultDuplicate {
		t.Errorf("the poll of the same fact: %s, want duplicate", out.Result)
	}
	var pays []models.Payment
	f.db.Find(&pays, "order_id = ?", id)
	var callbacks int64
	f.db.Model(&models.PaymentCallback{}).Where("order_id = ?", id).Count(&callbacks)
	if s := f.snapshot(id, sku); s.status != models.OrderPaid || s.outbox != 2 || len(pays) != 1 || pays[0].Amount != price || callbacks != 1 {
		t.Errorf("after: %+v, payments %+v, %d callbacks; want paid once at %d, one callback row", s, pays, callbacks, price)
	}
	report, err := audit.WithoutJobs(f.db).Run(context.Background(), 0)
	if err != nil || !report.OK {
		t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// mustParseMidtrans is what the status API's answer of a notification
// parses to.
func mustParseMidtrans(t *testing.T, body []byte) payments.Event {
	t.Helper()
	c, err := midtrans.NewStatusClient(midtransKey, midtransAPI.URL())
	if err != nil {
		t.Fatal(err)
	}
	var n midtrans.Notification
	json.Unmarshal(body, &n)
	ev, found, err := c.Transaction(context.Background(), n.TransactionID)
	if err != nil || !found {
		t.Fatalf("status of %s: %v %v", n.TransactionID, found, err)
	}
	return ev
}

// midtransRefund builds a genuine Midtrans refund notification (and makes
// it the transaction's state at the status API): the refunds so far, by
// refund_key and amount, their cumulative refund_amount, and whether the
// bank has confirmed them.
func midtransRefund(orderID, txID, status string, confirmed bool, refunds ...midtrans.NotifiedRefund) delivery {
	var total int64
	for i := range refunds {
		amount, _ := payments.ParseAmount(refunds[i].RefundAmount, "IDR")
		total += amount
		if confirmed {
			refunds[i].BankConfirmedAt = "2026-12-01 10:00:00"
		}
	}
	n := midtrans.Notification{OrderID: orderID, TransactionID: txID, TransactionStatus: status, FraudStatus: "accept",
		StatusCode: "200", GrossAmount: "50000.00", Currency: "IDR", PaymentType: "credit_card",
		RefundAmount: payments.MajorText(total, "IDR", 2), Refunds: refunds}
	n.SignatureKey = midtrans.Signature(n, midtransKey)
	b, _ := json.Marshal(n)
	midtransAPI.set(b)
	return delivery{provider: midtrans.Name, body: b}
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

// Refunds are amounts. Two partial refunds of one Midtrans transaction
// are two facts, each answered 200 (the second used to share the
// first's key and be a 409 that Midtrans retried for days): the order is
// partially_refunded after the first and refunded when they reach the
// payment, the amounts exact, the stock kept. Midtrans's second,
// bank-confirmed notification of a refund and a repeat add nothing; a
// refund above what is left is refused with 422 and writes nothing.
func TestMidtransPartialRefundsAddUp(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, sku := f.orderIn(models.OrderPending)
	tx := "tx-refunds-" + id
	if out := f.send(midtransNotification(id, tx, "settlement", "", "50000.00", "IDR")); out.Result != models.ResultProcessed {
		t.Fatalf("paying: %+v", out)
	}
	before := f.snapshot(id, sku)
	first := midtrans.NotifiedRefund{RefundChargebackID: "202502070943231234", RefundAmount: "20000.00", RefundKey: "rk-1-" + id}
	second := midtrans.NotifiedRefund{RefundChargebackID: "202502070943231235", RefundAmount: "30000.00", RefundKey: "rk-2-" + id}

	out := f.send(midtransRefund(id, tx, "partial_refund", false, first))
	if out.Status() != 200 || out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPartiallyRefunded {
		t.Fatalf("the first partial refund: %d %s %s (%s)", out.Status(), out.Result, out.OrderStatus, out.Detail)
	}
	if refunded, rows := f.refundsOf(id); refunded != 20000 || len(rows) != 1 || rows["rk-1-"+id] != 20000 {
		t.Errorf("after the first refund: refunded %d, refunds %v", refunded, rows)
	}
	// The same refund, now confirmed by the bank: a fact of its own, and
	// nothing new.
	if out := f.send(midtransRefund(id, tx, "partial_refund", true, first)); out.Status() != 200 || out.Result != models.ResultStale {
		t.Errorf("the bank-confirmed notification of the first refund: %d %s, want 200 stale", out.Status(), out.Result)
	}
	out = f.send(midtransRefund(id, tx, "refund", true, first, second))
	if out.Status() != 200 || out.Result != models.ResultProcessed || out.OrderStatus != models.OrderRefunded {
		t.Fatalf("the second refund: %d %s %s (%s)", out.Status(), out.Result, out.OrderStatus, out.Detail)
	}
	after := f.snapshot(id, sku)
	if refunded, rows := f.refundsOf(id); refunded != 50000 || len(rows) != 2 || rows["rk-2-"+id] != 30000 ||
		after.payments[tx] != models.PaymentRefunded || after.stock != before.stock {
		t.Errorf("after both refunds: refunded %d, refunds %v, %+v; want 50000 in two refunds, the payment refunded, the stock kept", refunded, rows, after)
	}
	if out := f.send(midtransRefund(id, tx, "refund", true, first, second)); out.Result != models.ResultDuplicate {
		t.Errorf("the last notification again: %s, want duplicate", out.Result)
	}

	// Above what is left: 60000 of a 50000 charge.
	other, _ := f.orderIn(models.OrderPending)
	otherTx := "tx-over-" + other
	f.send(midtransNotification(other, otherTx, "settlement", "", "50000.00", "IDR"))
	out = f.send(midtransRefund(other, otherTx, "partial_refund", false, midtrans.NotifiedRefund{RefundAmount: "60000.00", RefundKey: "rk-over-" + other}))
	if out.Status() != 422 || out.Reason != models.ReasonRefundExceedsPayment {
		t.Errorf("a refund above the payment: %d %s %s, want 422 refund_exceeds_payment", out.Status(), out.Result, out.Reason)
	}
	if refunded, rows := f.refundsOf(other); refunded != 0 || len(rows) != 0 || f.snapshot(other, "").status != models.OrderPaid {
		t.Errorf("after a refused refund: refunded %d, refunds %v; want nothing written", refunded, rows)
	}
	report, err := audit.WithoutJobs(f.db).Run(context.Background(), 0)
	if err != nil || !report.OK {
		t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// The refunds of a Midtrans notification are not signed: whoever holds
// one genuine notification can fill them with "1e1000000", which math/big
// expanded into a million digits — 0.1 s of CPU an element, minutes for
// a 64 KiB body, and the handler kept computing after its connection
// closed. Such a body is refused with 422 missing_field, saying which
// bound it breaks, and writes nothing: more refunds than MaxRefunds
// before any is read, fewer at their first exponent. (How cheaply:
// BenchmarkCostlyRefundBodies in app/gateways/midtrans.)
func TestMidtransExponentRefundsAreRefused(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	tx := "tx-exponent-" + id
	if out := f.send(midtransNotification(id, tx, "settlement", "", "50000.00", "IDR")); out.Result != models.ResultProcessed {
		t.Fatalf("paying: %+v", out)
	}
	genuine := midtransRefund(id, tx, "partial_refund", false, midtrans.NotifiedRefund{RefundAmount: "20000.00", RefundKey: "rk-" + id})
	// withRefunds is the genuine notification with count refunds of
	// "1e1000000", or as many as fit in a delivery when count is 0.
	withRefunds := func(count int) delivery {
		room := payments.MaxBodyBytes - len(forge(genuine, map[string]any{"refunds": []any{}}).body)
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
		d    delivery
		says string
	}{
		{"as many refunds as 64 KiB holds", withRefunds(0), fmt.Sprintf("at most %d are read", payments.MaxRefunds)},
		{"MaxRefunds refunds", withRefunds(payments.MaxRefunds), `refunds[0].refund_amount "1e1000000" is not an amount of IDR: it has an exponent`},
		{"refund_amount", forge(genuine, map[string]any{"refund_amount": "1e1000000"}), "refund_amount \"1e1000000\" is not an amount of IDR: it has an exponent"},
	} {
		out := f.send(tt.d)
		if out.Status() != 422 || out.Refusal != models.EMissingField || !strings.Contains(out.Detail, tt.says) {
			t.Errorf("%s (%d bytes): %d %s (%s); want 422 missing_field: %s", tt.name, len(tt.d.body), out.Status(), out.Refusal, out.Detail, tt.says)
		}
	}
	if refunded, rows := f.refundsOf(id); refunded != 0 || len(rows) != 0 || f.snapshot(id, "").status != models.OrderPaid {
		t.Errorf("after the refused notifications: refunded %d, refunds %v; want nothing written, the order paid", refunded, rows)
	}
}

// A body two parsers could read differently is refused by every gateway
// before anything is written: keys equal but for case (encoding/json
// would fill one field from either, the last one winning) are a 400. (A
// gateway whose package runs its pipeline tests checks its own there:
// Xendit's with what it documents as a number sent in quotes, a 422;
// Stripe's in a body nested inside the event.)
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
	mid := midtransNotification(id, "tx-case-"+id, "pending", "", "50000.00", "IDR")
	mid.body = after(mid.body, `"transaction_status":"pending"`, `,"TRANSACTION_STATUS":"expire"`)
	for _, tc := range []struct {
		name string
		d    delivery
	}{
		{"sandbox", delivery{provider: sandbox.Name, header: testenv.SandboxHeaders("evt_case_"+id, sbx, time.Now()), body: sbx}},
		{"midtrans", mid},
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
