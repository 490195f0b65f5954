package sandbox

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/stdwebhooks"
)

// Sender writes the sandbox gateway's notifications: the sign command,
// the replayer, the sandbox page and the tests speak the format through
// it; the Provider never does.
type Sender struct{ key []byte }

// NewSender returns the sender for a decoded key.
func NewSender(key []byte) Sender { return Sender{key: key} }

// NewSenderFromSecret returns the sender for a whsec_… secret.
func NewSenderFromSecret(secret string) (payments.Sender, error) {
	key, err := stdwebhooks.DecodeSecret(secret)
	if err != nil {
		return nil, err
	}
	return Sender{key: key}, nil
}

// Provider implements payments.Sender.
func (Sender) Provider() string { return Name }

// Body implements payments.Sender.
func (Sender) Body(f payments.Fact) ([]byte, error) {
	return json.Marshal(Body{OrderID: f.OrderID, TransactionID: f.TransactionID,
		PaymentStatus: f.Status, PaidAmount: f.Amount, Currency: f.Currency, RefundID: f.RefundID,
		RefundStatus: f.RefundStatus, FailureReason: f.RefundReason})
}

// Sign implements payments.Sender: the Standard Webhooks headers.
func (s Sender) Sign(body []byte, eventID string, at time.Time) (http.Header, []byte, error) {
	if eventID == "" {
		return nil, nil, errors.New("a sandbox notification needs an event id")
	}
	h := stdwebhooks.Headers(s.key, eventID, at, body)
	h.Set("Content-Type", "application/json")
	return h, body, nil
}

// Credential is what the sandbox gateway's status API takes as the
// basic-auth user from the merchant: the webhook secret, as a real
// gateway takes its secret key.
func (s Sender) Credential() string { return stdwebhooks.EncodeSecret(s.key) }

// Authorizes reports whether r carries the secret as its basic-auth user.
func (s Sender) Authorizes(r *http.Request) bool {
	user, _, ok := r.BasicAuth()
	return ok && len(s.key) > 0 && subtle.ConstantTimeCompare([]byte(user), []byte(s.Credential())) == 1
}
