package payments

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// XenditName is Xendit's path segment: POST /callbacks/xendit.
const XenditName = "xendit"

// XenditTokenHeader carries Xendit's callback verification token.
const XenditTokenHeader = "X-Callback-Token"

// Xendit receives Xendit's invoice callbacks.
//
//   - Authentication: the x-callback-token header is the account's callback
//     verification token, compared in constant time. (It is a static
//     secret, not a signature of the body: anyone who has it can forge a
//     callback, so keep it as secret as a password.)
//   - Key: the webhook-id header when Xendit sends one, else the invoice id
//     and its status (id:status): PAID then SETTLED are two facts.
//   - Status: PAID and SETTLED → paid (the second is stale); EXPIRED →
//     expired; PENDING → pending. Anything else is ignored.
//   - Amount: paid_amount, a JSON number in the currency's major unit.
//
// The body is the invoice callback of github.com/xendit/xendit-node
// docs/Invoice.md (InvoiceCallback): id, external_id (the order id),
// status, paid_amount, currency.
type Xendit struct {
	token string
}

// NewXendit returns the adapter for the callback verification token
// (XENDIT_CALLBACK_TOKEN).
func NewXendit(token string) (*Xendit, error) {
	if len(token) < 16 {
		return nil, errors.New("a Xendit callback verification token is at least 16 characters")
	}
	return &Xendit{token: token}, nil
}

// Name implements Provider.
func (*Xendit) Name() string { return XenditName }

// EventHeaders implements Provider: the key is the webhook-id header
// when Xendit sends one.
func (*Xendit) EventHeaders() []string { return xenditEventHeaders }

var xenditEventHeaders = []string{stdwebhooks.HeaderID}

// Verify implements Provider: the token header.
func (x *Xendit) Verify(h http.Header, _ []byte, _ time.Time) error {
	got := h.Values(XenditTokenHeader)
	if len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), []byte(x.token)) != 1 {
		return errors.New("x-callback-token is missing or wrong")
	}
	return nil
}

// XenditInvoice is the part of an invoice callback Sekali reads.
type XenditInvoice struct {
	ID         string      `json:"id"`
	ExternalID string      `json:"external_id"`
	Status     string      `json:"status"`
	Amount     json.Number `json:"amount,omitempty"`
	PaidAmount json.Number `json:"paid_amount,omitempty"`
	Currency   string      `json:"currency"`
}

// Parse implements Provider.
func (x *Xendit) Parse(h http.Header, body []byte) (Event, error) {
	var inv XenditInvoice
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&inv); err != nil {
		return Event{}, models.Errorf(models.EMissingField, "the invoice callback's fields have the wrong type: %v", err)
	}
	var status models.PaymentEvent
	switch inv.Status {
	case "PAID", "SETTLED":
		status = models.EventPaid
	case "EXPIRED":
		status = models.EventExpired
	case "PENDING":
		status = models.EventPending
	default:
		return Event{}, fmt.Errorf("%w: invoice status %q", ErrIgnored, inv.Status)
	}
	key := h.Get(stdwebhooks.HeaderID)
	if key == "" {
		key = inv.ID + ":" + inv.Status
	}
	ev := Event{Key: key, OrderID: inv.ExternalID, TransactionID: inv.ID, Status: status, Currency: inv.Currency}
	f := fields{}
	f.text("webhook-id or id", key)
	f.text("external_id", inv.ExternalID)
	f.text("id", inv.ID)
	if !models.ValidCurrency(inv.Currency) {
		f.fail("currency must be an ISO 4217 code such as IDR")
	}
	if status == models.EventPaid {
		amount, ok := minorFromDecimal(string(inv.PaidAmount), inv.Currency)
		if !ok {
			f.fail("paid_amount %q is not an amount of %s", inv.PaidAmount, inv.Currency)
		}
		ev.Amount = amount
	}
	return ev, f.err
}
