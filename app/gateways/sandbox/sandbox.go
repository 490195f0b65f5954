// Package sandbox is the built-in gateway's side of Sekali: the
// notifications of web/sandboxgw, the pretend payment page that `make
// run` turns on. It is the seeds' own format, for development, QA and
// the tests; a production deployment leaves it off.
//
//   - Authentication: Standard Webhooks (webhook-id, webhook-timestamp,
//     webhook-signature: HMAC-SHA256), with every key of
//     SANDBOX_WEBHOOK_SECRET, so secrets can be rotated without a gap.
//   - Key: the webhook-id header, the event id.
//   - Status: payment_status is the event itself: paid, declined (this
//     attempt failed; the customer may try again), failed (the gateway
//     ended the payment), expired, pending, refunded, disputed,
//     dispute_won, dispute_lost.
//   - Amount: paid_amount, a whole number of the currency's minor units;
//     for a refund, the refund's amount (above 0), and refund_id names the
//     refund (else the event id does): two refunds of one charge are two
//     refunds, one refund told twice is one.
package sandbox

import (
	"net/http"
	"time"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// Name is the sandbox's path segment: POST /callbacks/sandbox.
const Name = "sandbox"

// Schedule is when the janitor asks the sandbox gateway again about a
// call whose outcome is unknown (gatewaycalls.Schedule): a minute after
// the call, then 5m and every 30m. The sandbox gateway is the Sekali
// process itself: it answers at once and keeps no refund pending, so an
// unknown is a process that died mid-call, settled at the first ask; a
// development machine's audit says so within the hour if not.
var Schedule = gatewaycalls.Schedule{5 * time.Minute, 30 * time.Minute}

// Provider receives the sandbox gateway's notifications. Its body is
//
//	{"order_id": "...", "transaction_id": "...", "payment_status": "paid",
//	 "paid_amount": 150000, "currency": "IDR"}
type Provider struct {
	keys [][]byte
}

// NewProvider returns the sandbox provider; every key in keys is
// accepted, so secrets can be rotated without a gap.
func NewProvider(keys [][]byte) *Provider { return &Provider{keys: keys} }

// Name implements payments.Provider.
func (*Provider) Name() string { return Name }

// EventHeaders implements payments.Provider: the event id comes in
// webhook-id.
func (*Provider) EventHeaders() []string { return eventHeaders }

var eventHeaders = []string{stdwebhooks.HeaderID}

// Verify implements payments.Provider.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) error {
	return stdwebhooks.Verify(p.keys, h, body, now)
}

// Body is the sandbox body, for clients that send one.
type Body struct {
	OrderID       string              `json:"order_id"`
	TransactionID string              `json:"transaction_id"`
	PaymentStatus models.PaymentEvent `json:"payment_status"`
	PaidAmount    int64               `json:"paid_amount"`
	Currency      string              `json:"currency"`
	RefundID      string              `json:"refund_id,omitempty"`
	// RefundStatus is a refund's state at the gateway (pending,
	// succeeded, failed, canceled; absent: succeeded), FailureReason a
	// failed one's reason: QA's way to tell a refund that fails after it
	// was accepted.
	RefundStatus  models.RefundStatus `json:"refund_status,omitempty"`
	FailureReason string              `json:"failure_reason,omitempty"`
}

// Parse implements payments.Provider. Every field is required and must
// have its type; paid_amount is an integer ≥ 0 (it may be 0 for events
// other than paid and refunded).
func (*Provider) Parse(h http.Header, body []byte) (payments.Event, error) {
	return parse(h.Get(stdwebhooks.HeaderID), body)
}

func parse(eventID string, body []byte) (payments.Event, error) {
	v, err := canonjson.Decode(body)
	if err != nil {
		return payments.Event{}, models.Errorf(models.EInvalidPayload, "the body is refused: %s", canonjson.Reason(err))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return payments.Event{}, models.Errorf(models.EMissingField, "the body must be a JSON object")
	}
	ev := payments.Event{Key: eventID}
	if ev.Key == "" || len(ev.Key) > payments.MaxFieldLength || !models.CleanText(ev.Key) {
		return payments.Event{}, models.Errorf(models.EMissingField, "webhook-id must be 1 to %d characters of text without NUL", payments.MaxFieldLength)
	}
	f := payments.Fields{Object: obj}
	ev.OrderID = f.String("order_id")
	ev.TransactionID = f.String("transaction_id")
	ev.Status = models.PaymentEvent(f.String("payment_status"))
	ev.Amount = f.MinorUnits("paid_amount")
	ev.Currency = f.String("currency")
	refundID := f.OptionalString("refund_id")
	refundStatus := models.RefundStatus(f.OptionalString("refund_status"))
	reason := f.OptionalString("failure_reason")
	if f.Err == nil && !ev.Status.Valid() {
		f.Fail("payment_status must be one of paid, declined, failed, expired, pending, refunded, disputed, dispute_won, dispute_lost")
	}
	if f.Err == nil {
		f.Currency("currency", ev.Currency)
	}
	if ev.Status == models.EventRefunded && f.Err == nil {
		if ev.Amount == 0 {
			f.Fail("paid_amount of a refund is its amount, above 0")
		}
		if refundID == "" {
			refundID = ev.Key
		}
		if refundStatus == "" {
			refundStatus = models.RefundSucceeded
		}
		if !refundStatus.Valid() {
			f.Fail("refund_status must be one of pending, succeeded, failed, canceled")
		}
		ev.Refunds = []payments.Refund{{Key: refundID, Amount: ev.Amount, Status: refundStatus, Reason: reason}}
	}
	return ev, f.Err
}
