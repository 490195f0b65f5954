// Package xendit is Xendit's side of Sekali: its invoice callbacks, its
// invoice API for the status poll and for the invoices the shop's Pay
// opens (PageOpener), and a sender of its callbacks for the tests and the
// sandbox page.
//
//   - Authentication: the x-callback-token header is the account's callback
//     verification token, compared in constant time. It is a static
//     secret, not a signature of the body: whoever learns it can write any
//     callback. So a payment (PAID, SETTLED) is confirmed with Xendit's
//     invoice API before anything is written (Confirm: GET
//     /v2/invoices/{id}, with XENDIT_SECRET_KEY, which the token
//     therefore needs), and only what the API says is applied. An expiry
//     and a refund callback are applied as they say (no money comes in).
//   - Key: the webhook-id header when Xendit sends one, else the invoice id
//     and its status (id:status): PAID then SETTLED are two facts.
//   - Status: PAID and SETTLED → paid (the second is stale); EXPIRED →
//     expired; PENDING → pending. Anything else is ignored.
//   - Refunds: Xendit's refund callbacks (refund.succeeded,
//     refund.failed: {event, data: the refund}), to the same URL with the
//     same token → refunded, one refund by its id (rfd-…) with its status
//     (PENDING, SUCCEEDED, FAILED, CANCELLED) and failure_code: a refund
//     that fails after Xendit answered PENDING gives its amount back.
//   - Amount: paid_amount, a JSON number in the currency's major unit, read
//     by payments.ParseAmount: no exponent, no sign, at most 16 digits
//     before the point.
//
// The body is the invoice callback of github.com/xendit/xendit-node
// docs/Invoice.md (InvoiceCallback): id, external_id (the order id),
// status, paid_amount, currency.
package xendit

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// Name is Xendit's path segment: POST /callbacks/xendit.
const Name = "xendit"

// Schedule is when the janitor asks Xendit again about a call whose
// outcome is unknown (gatewaycalls.Schedule): a minute after the call,
// then 5m, 30m, 2h and 12h later, then daily for a week. Xendit answers
// every refund PENDING and settles it once the payment channel has
// refunded — an e-wallet within minutes, other channels after days —
// and tells it by a callback that may be lost; the refunder finds a
// refund by its reference_id and the page finder an invoice by its
// external_id, neither of which expires (Xendit does not say how long
// it keeps an idempotency key).
var Schedule = gatewaycalls.Schedule{5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour}

// TokenHeader carries Xendit's callback verification token.
const TokenHeader = "X-Callback-Token"

// Provider receives Xendit's invoice callbacks.
type Provider struct {
	token string
	api   *StatusClient // confirms what a paid callback says
}

// CheckToken checks the form of a callback verification token
// (XENDIT_CALLBACK_TOKEN).
func CheckToken(token string) error {
	if len(token) < 16 {
		return errors.New("a Xendit callback verification token is at least 16 characters")
	}
	return nil
}

// NewProvider returns the adapter for the callback verification token,
// which confirms paid callbacks with Xendit's invoice API at apiURL
// (DefaultAPIURL when empty), asked with the secret API key.
func NewProvider(token, secretKey, apiURL string) (*Provider, error) {
	if err := CheckToken(token); err != nil {
		return nil, err
	}
	api, err := NewStatusClient(secretKey, apiURL)
	if err != nil {
		return nil, err
	}
	return &Provider{token: token, api: api}, nil
}

// Confirm implements payments.Confirmer: what Xendit's invoice API says
// of a paid callback's invoice. Only a payment is asked about — the
// callback that moves money in, and the one a forger gains by — so any
// other event is answered as it says (docs/callbacks.md, Xendit). The
// API knows no webhook-id, and PAID and SETTLED are one payment: an
// answer that the invoice is paid states the fact the callback's key
// names, and is compared with the callback by order, invoice, amount
// and currency.
func (p *Provider) Confirm(ctx context.Context, ev payments.Event) (payments.Event, bool, error) {
	if ev.Status != models.EventPaid {
		return ev, true, nil
	}
	answer, found, err := p.api.Invoice(ctx, ev.TransactionID)
	if err == nil && found && answer.Status == models.EventPaid {
		answer.Key = ev.Key
	}
	return answer, found, err
}

// Name implements payments.Provider.
func (*Provider) Name() string { return Name }

// EventHeaders implements payments.Provider: the key is the webhook-id
// header when Xendit sends one.
func (*Provider) EventHeaders() []string { return eventHeaders }

var eventHeaders = []string{stdwebhooks.HeaderID}

// Verify implements payments.Provider: the token header.
func (p *Provider) Verify(h http.Header, _ []byte, _ time.Time) error {
	got := h.Values(TokenHeader)
	if len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), []byte(p.token)) != 1 {
		return errors.New("x-callback-token is missing or wrong")
	}
	return nil
}

// Parse implements payments.Provider.
func (*Provider) Parse(h http.Header, body []byte) (payments.Event, error) {
	v, err := canonjson.Decode(body)
	if err != nil {
		return payments.Event{}, models.Errorf(models.EInvalidPayload, "the body is refused: %s", canonjson.Reason(err))
	}
	return parse(h.Get(stdwebhooks.HeaderID), v)
}

// parse reads an invoice, decoded, from a callback or from the invoice
// API (which has no webhook-id: eventID is empty), or a refund callback.
func parse(eventID string, v any) (payments.Event, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return payments.Event{}, models.Errorf(models.EMissingField, "the invoice callback must be a JSON object")
	}
	if event, ok := obj["event"].(string); ok && strings.HasPrefix(event, "refund.") {
		return parseRefund(eventID, event, obj)
	}
	f := payments.Fields{Object: obj}
	status := f.String("status")
	if f.Err != nil {
		return payments.Event{}, f.Err
	}
	var event models.PaymentEvent
	switch status {
	case "PAID", "SETTLED":
		event = models.EventPaid
	case "EXPIRED":
		event = models.EventExpired
	case "PENDING":
		event = models.EventPending
	default:
		return payments.Event{}, fmt.Errorf("%w: invoice status %q", payments.ErrIgnored, status)
	}
	ev := payments.Event{Status: event}
	ev.TransactionID = f.String("id")
	ev.OrderID = f.String("external_id")
	ev.Currency = f.String("currency")
	ev.Key = eventID
	if ev.Key == "" {
		ev.Key = ev.TransactionID + ":" + status
	}
	f.Text("webhook-id or id", ev.Key)
	if f.Err == nil {
		f.Currency("currency", ev.Currency)
	}
	if event == models.EventPaid && f.Err == nil {
		// A number, as Xendit documents it: a number in quotes is refused.
		if paid := f.Number("paid_amount"); f.Err == nil {
			ev.Amount = f.Amount("paid_amount", string(paid), ev.Currency)
		}
	}
	return ev, f.Err
}

// refundStates are Xendit's refund statuses in Sekali's terms.
var refundStates = map[string]models.RefundStatus{
	"PENDING":   models.RefundPending,
	"SUCCEEDED": models.RefundSucceeded,
	"FAILED":    models.RefundFailed,
	"CANCELLED": models.RefundCanceled,
}

// parseRefund reads Xendit's refund callback (docs.xendit.co: Refund
// webhook notification): {event: refund.succeeded | refund.failed,
// business_id, created, data: the refund}. The refund is named by its id
// (rfd-…), as the refunder's answer names it, with its status and, when
// it failed, its failure_code; it refunds the invoice data.invoice_id
// (Sekali's charge reference for Xendit), and names its order by
// data.metadata.order_id when Sekali asked for it (else the pipeline
// finds the order by the invoice's payment). The key is the webhook-id
// header, else {refund id}:{status}.
func parseRefund(eventID, event string, obj map[string]any) (payments.Event, error) {
	data, ok := obj["data"].(map[string]any)
	if !ok {
		return payments.Event{}, models.Errorf(models.EMissingField, "the refund callback's data must be an object")
	}
	f := payments.Fields{Object: data}
	id := f.String("id")
	status := f.String("status")
	invoice := f.OptionalString("invoice_id")
	if f.Err != nil {
		return payments.Event{}, f.Err
	}
	state, ok := refundStates[status]
	if !ok {
		return payments.Event{}, fmt.Errorf("%w: %s: refund status %q", payments.ErrIgnored, event, status)
	}
	if invoice == "" { // a refund of a payment that is not an invoice: not Sekali's
		return payments.Event{}, fmt.Errorf("%w: %s %s refunds no invoice", payments.ErrIgnored, event, id)
	}
	ev := payments.Event{Key: eventID, Status: models.EventRefunded, TransactionID: invoice, Currency: f.String("currency")}
	if ev.Key == "" {
		ev.Key = id + ":" + status
	}
	if meta, ok := data["metadata"].(map[string]any); ok {
		if order, ok := meta["order_id"].(string); ok {
			ev.OrderID = order
			f.Text("metadata.order_id", order)
		}
	}
	f.Text("webhook-id or id", ev.Key)
	if f.Err == nil {
		f.Currency("currency", ev.Currency)
	}
	amount := f.Number("amount")
	if f.Err == nil {
		ev.Amount = f.Amount("amount", string(amount), ev.Currency)
		if f.Err == nil && ev.Amount < 1 {
			f.Fail("amount must be above 0")
		}
	}
	reason := ""
	if !state.Counts() {
		reason, _ = data["failure_code"].(string)
		reason = cmp.Or(reason, status)
	}
	ev.Refunds = []payments.Refund{{Key: id, Amount: ev.Amount, Status: state, Reason: reason}}
	return ev, f.Err
}
