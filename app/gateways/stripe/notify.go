package stripe

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Sender writes Stripe's events, signed with an endpoint secret: the sign
// command, the replayer, the sandbox page and the tests speak the format
// through it; the Provider never does.
type Sender struct{ secret string }

// NewSender returns the sender that signs with the first secret of
// STRIPE_WEBHOOK_SECRET.
func NewSender(secrets string) (payments.Sender, error) {
	s, err := ParseSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return Sender{secret: s[0]}, nil
}

// Provider implements payments.Sender.
func (Sender) Provider() string { return Name }

// Body implements payments.Sender.
func (Sender) Body(f payments.Fact) ([]byte, error) {
	amount, ok := Amount(f.Amount, f.Currency)
	if !ok {
		return nil, fmt.Errorf("stripe: %d %s has no Stripe amount", f.Amount, f.Currency)
	}
	currency, meta := strings.ToLower(f.Currency), map[string]string{"order_id": f.OrderID}
	var typ string
	var object map[string]any
	switch {
	case f.Status == models.EventPaid:
		typ = "payment_intent.succeeded"
		object = map[string]any{"id": f.TransactionID, "object": "payment_intent", "amount": amount,
			"amount_received": amount, "currency": currency, "status": "succeeded", "metadata": meta}
	case f.Status == models.EventDeclined:
		typ = "payment_intent.payment_failed"
		object = map[string]any{"id": f.TransactionID, "object": "payment_intent", "amount": amount,
			"amount_received": 0, "currency": currency, "status": "requires_payment_method", "metadata": meta}
	case f.Status == models.EventFailed:
		typ = "payment_intent.canceled"
		object = map[string]any{"id": f.TransactionID, "object": "payment_intent", "amount": amount,
			"amount_received": 0, "currency": currency, "status": "canceled", "metadata": meta}
	case f.Status == models.EventPending:
		typ = "checkout.session.completed"
		object = map[string]any{"id": "cs_" + f.TransactionID, "object": "checkout.session", "client_reference_id": f.OrderID,
			"payment_intent": f.TransactionID, "amount_total": amount, "currency": currency, "payment_status": "unpaid"}
	case f.Status == models.EventRefunded && f.RefundID != "":
		typ, object = refundEvent(f, amount, currency)
	case f.Status == models.EventRefunded:
		typ = "charge.refunded"
		object = map[string]any{"id": "ch_" + f.TransactionID, "object": "charge", "payment_intent": f.TransactionID,
			"amount": amount, "amount_refunded": amount, "refunded": true, "currency": currency, "metadata": meta}
	default:
		return nil, fmt.Errorf("stripe %s: %w", f.Status, payments.ErrNotExpressible)
	}
	return json.Marshal(map[string]any{"id": f.EventID, "object": "event", "type": typ,
		"data": map[string]any{"object": object}})
}

// Sign implements payments.Sender: Stripe-Signature: t=…,v1=… as Stripe
// computes it.
func (s Sender) Sign(body []byte, _ string, at time.Time) (http.Header, []byte, error) {
	h := http.Header{"Content-Type": {"application/json"}}
	h.Set("Stripe-Signature", fmt.Sprintf("t=%d,v1=%x", at.Unix(), webhook.ComputeSignature(at, body, s.secret)))
	return h, body, nil
}

// refundEvent is Stripe's event of refund f.RefundID of PaymentIntent
// f.TransactionID in state f.RefundStatus: refund.created while pending,
// refund.failed once failed, refund.updated otherwise (succeeded,
// canceled).
func refundEvent(f payments.Fact, amount int64, currency string) (string, map[string]any) {
	status := cmp.Or(f.RefundStatus, models.RefundSucceeded)
	typ := "refund.updated"
	switch status {
	case models.RefundPending:
		typ = "refund.created"
	case models.RefundFailed:
		typ = "refund.failed"
	}
	object := map[string]any{"id": f.RefundID, "object": "refund", "amount": amount, "currency": currency,
		"payment_intent": f.TransactionID, "charge": "ch_" + f.TransactionID, "status": string(status),
		"metadata": map[string]string{"order_id": f.OrderID}}
	if status == models.RefundFailed || status == models.RefundCanceled {
		object["failure_reason"] = cmp.Or(f.RefundReason, "unknown")
	}
	return typ, object
}
