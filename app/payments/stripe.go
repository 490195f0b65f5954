package payments

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/sekali/sekali/models"
)

// StripeName is Stripe's path segment: POST /callbacks/stripe.
const StripeName = "stripe"

// StripeTolerance is how old a Stripe signature's timestamp may be.
const StripeTolerance = 300 * time.Second

// Stripe receives Stripe's webhook events, verified with stripe-go's own
// webhook package (the library a Stripe shop already has).
//
//   - Authentication: Stripe-Signature (t=…,v1=hex HMAC-SHA256 of
//     t + "." + body) with one of the endpoint secrets (several during a
//     rotation), within StripeTolerance. Events of any API version are
//     accepted when the fields Sekali reads parse: the endpoint's version
//     is chosen in Stripe's dashboard, not here.
//   - Key: the event id.
//   - Events: payment_intent.succeeded (metadata.order_id,
//     amount_received) → paid; payment_intent.payment_failed → failed;
//     checkout.session.completed (client_reference_id, amount_total,
//     payment_status "paid") → paid, "unpaid" → pending; charge.refunded
//     (metadata.order_id) → refunded. The charge's reference is always its
//     PaymentIntent's id, so payment_intent.succeeded and
//     checkout.session.completed for one payment are one charge: the
//     second is stale. Every other type, and an event without an order id
//     (another application on the account), is ignored.
//   - Amount: Stripe's minor units of its own, converted (IDR: Stripe
//     counts hundredths, Sekali rupiah).
type Stripe struct {
	secrets []string
}

// NewStripe returns the adapter for STRIPE_WEBHOOK_SECRET: one or more
// "whsec_…" endpoint secrets, comma-separated.
func NewStripe(secrets string) (*Stripe, error) {
	s := &Stripe{}
	for _, secret := range strings.Split(secrets, ",") {
		secret = strings.TrimSpace(secret)
		if !strings.HasPrefix(secret, "whsec_") || len(secret) < 10 {
			return nil, errors.New(`a Stripe endpoint secret starts with "whsec_"`)
		}
		s.secrets = append(s.secrets, secret)
	}
	return s, nil
}

// Name implements Provider.
func (*Stripe) Name() string { return StripeName }

// EventHeaders implements Provider: Parse reads the body alone.
func (*Stripe) EventHeaders() []string { return nil }

// DeliveryFields are the members of an event that may differ between its
// deliveries: pending_webhooks is how many endpoints had not yet
// acknowledged it when this delivery left. The fingerprint leaves it out.
func (*Stripe) DeliveryFields() []string { return []string{"pending_webhooks"} }

// Verify implements Provider.
func (s *Stripe) Verify(h http.Header, body []byte, _ time.Time) error {
	header := h.Get("Stripe-Signature")
	if header == "" {
		return errors.New("no Stripe-Signature header")
	}
	var err error
	for _, secret := range s.secrets {
		if err = webhook.ValidatePayloadWithTolerance(body, header, secret, StripeTolerance); err == nil {
			return nil
		}
	}
	if errors.Is(err, webhook.ErrTooOld) {
		return errors.New("Stripe-Signature's timestamp is too old")
	}
	return errors.New("no Stripe-Signature matches")
}

// Parse implements Provider.
func (s *Stripe) Parse(_ http.Header, body []byte) (Event, error) {
	var e stripe.Event
	if err := json.Unmarshal(body, &e); err != nil || e.Data == nil {
		return Event{}, models.Errorf(models.EMissingField, "not a Stripe event: %v", err)
	}
	ev := Event{Key: e.ID}
	var orderID, currency string
	var amount int64
	switch e.Type {
	case "payment_intent.succeeded", "payment_intent.payment_failed":
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(e.Data.Raw, &pi); err != nil {
			return Event{}, models.Errorf(models.EMissingField, "the event's PaymentIntent does not parse: %v", err)
		}
		orderID, currency, ev.TransactionID = pi.Metadata["order_id"], string(pi.Currency), pi.ID
		ev.Status = models.EventFailed
		if e.Type == "payment_intent.succeeded" {
			ev.Status, amount = models.EventPaid, pi.AmountReceived
		}
	case "checkout.session.completed":
		var cs stripe.CheckoutSession
		if err := json.Unmarshal(e.Data.Raw, &cs); err != nil {
			return Event{}, models.Errorf(models.EMissingField, "the event's Checkout Session does not parse: %v", err)
		}
		orderID, currency, ev.TransactionID = cs.ClientReferenceID, string(cs.Currency), cs.ID
		if cs.PaymentIntent != nil && cs.PaymentIntent.ID != "" {
			ev.TransactionID = cs.PaymentIntent.ID
		}
		switch cs.PaymentStatus {
		case stripe.CheckoutSessionPaymentStatusPaid:
			ev.Status, amount = models.EventPaid, cs.AmountTotal
		case stripe.CheckoutSessionPaymentStatusUnpaid:
			ev.Status = models.EventPending
		default:
			return Event{}, fmt.Errorf("%w: checkout session payment_status %q", ErrIgnored, cs.PaymentStatus)
		}
	case "charge.refunded":
		var ch stripe.Charge
		if err := json.Unmarshal(e.Data.Raw, &ch); err != nil {
			return Event{}, models.Errorf(models.EMissingField, "the event's Charge does not parse: %v", err)
		}
		orderID, currency, ev.TransactionID = ch.Metadata["order_id"], string(ch.Currency), ch.ID
		if ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" {
			ev.TransactionID = ch.PaymentIntent.ID
		}
		ev.Status, amount = models.EventRefunded, ch.AmountRefunded
	default:
		return Event{}, fmt.Errorf("%w: event type %s", ErrIgnored, e.Type)
	}
	if orderID == "" {
		return Event{}, fmt.Errorf("%w: %s %s names no order of this shop", ErrIgnored, e.Type, e.ID)
	}
	ev.OrderID, ev.Currency = orderID, strings.ToUpper(currency)
	f := fields{}
	f.text("id", ev.Key)
	f.text("order id", ev.OrderID)
	f.text("PaymentIntent id", ev.TransactionID)
	if !models.ValidCurrency(ev.Currency) {
		f.fail("currency %q is not an ISO 4217 code", currency)
	}
	minor, ok := minorFromStripe(amount, ev.Currency)
	if !ok {
		f.fail("amount %d is not an amount of %s", amount, ev.Currency)
	}
	ev.Amount = minor
	return ev, f.err
}
