package payments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
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
	midtransKey  = "SB-Mid-server-TEST0123456789abcdef"
	stripeSecret = "whsec_test_0123456789abcdef"
)

// gatewayProviders are the receiving adapters of the gateways named here,
// and the sandbox's.
func gatewayProviders(t *testing.T) []payments.Provider {
	t.Helper()
	midtransProvider, err := midtrans.NewProvider(midtransKey, midtransAPI.URL())
	if err != nil {
		t.Fatal(err)
	}
	stripeProvider, err := stripe.NewProvider("whsec_old_rotated_out," + stripeSecret)
	if err != nil {
		t.Fatal(err)
	}
	return []payments.Provider{sandbox.NewProvider([][]byte{testenv.SandboxKey}), midtransProvider, stripeProvider}
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
		{"midtrans", func(id, ref string) delivery {
			return midtransNotification(id, ref, "settlement", "", "50000.00", "IDR")
		},
			func(id, ref string) delivery { return midtransNotification(id, ref, "refund", "", "50000.00", "IDR") }},
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
		again := midtransNotification(id, ref, "capture", "accept", "50000.00", "IDR")
		if tt.name == "stripe" {
			again = stripeEvent("evt_again_"+ref, "payment_intent.succeeded", paymentIntent(id, ref, 5000000, "idr"))
		}
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
// a fraction the rupiah cannot hold; Stripe's 15000050 IDR hundredths too.
func TestGatewayAmountsAreExact(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	if out := f.send(midtransNotification(id, "tx-frac", "settlement", "", "50000.50", "IDR")); out.Status() != 422 || out.Refusal != models.EMissingField {
		t.Errorf("Midtrans 50000.50 IDR: %d %s", out.Status(), out.Result)
	}
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
	mid := midtransNotification(id, "tx-case-"+id, "pending", "", "50000.00", "IDR")
	mid.body = after(mid.body, `"transaction_status":"pending"`, `,"TRANSACTION_STATUS":"expire"`)
	stp := stripeEvent("evt_case_"+id, "payment_intent.succeeded", paymentIntent(id, "pi_case_"+id, 5000000, "idr"))
	stp.body = after(stp.body, `"status":"succeeded"`, `,"Status":"canceled"`) // inside data.object
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: stp.body, Secret: stripeSecret, Timestamp: time.Now()})
	stp.header = http.Header{"Stripe-Signature": {signed.Header}}
	for _, tc := range []struct {
		name string
		d    delivery
	}{
		{"sandbox", delivery{provider: sandbox.Name, header: testenv.SandboxHeaders("evt_case_"+id, sbx, time.Now()), body: sbx}},
		{"midtrans", mid},
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
