package xendit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Sender writes Xendit's invoice callbacks with a callback token: the
// sign command, the replayer, the sandbox page and the tests speak the
// format through it; the Provider never does.
type Sender struct{ token string }

// NewSender returns the sender for the callback verification token.
func NewSender(token string) (payments.Sender, error) {
	if err := CheckToken(token); err != nil {
		return nil, err
	}
	return Sender{token: token}, nil
}

// Provider implements payments.Sender.
func (Sender) Provider() string { return Name }

var statuses = map[models.PaymentEvent]string{
	models.EventPaid: "PAID", models.EventPending: "PENDING", models.EventExpired: "EXPIRED",
}

// Body implements payments.Sender.
func (Sender) Body(f payments.Fact) ([]byte, error) {
	status, ok := statuses[f.Status]
	if !ok {
		return nil, fmt.Errorf("xendit %s: %w", f.Status, payments.ErrNotExpressible)
	}
	amount := json.Number(payments.MajorText(f.Amount, f.Currency, 0))
	invoice := map[string]any{"id": f.TransactionID, "external_id": f.OrderID, "status": status,
		"amount": amount, "currency": f.Currency}
	if f.Status == models.EventPaid {
		invoice["paid_amount"] = amount
	}
	return json.Marshal(invoice)
}

// Sign implements payments.Sender: the callback token, and the webhook-id
// when there is one.
func (s Sender) Sign(body []byte, eventID string, _ time.Time) (http.Header, []byte, error) {
	h := http.Header{"Content-Type": {"application/json"}}
	h.Set(TokenHeader, s.token)
	if eventID != "" {
		h.Set("Webhook-Id", eventID)
	}
	return h, body, nil
}
