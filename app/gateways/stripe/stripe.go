// Package stripe is Stripe's side of Sekali: its webhook events, verified
// with stripe-go's own webhook package (the library a Stripe shop already
// has), its API for the status poll (status.go), for opening Checkout
// Sessions (page.go) and for refunds (refund.go) — the last two over
// stripe-go's backend, only the calls Sekali makes (api.go) — and a
// sender of its events for the tests and the sandbox page.
//
//   - Authentication: Stripe-Signature (t=…,v1=hex HMAC-SHA256 of
//     t + "." + body) with one of the endpoint secrets (several during a
//     rotation), within Tolerance of the delivery's time. Events of any
//     API version are accepted when the fields Sekali reads parse: the
//     endpoint's version is chosen in Stripe's dashboard, not here.
//   - Key: the event id.
//   - Events: payment_intent.succeeded (metadata.order_id,
//     amount_received) → paid; payment_intent.payment_failed → declined
//     (the PaymentIntent returns to requires_payment_method: the customer
//     may try again); payment_intent.canceled → failed;
//     checkout.session.completed and
//     checkout.session.async_payment_succeeded (client_reference_id, else
//     metadata.order_id; amount_total) with payment_status "paid" → paid,
//     "unpaid" → pending (a delayed method: its outcome follows, as
//     Stripe's fulfilment guide says); checkout.session.async_payment_failed
//     → declined; checkout.session.expired → expired; charge.refunded
//     (metadata.order_id) → refunded, by its cumulative amount_refunded
//     (refunds not named yet); refund.created, refund.updated,
//     refund.failed and charge.refund.updated → refunded, one refund by
//     its id (re_…) with its status — pending (or requires_action),
//     succeeded, failed or canceled, with Stripe's failure_reason — so a
//     refund that fails after Stripe accepted it gives its amount back.
//     The charge's reference is always its PaymentIntent's id (a session's
//     own id when it has none), so payment_intent.succeeded and a
//     session's paid event for one payment are one charge: the second is
//     stale. charge.dispute.created and .updated → disputed,
//     charge.dispute.closed → dispute_won (won, warning_closed) or
//     dispute_lost (lost): a dispute names its PaymentIntent, not the
//     order, which the pipeline takes from the payment, as it does for a
//     refund made in Stripe's dashboard (no metadata.order_id). Every other type,
//     and an event without an order id (another application on the
//     account), is ignored.
//   - Amount: Stripe's minor units of its own, converted (amounts.go).
package stripe

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Name is Stripe's path segment: POST /callbacks/stripe.
const Name = "stripe"

// Schedule is when the janitor asks Stripe again about a call whose
// outcome is unknown (gatewaycalls.Schedule): a minute after the call,
// then 5m, 30m, 2h and 12h later, then daily until Stripe says final.
// Stripe keeps an idempotency key 24 hours, within which a repeat is
// answered with the first answer; after them the refunder finds the
// refund by its metadata and the page finder the session by its order,
// so asking later is as safe. Stripe retries a webhook for three days
// and may keep a refund pending for days (one that requires the
// customer's action, a bank that has not answered): the daily asks run
// past those three days before the audit calls an unknown overdue.
var Schedule = gatewaycalls.Schedule{5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 24 * time.Hour, 24 * time.Hour}

// Tolerance is how old a Stripe signature's timestamp may be.
const Tolerance = 300 * time.Second

// Provider receives Stripe's webhook events.
type Provider struct {
	secrets []string
}

// ParseSecrets reads STRIPE_WEBHOOK_SECRET: one or more "whsec_…"
// endpoint secrets, comma-separated.
func ParseSecrets(secrets string) ([]string, error) {
	var out []string
	for _, secret := range strings.Split(secrets, ",") {
		secret = strings.TrimSpace(secret)
		if !strings.HasPrefix(secret, "whsec_") || len(secret) < 10 {
			return nil, errors.New(`a Stripe endpoint secret starts with "whsec_"`)
		}
		out = append(out, secret)
	}
	return out, nil
}

// NewProvider returns the adapter for STRIPE_WEBHOOK_SECRET.
func NewProvider(secrets string) (*Provider, error) {
	s, err := ParseSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return &Provider{secrets: s}, nil
}

// Name implements payments.Provider.
func (*Provider) Name() string { return Name }

// EventHeaders implements payments.Provider: Parse reads the body alone.
func (*Provider) EventHeaders() []string { return nil }

// DeliveryFields are the members of an event that may differ between its
// deliveries: pending_webhooks is how many endpoints had not yet
// acknowledged it when this delivery left. The fingerprint leaves it out.
func (*Provider) DeliveryFields() []string { return []string{"pending_webhooks"} }

// Verify implements payments.Provider. The signature's age is measured
// from now, the delivery's time on the pipeline's clock: stripe-go's own
// tolerance check reads the wall clock, so only its signature check is
// used.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) error {
	header := h.Get("Stripe-Signature")
	if header == "" {
		return errors.New("no Stripe-Signature header")
	}
	signed, ok := signedAt(header)
	if !ok {
		return errors.New("Stripe-Signature has no single timestamp")
	}
	if now.Sub(signed) > Tolerance {
		return errors.New("Stripe-Signature's timestamp is too old")
	}
	for _, secret := range p.secrets {
		if webhook.ValidatePayloadIgnoringTolerance(body, header, secret) == nil {
			return nil
		}
	}
	return errors.New("no Stripe-Signature matches")
}

// signedAt is the time a Stripe-Signature header was signed at: its t=.
// A header with more than one is refused: stripe-go checks the signature
// over the last, and a fresh one in front of an old one must not pass
// for the age of the signature.
func signedAt(header string) (time.Time, bool) {
	var at time.Time
	n := 0
	for _, pair := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(pair, "t="); ok {
			ts, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			at, n = time.Unix(ts, 0), n+1
		}
	}
	return at, n == 1
}

// Parse implements payments.Provider.
func (*Provider) Parse(_ http.Header, body []byte) (payments.Event, error) {
	return parse(body)
}

func parse(body []byte) (payments.Event, error) {
	if !json.Valid(body) {
		return payments.Event{}, models.Errorf(models.EInvalidPayload, "the body is not JSON")
	}
	var e stripego.Event
	if err := json.Unmarshal(body, &e); err != nil || e.Data == nil {
		return payments.Event{}, models.Errorf(models.EMissingField, "not a Stripe event: %v", err)
	}
	ev := payments.Event{Key: e.ID}
	var orderID, currency string
	var amount int64
	switch e.Type {
	case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled":
		var pi stripego.PaymentIntent
		if err := json.Unmarshal(e.Data.Raw, &pi); err != nil {
			return payments.Event{}, models.Errorf(models.EMissingField, "the event's PaymentIntent does not parse: %v", err)
		}
		orderID, currency, ev.TransactionID = pi.Metadata["order_id"], string(pi.Currency), pi.ID
		switch e.Type {
		case "payment_intent.succeeded":
			ev.Status, amount = models.EventPaid, pi.AmountReceived
		case "payment_intent.payment_failed":
			ev.Status = models.EventDeclined
		default:
			ev.Status = models.EventFailed
		}
	case "checkout.session.completed", "checkout.session.async_payment_succeeded",
		"checkout.session.async_payment_failed", "checkout.session.expired":
		var cs stripego.CheckoutSession
		if err := json.Unmarshal(e.Data.Raw, &cs); err != nil {
			return payments.Event{}, models.Errorf(models.EMissingField, "the event's Checkout Session does not parse: %v", err)
		}
		orderID, currency, ev.TransactionID = sessionOrder(&cs), string(cs.Currency), cs.ID
		if cs.PaymentIntent != nil && cs.PaymentIntent.ID != "" {
			ev.TransactionID = cs.PaymentIntent.ID
		}
		switch {
		case e.Type == "checkout.session.async_payment_failed": // the delayed payment failed: this attempt ends
			ev.Status = models.EventDeclined
		case e.Type == "checkout.session.expired": // the customer never paid: the payment ends
			ev.Status = models.EventExpired
		case cs.PaymentStatus == stripego.CheckoutSessionPaymentStatusPaid: // Stripe's fulfilment guide: fulfil now
			ev.Status, amount = models.EventPaid, cs.AmountTotal
		case cs.PaymentStatus == stripego.CheckoutSessionPaymentStatusUnpaid: // a delayed method: its outcome follows
			ev.Status = models.EventPending
		default:
			return payments.Event{}, fmt.Errorf("%w: checkout session payment_status %q", payments.ErrIgnored, cs.PaymentStatus)
		}
	case "charge.refunded":
		var ch stripego.Charge
		if err := json.Unmarshal(e.Data.Raw, &ch); err != nil {
			return payments.Event{}, models.Errorf(models.EMissingField, "the event's Charge does not parse: %v", err)
		}
		orderID, currency, ev.TransactionID = ch.Metadata["order_id"], string(ch.Currency), ch.ID
		if ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" {
			ev.TransactionID = ch.PaymentIntent.ID
		}
		ev.Status, amount = models.EventRefunded, ch.AmountRefunded
	case "charge.dispute.created", "charge.dispute.updated", "charge.dispute.closed":
		return parseDispute(e)
	case "refund.created", "refund.updated", "refund.failed", "charge.refund.updated":
		return parseRefund(e)
	default:
		return payments.Event{}, fmt.Errorf("%w: event type %s", payments.ErrIgnored, e.Type)
	}
	if orderID == "" {
		return payments.Event{}, fmt.Errorf("%w: %s %s names no order of this shop", payments.ErrIgnored, e.Type, e.ID)
	}
	ev.OrderID, ev.Currency = orderID, strings.ToUpper(currency)
	f := payments.Fields{}
	f.Text("id", ev.Key)
	f.Text("order id", ev.OrderID)
	f.Text("PaymentIntent id", ev.TransactionID)
	if !models.ValidCurrency(ev.Currency) {
		f.Fail("currency %q is not an ISO 4217 code", currency)
	}
	minor, ok := MinorUnits(amount, ev.Currency)
	if !ok {
		f.Invalid("amount %d is not an amount of %s", amount, ev.Currency)
	}
	ev.Amount = minor
	return ev, f.Err
}

// sessionOrder is the order a Checkout Session pays: its
// client_reference_id, else its metadata.order_id.
func sessionOrder(cs *stripego.CheckoutSession) string {
	if cs.ClientReferenceID != "" {
		return cs.ClientReferenceID
	}
	return cs.Metadata["order_id"]
}

// parseDispute reads a charge.dispute.* event: the dispute of a charge,
// by its PaymentIntent. It names no order: the pipeline finds it by the
// PaymentIntent's payment, and ignores the dispute of a charge it does
// not know.
func parseDispute(e stripego.Event) (payments.Event, error) {
	var d stripego.Dispute
	if err := json.Unmarshal(e.Data.Raw, &d); err != nil {
		return payments.Event{}, models.Errorf(models.EMissingField, "the event's Dispute does not parse: %v", err)
	}
	ev := payments.Event{Key: e.ID, Status: models.EventDisputed, Currency: strings.ToUpper(string(d.Currency))}
	if d.PaymentIntent != nil {
		ev.TransactionID = d.PaymentIntent.ID
	}
	if ev.TransactionID == "" {
		return payments.Event{}, fmt.Errorf("%w: %s %s names no PaymentIntent", payments.ErrIgnored, e.Type, e.ID)
	}
	if e.Type == "charge.dispute.closed" {
		switch d.Status {
		case stripego.DisputeStatusWon, stripego.DisputeStatusWarningClosed:
			ev.Status = models.EventDisputeWon
		case stripego.DisputeStatusLost:
			ev.Status = models.EventDisputeLost
		default:
			return payments.Event{}, fmt.Errorf("%w: a closed dispute with status %q", payments.ErrIgnored, d.Status)
		}
	}
	f := payments.Fields{}
	f.Text("id", ev.Key)
	f.Text("PaymentIntent id", ev.TransactionID)
	if !models.ValidCurrency(ev.Currency) {
		f.Fail("currency %q is not an ISO 4217 code", d.Currency)
	}
	amount, ok := MinorUnits(d.Amount, ev.Currency)
	if !ok {
		f.Invalid("amount %d is not an amount of %s", d.Amount, ev.Currency)
	}
	ev.Amount = amount
	return ev, f.Err
}

// refundStates are Stripe's refund statuses in Sekali's terms: a refund
// that requires the customer's action is not final, as a pending one.
var refundStates = map[stripego.RefundStatus]models.RefundStatus{
	stripego.RefundStatusPending:        models.RefundPending,
	stripego.RefundStatusRequiresAction: models.RefundPending,
	stripego.RefundStatusSucceeded:      models.RefundSucceeded,
	stripego.RefundStatusFailed:         models.RefundFailed,
	stripego.RefundStatusCanceled:       models.RefundCanceled,
}

// parseRefund reads a refund.created, refund.updated, refund.failed or
// charge.refund.updated event: one refund of a PaymentIntent, by its id
// (re_…), with its status and, when it failed, Stripe's reason. It names
// its order by metadata.order_id when Sekali asked for the refund; a
// refund made in Stripe's dashboard names none, and the pipeline finds
// the order by the PaymentIntent's payment. The event's amount is the
// refund's: no charge total is stated.
func parseRefund(e stripego.Event) (payments.Event, error) {
	var re stripego.Refund
	if err := json.Unmarshal(e.Data.Raw, &re); err != nil {
		return payments.Event{}, models.Errorf(models.EMissingField, "the event's Refund does not parse: %v", err)
	}
	ev := payments.Event{Key: e.ID, Status: models.EventRefunded, OrderID: re.Metadata["order_id"], Currency: strings.ToUpper(string(re.Currency))}
	if re.PaymentIntent != nil {
		ev.TransactionID = re.PaymentIntent.ID
	}
	if ev.TransactionID == "" { // a refund of a charge without a PaymentIntent: not one of Sekali's
		return payments.Event{}, fmt.Errorf("%w: %s %s names no PaymentIntent", payments.ErrIgnored, e.Type, e.ID)
	}
	state, ok := refundStates[re.Status]
	if !ok {
		return payments.Event{}, fmt.Errorf("%w: refund %s with status %q", payments.ErrIgnored, re.ID, re.Status)
	}
	f := payments.Fields{}
	f.Text("id", ev.Key)
	f.Text("refund id", re.ID)
	f.Text("PaymentIntent id", ev.TransactionID)
	if ev.OrderID != "" {
		f.Text("order id", ev.OrderID)
	}
	if !models.ValidCurrency(ev.Currency) {
		f.Fail("currency %q is not an ISO 4217 code", re.Currency)
	}
	amount, ok := MinorUnits(re.Amount, ev.Currency)
	if !ok || amount < 1 {
		f.Invalid("amount %d is not an amount of %s", re.Amount, ev.Currency)
	}
	ev.Amount = amount
	reason := ""
	if state == models.RefundFailed || state == models.RefundCanceled {
		reason = cmp.Or(string(re.FailureReason), string(re.Status))
	}
	ev.Refunds = []payments.Refund{{Key: re.ID, Amount: amount, Status: state, Reason: reason}}
	return ev, f.Err
}
