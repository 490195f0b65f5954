package stripe_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// The events in testdata have the shapes of the objects in Stripe's API
// reference (docs.stripe.com/api: the Event, PaymentIntent, Checkout
// Session, Charge and Dispute objects, API version 2024-06-20), with an
// order of this shop in their metadata.
const (
	order  = "ORD-01JDY86K809K4DBYWC2041T3P8"
	intent = "pi_3QGkV2LkdIwHu7ix0qW8fN2c"
	charge = "ch_3QGkV2LkdIwHu7ix0mP5oL1x"

	paidEvent     = "evt_3QGkV2LkdIwHu7ix1n0sRhvb"
	sessionEvent  = "evt_1QGkW8LkdIwHu7ixHc2Tq0Ra"
	session       = "cs_test_a1Qm7cN2pV5xR8tL3wZ6yB9dF4hJ0kS2uE7gT1vX5nC8mP3qW6rY9zA2bD"
	sessionIntent = "pi_3QGkW6LkdIwHu7ix1bV4sE9k"
	refundEvent   = "evt_3QGkV2LkdIwHu7ix1kR7sTq2"
	disputeEvent  = "evt_1QGkX3LkdIwHu7ixW9bN2cYd"
)

// edit sets the member at path (dot-separated, from the event) to value;
// removed{} deletes it.
type edit struct {
	path  string
	value any
}

type removed struct{}

func set(path string, value any) edit { return edit{path, value} }
func del(path string) edit            { return edit{path, removed{}} }

// testEvent is testdata/<name>.json with edits.
func testEvent(t *testing.T, name string, edits ...edit) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var event map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&event); err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		parts := strings.Split(e.path, ".")
		m := event
		for _, p := range parts[:len(parts)-1] {
			m = m[p].(map[string]any)
		}
		if _, ok := e.value.(removed); ok {
			delete(m, parts[len(parts)-1])
		} else {
			m[parts[len(parts)-1]] = e.value
		}
	}
	out, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Parse reads each event type Sekali handles into its Event: the key is
// the event id, the charge is the PaymentIntent, the amount is in
// Sekali's minor units.
func TestStripeParseEvents(t *testing.T) {
	t.Parallel()
	const pi, cs, ch, du = "payment_intent.succeeded", "checkout.session.completed", "charge.refunded", "charge.dispute.created"
	paid := func(amount int64, currency string) payments.Event {
		return payments.Event{Key: paidEvent, OrderID: order, TransactionID: intent, Status: models.EventPaid, Amount: amount, Currency: currency}
	}
	sessionPaid := payments.Event{Key: sessionEvent, OrderID: order, TransactionID: sessionIntent, Status: models.EventPaid, Amount: 2198, Currency: "USD"}
	with := func(ev payments.Event, change func(*payments.Event)) payments.Event {
		change(&ev)
		return ev
	}
	dispute := payments.Event{Key: disputeEvent, TransactionID: intent, Status: models.EventDisputed, Amount: 2000, Currency: "USD"}
	for _, tc := range []struct {
		name  string
		file  string
		edits []edit
		want  payments.Event
	}{
		{"a PaymentIntent succeeded, in cents", pi, nil, paid(2000, "USD")},
		{"IDR: Stripe counts hundredths, Sekali rupiah", pi,
			[]edit{set("data.object.currency", "idr"), set("data.object.amount", 15000000), set("data.object.amount_received", 15000000)},
			paid(150000, "IDR")},
		{"JPY: zero-decimal at both", pi,
			[]edit{set("data.object.currency", "jpy"), set("data.object.amount", 5000), set("data.object.amount_received", 5000)},
			paid(5000, "JPY")},
		{"KWD: three decimals at both", pi,
			[]edit{set("data.object.currency", "kwd"), set("data.object.amount", 12345), set("data.object.amount_received", 12345)},
			paid(12345, "KWD")},
		{"BIF: zero-decimal at Stripe, hundredths here", pi,
			[]edit{set("data.object.currency", "bif"), set("data.object.amount", 500), set("data.object.amount_received", 500)},
			paid(50000, "BIF")},
		{"the amount received, not the amount asked", pi,
			[]edit{set("data.object.amount", 2500)}, paid(2000, "USD")},
		{"a failed attempt: the PaymentIntent waits for another method", pi,
			[]edit{set("type", "payment_intent.payment_failed"), set("data.object.status", "requires_payment_method"),
				set("data.object.amount_received", 0),
				set("data.object.last_payment_error", map[string]any{"code": "card_declined", "decline_code": "generic_decline", "type": "card_error"})},
			with(paid(0, "USD"), func(e *payments.Event) { e.Status = models.EventDeclined })},
		{"a canceled PaymentIntent", pi,
			[]edit{set("type", "payment_intent.canceled"), set("data.object.status", "canceled"),
				set("data.object.amount_received", 0), set("data.object.cancellation_reason", "requested_by_customer")},
			with(paid(0, "USD"), func(e *payments.Event) { e.Status = models.EventFailed })},

		{"a paid Checkout Session: its PaymentIntent is the charge", cs, nil, sessionPaid},
		{"a session's order from its metadata when it has no client_reference_id", cs,
			[]edit{set("data.object.client_reference_id", nil), set("data.object.metadata", map[string]any{"order_id": order})},
			sessionPaid},
		{"client_reference_id before metadata", cs,
			[]edit{set("data.object.metadata", map[string]any{"order_id": "ORD-SOMEONE-ELSE"})}, sessionPaid},
		{"a session without a PaymentIntent is its own charge", cs,
			[]edit{set("data.object.payment_intent", nil)},
			with(sessionPaid, func(e *payments.Event) { e.TransactionID = session })},
		{"a delayed method: completed but unpaid", cs,
			[]edit{set("data.object.payment_status", "unpaid")},
			with(sessionPaid, func(e *payments.Event) { e.Status, e.Amount = models.EventPending, 0 })},
		{"the delayed payment succeeded", cs,
			[]edit{set("type", "checkout.session.async_payment_succeeded")}, sessionPaid},
		{"the delayed payment failed", cs,
			[]edit{set("type", "checkout.session.async_payment_failed"), set("data.object.payment_status", "unpaid")},
			with(sessionPaid, func(e *payments.Event) { e.Status, e.Amount = models.EventDeclined, 0 })},
		{"the session expired unpaid", cs,
			[]edit{set("type", "checkout.session.expired"), set("data.object.status", "expired"),
				set("data.object.payment_status", "unpaid"), set("data.object.payment_intent", nil)},
			with(sessionPaid, func(e *payments.Event) { e.Status, e.Amount, e.TransactionID = models.EventExpired, 0, session })},

		{"a refunded charge: its refunded total, on its PaymentIntent", ch, nil,
			payments.Event{Key: refundEvent, OrderID: order, TransactionID: intent, Status: models.EventRefunded, Amount: 2000, Currency: "USD"}},
		{"a partly refunded charge", ch,
			[]edit{set("data.object.amount_refunded", 750), set("data.object.refunded", false)},
			payments.Event{Key: refundEvent, OrderID: order, TransactionID: intent, Status: models.EventRefunded, Amount: 750, Currency: "USD"}},
		{"a charge without a PaymentIntent is its own reference", ch,
			[]edit{set("data.object.payment_intent", nil)},
			payments.Event{Key: refundEvent, OrderID: order, TransactionID: charge, Status: models.EventRefunded, Amount: 2000, Currency: "USD"}},

		{"a dispute opened: no order, its PaymentIntent", du, nil, dispute},
		{"a dispute under review", du,
			[]edit{set("type", "charge.dispute.updated"), set("data.object.status", "under_review")}, dispute},
		{"a dispute won", du, []edit{set("type", "charge.dispute.closed"), set("data.object.status", "won")},
			with(dispute, func(e *payments.Event) { e.Status = models.EventDisputeWon })},
		{"an inquiry closed without a chargeback", du, []edit{set("type", "charge.dispute.closed"), set("data.object.status", "warning_closed")},
			with(dispute, func(e *payments.Event) { e.Status = models.EventDisputeWon })},
		{"a dispute lost", du, []edit{set("type", "charge.dispute.closed"), set("data.object.status", "lost")},
			with(dispute, func(e *payments.Event) { e.Status = models.EventDisputeLost })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := stripe.NewProvider(secret)
			got, err := p.Parse(nil, testEvent(t, tc.file, tc.edits...))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse = %+v\n          want %+v", got, tc.want)
			}
		})
	}
}

// Events Sekali has no use for, and events of another application on the
// same account (no order id), are ignored: answered 200 so that Stripe
// stops sending them. Bodies that are not what Stripe sends are refused
// with the Provider contract's codes.
func TestStripeParseRefusesAndIgnores(t *testing.T) {
	t.Parallel()
	const pi, cs, ch, du = "payment_intent.succeeded", "checkout.session.completed", "charge.refunded", "charge.dispute.created"
	for _, tc := range []struct {
		name  string
		file  string // or raw
		raw   string
		edits []edit
		want  string // ignored, or the error code
	}{
		{name: "an event type Sekali has no use for", file: pi,
			edits: []edit{set("type", "customer.created"), set("data.object", map[string]any{"id": "cus_R8dU2mQ", "object": "customer"})}, want: gatewaytest.Ignored},
		{name: "a PaymentIntent created", file: pi,
			edits: []edit{set("type", "payment_intent.created"), set("data.object.status", "requires_payment_method")}, want: gatewaytest.Ignored},
		{name: "a PaymentIntent of another application", file: pi,
			edits: []edit{set("data.object.metadata", map[string]any{})}, want: gatewaytest.Ignored},
		{name: "a session of another application", file: cs,
			edits: []edit{set("data.object.client_reference_id", nil)}, want: gatewaytest.Ignored},
		{name: "a session that needed no payment", file: cs,
			edits: []edit{set("data.object.payment_status", "no_payment_required")}, want: gatewaytest.Ignored},
		{name: "a refund of another application's charge", file: ch,
			edits: []edit{set("data.object.metadata", map[string]any{})}, want: gatewaytest.Ignored},
		// The Dispute object of Stripe's API reference: a charge without a
		// PaymentIntent, so none Sekali made.
		{name: "a dispute of a charge without a PaymentIntent", file: du,
			edits: []edit{set("data.object.payment_intent", nil)}, want: gatewaytest.Ignored},
		{name: "a closed dispute whose status is not final", file: du,
			edits: []edit{set("type", "charge.dispute.closed")}, want: gatewaytest.Ignored},

		{name: "not JSON", raw: `{"id":"evt_1","object":"event",`, want: models.EInvalidPayload},
		{name: "not JSON at all", raw: `evt_1`, want: models.EInvalidPayload},
		{name: "a JSON array", raw: `[]`, want: models.EMissingField},
		{name: "an event without data", raw: `{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`, want: models.EMissingField},
		{name: "an event without an object", file: pi, edits: []edit{del("data.object")}, want: models.EMissingField},
		{name: "an event without an id", file: pi, edits: []edit{del("id")}, want: models.EMissingField},
		{name: "a PaymentIntent without an id", file: pi, edits: []edit{del("data.object.id")}, want: models.EMissingField},
		{name: "an amount in quotes", file: pi, edits: []edit{set("data.object.amount_received", "2000")}, want: models.EMissingField},
		{name: "metadata that is not an object", file: pi, edits: []edit{set("data.object.metadata", "ORD-1")}, want: models.EMissingField},
		{name: "a fraction of a rupiah", file: pi,
			edits: []edit{set("data.object.currency", "idr"), set("data.object.amount_received", 15000050)}, want: models.EInvalid},
		{name: "a negative amount", file: pi, edits: []edit{set("data.object.amount_received", -2000)}, want: models.EInvalid},
		{name: "an amount beyond any order", file: pi, edits: []edit{set("data.object.amount_received", int64(models.MaxTotal)*100+100)}, want: models.EInvalid},
		{name: "a currency that is not ISO 4217", file: pi, edits: []edit{set("data.object.currency", "usdt")}, want: models.EMissingField},
		{name: "no currency", file: cs, edits: []edit{del("data.object.currency")}, want: models.EMissingField},
		{name: "an order id longer than a column", file: pi,
			edits: []edit{set("data.object.metadata", map[string]any{"order_id": strings.Repeat("A", payments.MaxFieldLength+1)})}, want: models.EMissingField},
		{name: "an order id with a NUL", file: cs, edits: []edit{set("data.object.client_reference_id", "ORD-\x00")}, want: models.EMissingField},
		{name: "a refund without a currency", file: ch, edits: []edit{set("data.object.currency", "")}, want: models.EMissingField},
		{name: "a dispute without a currency", file: du, edits: []edit{del("data.object.currency")}, want: models.EMissingField},
		{name: "a dispute of a negative amount", file: du, edits: []edit{set("data.object.amount", -1)}, want: models.EInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(tc.raw)
			if tc.file != "" {
				body = testEvent(t, tc.file, tc.edits...)
			}
			p, _ := stripe.NewProvider(secret)
			ev, err := p.Parse(nil, body)
			gatewaytest.Refused(t, ev, err, tc.want)
		})
	}
}

// Stripe's deliveries of one event differ in pending_webhooks, which the
// fingerprint leaves out; the event is in the body alone.
func TestStripeProviderDescribesItsDeliveries(t *testing.T) {
	t.Parallel()
	p, _ := stripe.NewProvider(secret)
	if p.Name() != "stripe" || p.EventHeaders() != nil || !reflect.DeepEqual(p.DeliveryFields(), []string{"pending_webhooks"}) {
		t.Fatalf("Name %q, EventHeaders %q, DeliveryFields %q", p.Name(), p.EventHeaders(), p.DeliveryFields())
	}
}
