package stripe

import (
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
	switch f.Status {
	case models.EventPaid:
		typ = "payment_intent.succeeded"
		object = map[string]any{"id": f.TransactionID, "object": "payment_intent", "amount": amount,
			"amount_received": amount, "currency": currency, "status": "succeeded", "metadata": meta}
	case models.EventDeclined:
		typ = "payment_intent.payment_failed"
		object = map[string]any{"id": f.TransactionID, "object": "payment_intent", "amount": amount,
			"amount_received": 0, "currency": currency, "status": "requires_payment_method", "metadata": meta}
	case models.EventFailed:
		typ = "payment_intent.canceled"
		object = map[string]any{"id": f.TransactionID, "object": "payment_intent", "amount": amount,
			"amount_received": 0, "currency": currency, "status": "canceled", "metadata": meta}
	case models.EventPending:
		typ = "checkout.session.completed"
		object = map[string]any{"id": "cs_" + f.TransactionID, "object": "checkout.session", "client_reference_id": f.OrderID,
			"payment_intent": f.TransactionID, "amount_total": amount, "currency": currency, "payment_status": "unpaid"}
	case models.EventRefunded:
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
