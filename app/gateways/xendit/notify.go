package xendit

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
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

// refundStatuses are Xendit's refund statuses of Sekali's refund states.
var refundStatuses = map[models.RefundStatus]string{
	models.RefundPending: "PENDING", models.RefundSucceeded: "SUCCEEDED",
	models.RefundFailed: "FAILED", models.RefundCanceled: "CANCELLED",
}

// Body implements payments.Sender: an invoice callback, or for a refund
// that names its refund (RefundID) Xendit's refund callback.
func (Sender) Body(f payments.Fact) ([]byte, error) {
	if f.Status == models.EventRefunded && f.RefundID != "" {
		return refundBody(f)
	}
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

// Tell implements payments.Teller: a paid invoice's callback, as signed,
// is PUT to the emulation's /v2/invoices/{id}, which knows the invoice
// paid from then on. Only a payment is confirmed (Provider.Confirm).
func (s Sender) Tell(f payments.Fact, body []byte) (*http.Request, error) {
	if f.Status != models.EventPaid {
		return nil, nil
	}
	header, signed, err := s.Sign(body, f.EventID, time.Time{})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPut, EmulatorPath+"/v2/invoices/"+url.PathEscape(f.TransactionID), bytes.NewReader(signed))
	if err != nil {
		return nil, err
	}
	req.Header = header
	return req, nil
}

// refundBody is Xendit's refund callback of refund f.RefundID of invoice
// f.TransactionID: refund.failed when it failed, refund.succeeded
// otherwise (Xendit sends no callback of a pending refund).
func refundBody(f payments.Fact) ([]byte, error) {
	state := cmp.Or(f.RefundStatus, models.RefundSucceeded)
	status, ok := refundStatuses[state]
	if !ok || state == models.RefundPending {
		return nil, fmt.Errorf("xendit refund %s: %w", state, payments.ErrNotExpressible)
	}
	event := "refund.succeeded"
	var failure any
	if !state.Counts() {
		event, failure = "refund.failed", f.RefundReason
		if f.RefundReason == "" {
			failure = "REFUND_FAILED"
		}
	}
	return json.Marshal(map[string]any{"event": event, "business_id": "sekali-sandbox",
		"data": map[string]any{"id": f.RefundID, "invoice_id": f.TransactionID, "payment_id": nil,
			"amount": json.Number(payments.MajorText(f.Amount, f.Currency, 0)), "currency": f.Currency, "status": status,
			"reason": "REQUESTED_BY_CUSTOMER", "failure_code": failure, "metadata": map[string]string{"order_id": f.OrderID}}})
}
