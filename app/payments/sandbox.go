package payments

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// SandboxName is the built-in provider's name: POST /callbacks/sandbox.
const SandboxName = "sandbox"

// maxFieldLength bounds the strings of an event that are stored.
const maxFieldLength = 255

// Sandbox is the built-in provider. Deliveries are signed per Standard
// Webhooks; the webhook-id header is the event id and idempotency key. Its
// body is
//
//	{"order_id": "...", "transaction_id": "...", "payment_status": "paid",
//	 "paid_amount": 150000, "currency": "IDR"}
type Sandbox struct {
	keys [][]byte
}

// NewSandbox returns the sandbox provider; every key in keys is accepted,
// so secrets can be rotated without a gap.
func NewSandbox(keys [][]byte) *Sandbox { return &Sandbox{keys: keys} }

// Name implements Provider.
func (*Sandbox) Name() string { return SandboxName }

// EventHeaders implements Provider: the event id comes in webhook-id.
func (*Sandbox) EventHeaders() []string { return sandboxEventHeaders }

var sandboxEventHeaders = []string{stdwebhooks.HeaderID}

// Verify implements Provider.
func (s *Sandbox) Verify(h http.Header, body []byte, now time.Time) error {
	return stdwebhooks.Verify(s.keys, h, body, now)
}

// SandboxEvent is the sandbox body, for clients that send one.
type SandboxEvent struct {
	OrderID       string              `json:"order_id"`
	TransactionID string              `json:"transaction_id"`
	PaymentStatus models.PaymentEvent `json:"payment_status"`
	PaidAmount    int64               `json:"paid_amount"`
	Currency      string              `json:"currency"`
}

// Parse implements Provider. Every field is required and must have its
// type; paid_amount is an integer ≥ 0 (it may be 0 for events other than
// paid).
func (*Sandbox) Parse(h http.Header, body []byte) (Event, error) {
	v, err := canonjson.Decode(body)
	if err != nil {
		return Event{}, models.Errorf(models.EInvalidPayload, "the body is refused: %s", canonjson.Reason(err))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Event{}, models.Errorf(models.EMissingField, "the body must be a JSON object")
	}
	ev := Event{Key: h.Get(stdwebhooks.HeaderID)}
	if len(ev.Key) > maxFieldLength || !models.CleanText(ev.Key) {
		return Event{}, models.Errorf(models.EMissingField, "webhook-id must be at most %d characters of text without NUL", maxFieldLength)
	}
	f := fields{obj: obj}
	ev.OrderID = f.str("order_id")
	ev.TransactionID = f.str("transaction_id")
	ev.Status = models.PaymentEvent(f.str("payment_status"))
	ev.Amount = f.amount("paid_amount")
	ev.Currency = f.str("currency")
	if f.err == nil && !ev.Status.Valid() {
		f.fail("payment_status must be one of paid, failed, expired, pending, refunded")
	}
	if f.err == nil && !models.ValidCurrency(ev.Currency) {
		f.fail("currency must be an ISO 4217 code such as IDR")
	}
	return ev, f.err
}

// fields reads required fields and keeps the first problem.
type fields struct {
	obj map[string]any
	err error
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = models.Errorf(models.EMissingField, format, args...)
	}
}

func (f *fields) str(name string) string {
	s, ok := f.obj[name].(string)
	if !ok {
		f.fail("%s is missing or not a string", name)
		return s
	}
	f.text(name, s)
	return s
}

// text checks a string field that has been read: 1 to maxFieldLength
// characters of text PostgreSQL can store.
func (f *fields) text(name, s string) {
	switch {
	case s == "" || len(s) > maxFieldLength:
		f.fail("%s must be 1 to %d characters", name, maxFieldLength)
	case !models.CleanText(s):
		f.fail("%s must be text without NUL", name)
	}
}

func (f *fields) amount(name string) int64 {
	n, ok := f.obj[name].(json.Number)
	if !ok {
		f.fail("%s is missing or not a number", name)
		return 0
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v < 0 || v > models.MaxTotal {
		f.fail("%s must be a whole number of minor units, 0 to %d", name, int64(models.MaxTotal))
	}
	return v
}
