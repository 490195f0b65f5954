package payments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// The gateway's side: a Sender writes a notification as its gateway sends
// it — the body in the gateway's format, signed the gateway's way. The
// sign command, the replayer, the sandbox payment page and the tests use
// it to speak each gateway's format; the receiving adapters (Midtrans,
// Xendit, Stripe, Sandbox) never do.

// Fact is what one notification says about a payment.
type Fact struct {
	// EventID is the gateway's event id: the key for the sandbox, Xendit
	// (its webhook-id header) and Stripe. Midtrans sends none: its key is
	// derived from the transaction and its status.
	EventID       string
	OrderID       string
	TransactionID string
	Status        models.PaymentEvent
	Amount        int64  // in Sekali's minor units of Currency
	Currency      string // ISO 4217, upper case
}

// ErrNotExpressible is returned for a fact a gateway has no notification
// for (Xendit has no failed invoice, Stripe no expired PaymentIntent).
var ErrNotExpressible = errors.New("the gateway sends no notification of this status")

// Sender writes one gateway's notifications.
type Sender interface {
	// Provider is the {provider} of POST /callbacks/{provider}.
	Provider() string
	// Body is the notification of f, unsigned: equal facts give equal
	// bytes, so copies of one notification are duplicates, not conflicts.
	Body(f Fact) ([]byte, error)
	// Sign returns the headers and body to send for body at time at. The
	// body changes only for Midtrans, whose signature is inside it.
	Sign(body []byte, eventID string, at time.Time) (http.Header, []byte, error)
}

// Notification is s's signed notification of f at time at.
func Notification(s Sender, f Fact, at time.Time) (http.Header, []byte, error) {
	body, err := s.Body(f)
	if err != nil {
		return nil, nil, err
	}
	return s.Sign(body, f.EventID, at)
}

// NewSender returns the sender of provider, signing with secret: the same
// secret the receiving side is configured with (SANDBOX_WEBHOOK_SECRET's
// whsec_…, MIDTRANS_SERVER_KEY, XENDIT_CALLBACK_TOKEN,
// STRIPE_WEBHOOK_SECRET's first whsec_…).
func NewSender(provider, secret string) (Sender, error) {
	switch provider {
	case SandboxName:
		key, err := stdwebhooks.DecodeSecret(secret)
		if err != nil {
			return nil, err
		}
		return sandboxSender{key: key}, nil
	case MidtransName:
		if _, err := NewMidtrans(secret); err != nil {
			return nil, err
		}
		return midtransSender{serverKey: secret}, nil
	case XenditName:
		if _, err := NewXendit(secret); err != nil {
			return nil, err
		}
		return xenditSender{token: secret}, nil
	case StripeName:
		s, err := NewStripe(secret)
		if err != nil {
			return nil, err
		}
		return stripeSender{secret: s.secrets[0]}, nil
	}
	return nil, fmt.Errorf("unknown provider %q: one of %s", provider, strings.Join(SenderProviders, ", "))
}

// SenderProviders are the providers NewSender knows.
var SenderProviders = []string{SandboxName, MidtransName, XenditName, StripeName}

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

// majorText writes minor units of currency as a decimal text in its major
// unit with at least `decimals` decimals: 150000 IDR, 2 → "150000.00".
func majorText(amount int64, currency string, decimals int) string {
	exp := models.CurrencyExponent(currency)
	return new(big.Rat).SetFrac(big.NewInt(amount), pow10(exp)).FloatString(max(decimals, exp))
}

// NewSandboxSender returns the sandbox's sender for a decoded key.
func NewSandboxSender(key []byte) Sender { return sandboxSender{key: key} }

type sandboxSender struct{ key []byte }

func (sandboxSender) Provider() string { return SandboxName }

func (sandboxSender) Body(f Fact) ([]byte, error) {
	return json.Marshal(map[string]any{"order_id": f.OrderID, "transaction_id": f.TransactionID,
		"payment_status": f.Status, "paid_amount": f.Amount, "currency": f.Currency})
}

func (s sandboxSender) Sign(body []byte, eventID string, at time.Time) (http.Header, []byte, error) {
	if eventID == "" {
		return nil, nil, errors.New("a sandbox notification needs an event id")
	}
	h := stdwebhooks.Headers(s.key, eventID, at, body)
	h.Set("Content-Type", "application/json")
	return h, body, nil
}

type midtransSender struct{ serverKey string }

func (midtransSender) Provider() string { return MidtransName }

// midtransStatuses are the transaction_status and status_code Midtrans
// sends for each fact.
var midtransStatuses = map[models.PaymentEvent][2]string{
	models.EventPaid:     {"settlement", "200"},
	models.EventPending:  {"pending", "201"},
	models.EventFailed:   {"deny", "202"},
	models.EventExpired:  {"expire", "407"},
	models.EventRefunded: {"refund", "200"},
}

// MidtransKey is the key Sekali derives from the Midtrans notification
// of f, which carries no event id: transaction_id:transaction_status.
func MidtransKey(f Fact) string { return f.TransactionID + ":" + midtransStatuses[f.Status][0] }

func (midtransSender) Body(f Fact) ([]byte, error) {
	st, ok := midtransStatuses[f.Status]
	if !ok {
		return nil, fmt.Errorf("midtrans %s: %w", f.Status, ErrNotExpressible)
	}
	return json.Marshal(MidtransNotification{OrderID: f.OrderID, TransactionID: f.TransactionID,
		TransactionStatus: st[0], StatusCode: st[1], GrossAmount: majorText(f.Amount, f.Currency, 2),
		Currency: f.Currency, PaymentType: "bank_transfer"})
}

// Sign sets the body's signature_key; Midtrans signs no header.
func (m midtransSender) Sign(body []byte, _ string, _ time.Time) (http.Header, []byte, error) {
	var fields map[string]any
	var n MidtransNotification
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers are written back as they came
	if err := dec.Decode(&fields); err != nil {
		return nil, nil, fmt.Errorf("not a Midtrans notification: %w", err)
	}
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, nil, fmt.Errorf("not a Midtrans notification: %w", err)
	}
	fields["signature_key"] = MidtransSignature(n, m.serverKey)
	signed, err := json.Marshal(fields)
	return jsonHeader(), signed, err
}

type xenditSender struct{ token string }

func (xenditSender) Provider() string { return XenditName }

var xenditStatuses = map[models.PaymentEvent]string{
	models.EventPaid: "PAID", models.EventPending: "PENDING", models.EventExpired: "EXPIRED",
}

func (xenditSender) Body(f Fact) ([]byte, error) {
	status, ok := xenditStatuses[f.Status]
	if !ok {
		return nil, fmt.Errorf("xendit %s: %w", f.Status, ErrNotExpressible)
	}
	amount := json.Number(majorText(f.Amount, f.Currency, 0))
	invoice := map[string]any{"id": f.TransactionID, "external_id": f.OrderID, "status": status,
		"amount": amount, "currency": f.Currency}
	if f.Status == models.EventPaid {
		invoice["paid_amount"] = amount
	}
	return json.Marshal(invoice)
}

// Sign sets the callback token, and the webhook-id when there is one.
func (x xenditSender) Sign(body []byte, eventID string, _ time.Time) (http.Header, []byte, error) {
	h := jsonHeader()
	h.Set(XenditTokenHeader, x.token)
	if eventID != "" {
		h.Set("Webhook-Id", eventID)
	}
	return h, body, nil
}

type stripeSender struct{ secret string }

func (stripeSender) Provider() string { return StripeName }

func (stripeSender) Body(f Fact) ([]byte, error) {
	amount, ok := stripeFromMinor(f.Amount, f.Currency)
	if !ok {
		return nil, fmt.Errorf("stripe: %d %s has no Stripe amount", f.Amount, f.Currency)
	}
	currency, meta := strings.ToLower(f.Currency), map[string]string{"order_id": f.OrderID}
	var typ string
	var object map[string]any
	switch f.Status {
	case models.EventPaid:
		typ = "payment_intent.succeeded"
		object = map[string]any{"id": f.TransactionID, "object": "payment_intent", "amount": amount,
			"amount_received": amount, "currency": currency, "status": "succeeded", "metadata": meta}
	case models.EventFailed:
		typ = "payment_intent.payment_failed"
		object = map[string]any{"id": f.TransactionID, "object": "payment_intent", "amount": amount,
			"amount_received": 0, "currency": currency, "status": "requires_payment_method", "metadata": meta}
	case models.EventPending:
		typ = "checkout.session.completed"
		object = map[string]any{"id": "cs_" + f.TransactionID, "object": "checkout.session", "client_reference_id": f.OrderID,
			"payment_intent": f.TransactionID, "amount_total": amount, "currency": currency, "payment_status": "unpaid"}
	case models.EventRefunded:
		typ = "charge.refunded"
		object = map[string]any{"id": "ch_" + f.TransactionID, "object": "charge", "payment_intent": f.TransactionID,
			"amount": amount, "amount_refunded": amount, "refunded": true, "currency": currency, "metadata": meta}
	default:
		return nil, fmt.Errorf("stripe %s: %w", f.Status, ErrNotExpressible)
	}
	return json.Marshal(map[string]any{"id": f.EventID, "object": "event", "type": typ,
		"data": map[string]any{"object": object}})
}

// Sign sets Stripe-Signature: t=…,v1=… as Stripe computes it.
func (s stripeSender) Sign(body []byte, _ string, at time.Time) (http.Header, []byte, error) {
	h := jsonHeader()
	h.Set("Stripe-Signature", fmt.Sprintf("t=%d,v1=%x", at.Unix(), webhook.ComputeSignature(at, body, s.secret)))
	return h, body, nil
}

// stripeFromMinor is minorFromStripe's inverse: 150000 IDR is Stripe's
// 15000000.
func stripeFromMinor(amount int64, currency string) (int64, bool) {
	stripeExp, ok := stripeExponents[currency]
	if !ok {
		stripeExp = 2
	}
	r := new(big.Rat).SetFrac(big.NewInt(amount), pow10(models.CurrencyExponent(currency)))
	r.Mul(r, new(big.Rat).SetInt(pow10(stripeExp)))
	if amount < 0 || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}
