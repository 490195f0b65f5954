// Package midtrans is Midtrans's side of Sekali: its HTTP notifications
// (Snap and Core API), its status API, Snap's API that opens a payment
// page (page.go), and a sender of its notifications for the tests and the
// sandbox page.
//
//   - Authentication: the body's signature_key is the hex SHA-512 of
//     order_id + status_code + gross_amount + the server key, compared in
//     constant time (docs.midtrans.com/reference/handle-async-payment).
//     The signature covers those three fields only, so whoever holds one
//     genuine notification can change its status, transaction, currency
//     and amount of the other fields. Every notification but a pending one
//     is therefore confirmed with the status API (Confirm, Midtrans's
//     "Challenge Response"): the pipeline applies what the API says.
//   - Key: Midtrans sends no event id, so the key is derived from what
//     makes a notification one fact: transaction_id:transaction_status,
//     plus :fraud_status when there is one. The same status delivered
//     again is a duplicate; capture then settlement are two facts.
//   - Status: capture with fraud_status accept, and settlement → paid (the
//     second of the two is stale: the same charge is already paid);
//     capture with challenge, pending, authorize → pending; deny, failure,
//     capture with fraud_status deny → declined (one attempt failed: a
//     Snap order may be retried with another attempt until it is paid or
//     expires); cancel → failed; expire → expired; refund, partial_refund
//     → refunded; chargeback, partial_chargeback → dispute_lost (the bank
//     took the money back: refunds of the charge are refused from then
//     on). Anything else is ignored.
//   - Amount: gross_amount is a decimal text in the currency's major unit
//     ("150000.00"), read by payments.ParseAmount, as are refund_amount and
//     each refunds[].refund_amount; a refund notification names at most
//     payments.MaxRefunds refunds.
package midtrans

import (
	"bytes"
	"context"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Name is Midtrans's path segment: POST /callbacks/midtrans.
const Name = "midtrans"

// Schedule is when the janitor asks Midtrans again about a call whose
// outcome is unknown (gatewaycalls.Schedule): a minute after the call,
// then 5m, 30m, 2h, 12h and daily. Midtrans answers a refund when it is
// made — never pending — so its unknowns are refunds whose answer was
// lost, sent again with their refund_key (a 406 "Duplicate refund ID"
// is checked with the status API), and Snap pages, which no API returns
// again: those the janitor cannot ask about, and leaves to the
// customer's next Pay (a new key) or the order's end. Midtrans retries
// a notification only a few times, within the day, so a day and a half
// of asks is its schedule's end.
var Schedule = gatewaycalls.Schedule{5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// Provider receives Midtrans's HTTP notifications.
type Provider struct {
	serverKey string
	api       *StatusClient // confirms what a notification says
}

// CheckServerKey checks the form of a server key (MIDTRANS_SERVER_KEY:
// "Mid-server-…" in production, "SB-Mid-server-…" in the sandbox).
func CheckServerKey(serverKey string) error {
	if !strings.HasPrefix(serverKey, "Mid-server-") && !strings.HasPrefix(serverKey, "SB-Mid-server-") {
		return errors.New(`a Midtrans server key starts with "Mid-server-" or "SB-Mid-server-"`)
	}
	return nil
}

// NewProvider returns the adapter for the server key, which confirms
// notifications with the status API at apiURL (APIURL(serverKey) when
// empty).
func NewProvider(serverKey, apiURL string) (*Provider, error) {
	api, err := NewStatusClient(serverKey, apiURL)
	if err != nil {
		return nil, err
	}
	return &Provider{serverKey: serverKey, api: api}, nil
}

// Confirm implements payments.Confirmer: what Midtrans's status API says
// of the notification's transaction.
func (p *Provider) Confirm(ctx context.Context, ev payments.Event) (payments.Event, bool, error) {
	return p.api.Transaction(ctx, ev.TransactionID)
}

// Name implements payments.Provider.
func (*Provider) Name() string { return Name }

// EventHeaders implements payments.Provider: Parse reads the body alone.
func (*Provider) EventHeaders() []string { return nil }

// Notification is the part of a notification Sekali reads.
type Notification struct {
	OrderID           string `json:"order_id"`
	TransactionID     string `json:"transaction_id"`
	TransactionStatus string `json:"transaction_status"`
	FraudStatus       string `json:"fraud_status,omitempty"`
	StatusCode        string `json:"status_code"`
	GrossAmount       string `json:"gross_amount"`
	Currency          string `json:"currency"`
	SignatureKey      string `json:"signature_key"`
	PaymentType       string `json:"payment_type,omitempty"`
	// For refund and partial_refund: the cumulative refund_amount and
	// each refund (docs.midtrans.com/reference/get-transaction-status).
	RefundAmount string           `json:"refund_amount,omitempty"`
	Refunds      []NotifiedRefund `json:"refunds,omitempty"`
}

// NotifiedRefund is one element of a notification's refunds.
type NotifiedRefund struct {
	// RefundChargebackID can be above 2⁵³ ("202502070943231234" in a
	// GoPay sample): kept as the digits written, never as a float.
	RefundChargebackID json.Number `json:"refund_chargeback_id,omitempty"`
	RefundAmount       string      `json:"refund_amount"`
	RefundKey          string      `json:"refund_key,omitempty"`
	BankConfirmedAt    string      `json:"bank_confirmed_at,omitempty"`
}

// signed is what the signature covers, and the signature.
type signed struct {
	OrderID      string `json:"order_id"`
	StatusCode   string `json:"status_code"`
	GrossAmount  string `json:"gross_amount"`
	SignatureKey string `json:"signature_key"`
}

// Signature is the signature_key Midtrans computes for n.
func Signature(n Notification, serverKey string) string {
	sum := sha512.Sum512([]byte(n.OrderID + n.StatusCode + n.GrossAmount + serverKey))
	return hex.EncodeToString(sum[:])
}

// Verify implements payments.Provider: the signature in the body.
func (p *Provider) Verify(_ http.Header, body []byte, _ time.Time) error {
	var n signed
	if err := json.Unmarshal(body, &n); err != nil || n.SignatureKey == "" {
		return errors.New("no signature_key in the body")
	}
	want := Signature(Notification{OrderID: n.OrderID, StatusCode: n.StatusCode, GrossAmount: n.GrossAmount}, p.serverKey)
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(n.SignatureKey)), []byte(want)) != 1 {
		return errors.New("signature_key does not match")
	}
	return nil
}

// eventOf maps transaction_status (and fraud_status) to an event.
func eventOf(status, fraud string) (models.PaymentEvent, bool) {
	switch status {
	case "capture":
		switch fraud {
		case "", "accept":
			return models.EventPaid, true
		case "challenge":
			return models.EventPending, true
		case "deny":
			return models.EventDeclined, true
		}
	case "settlement":
		return models.EventPaid, true
	case "pending", "authorize":
		return models.EventPending, true
	case "deny", "failure":
		return models.EventDeclined, true
	case "cancel":
		return models.EventFailed, true
	case "expire":
		return models.EventExpired, true
	case "refund", "partial_refund":
		return models.EventRefunded, true
	case "chargeback", "partial_chargeback":
		return models.EventDisputeLost, true
	}
	return "", false
}

// Parse implements payments.Provider.
func (*Provider) Parse(_ http.Header, body []byte) (payments.Event, error) {
	return parse(body)
}

// parse reads a notification, or a status answer: the status API answers
// with the notification's fields.
func parse(body []byte) (payments.Event, error) {
	var in struct {
		Notification
		Refunds boundedRefunds `json:"refunds"` // read instead of Notification.Refunds
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return payments.Event{}, models.Errorf(models.EMissingField, "the notification's fields must be strings: %v", err)
	}
	n := in.Notification
	n.Refunds = in.Refunds.list
	// Midtrans has written statuses in capitals (a DANA and ShopeePay
	// sample of its status API says "PENDING").
	n.TransactionStatus, n.FraudStatus = strings.ToLower(n.TransactionStatus), strings.ToLower(n.FraudStatus)
	status, ok := eventOf(n.TransactionStatus, n.FraudStatus)
	if !ok {
		return payments.Event{}, fmt.Errorf("%w: transaction_status %q", payments.ErrIgnored, n.TransactionStatus)
	}
	if n.Currency == "" {
		n.Currency = "IDR" // Midtrans settles in rupiah; older notifications omit the field
	}
	key := n.TransactionID + ":" + n.TransactionStatus
	if n.FraudStatus != "" {
		key += ":" + n.FraudStatus
	}
	// A Snap order_id that replaced a spent one (gatewaycalls.Pages) is the
	// order id, a "~" and the attempt.
	ev := payments.Event{Key: key, OrderID: gatewaycalls.OrderOfKey(n.OrderID), TransactionID: n.TransactionID, Status: status, Currency: n.Currency}
	f := payments.Fields{}
	f.Text("order_id", n.OrderID)
	f.Text("transaction_id", n.TransactionID)
	switch n.FraudStatus { // part of the key, and not covered by the signature: only Midtrans's values
	case "", "accept", "challenge", "deny":
	default:
		f.Fail("fraud_status must be accept, challenge or deny")
	}
	f.Currency("currency", n.Currency)
	ev.Amount = f.Amount("gross_amount", n.GrossAmount, n.Currency)
	switch {
	case f.Err != nil:
	case (status == models.EventRefunded || status == models.EventDisputeLost) && in.Refunds.count > payments.MaxRefunds:
		f.Fail("refunds has %d elements, at most %d are read", in.Refunds.count, payments.MaxRefunds)
	case status == models.EventRefunded:
		readRefunds(&ev, n, &f)
	case status == models.EventDisputeLost:
		readChargeback(&ev, n, &f)
	}
	return ev, f.Err
}

// readChargeback reads a chargeback notification: the bank took money
// back, a dispute the shop lost. What it took is refund_amount when
// Midtrans states it, else what its refunds list adds up to, else (a
// chargeback of the whole transaction) the gross amount; a
// partial_chargeback must say how much. Its key grows by that amount, so
// a partial chargeback and the whole one that follows are two facts.
func readChargeback(ev *payments.Event, n Notification, f *payments.Fields) {
	var sum int64
	for i, r := range n.Refunds {
		sum += f.Amount(fmt.Sprintf("refunds[%d].refund_amount", i), r.RefundAmount, n.Currency)
		if f.Err != nil {
			return
		}
	}
	readTotal(ev, n, sum, f)
}

// readTotal reads what a refund or chargeback notification says was
// taken, into the event's amount and key: refund_amount, at least sum
// (what its refunds list adds up to), when Midtrans states it; else sum
// when it lists any; else, for a notification of the whole transaction,
// the gross amount — a partial one must say how much.
func readTotal(ev *payments.Event, n Notification, sum int64, f *payments.Fields) {
	switch {
	case n.RefundAmount != "":
		total := f.Amount("refund_amount", n.RefundAmount, n.Currency)
		if f.Err == nil && total < sum {
			f.Fail("refund_amount %s is less than its refunds add up to", n.RefundAmount)
		}
		ev.Amount = total
	case len(n.Refunds) > 0:
		ev.Amount = sum
	case strings.HasPrefix(n.TransactionStatus, "partial_"):
		f.Fail("a %s notification needs refund_amount or refunds", n.TransactionStatus)
	}
	ev.Key += ":" + payments.MajorText(ev.Amount, n.Currency, 2)
}

// boundedRefunds decodes a notification's refunds — which its signature
// does not cover — only when there are at most payments.MaxRefunds; more
// it counts, without decoding any: a 64 KiB body holds over a thousand,
// and decoding them only to refuse them doubled the cost of its Parse.
type boundedRefunds struct {
	list  []NotifiedRefund
	count int
}

func (r *boundedRefunds) UnmarshalJSON(data []byte) error {
	if r.count = countElements(data); r.count > payments.MaxRefunds {
		return nil
	}
	return json.Unmarshal(data, &r.list)
}

// countElements counts the elements of data when it is an array, else
// is 0. data is one JSON value, valid and without surrounding space, as
// encoding/json gives an Unmarshaler.
func countElements(data []byte) int {
	if len(data) < 2 || data[0] != '[' || len(bytes.TrimSpace(data[1:len(data)-1])) == 0 {
		return 0
	}
	count, depth, inString := 1, 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++ // the escaped character cannot end the string
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 1:
			count++
		}
	}
	return count
}

// readRefunds reads a refund notification's refunds, keyed by their
// refund_key (the merchant's, or one Midtrans made up), else their
// refund_chargeback_id; the event's amount is refund_amount, the
// cumulative total. Its key grows by that total — two partial refunds of
// one transaction are two facts — and by whether the bank has confirmed
// every refund: Midtrans notifies each refund twice, without and then
// with bank_confirmed_at, and the second must not be a conflict of the
// first. A refund notification that says nothing of amounts (a full
// refund in an older format) refunds the gross amount.
func readRefunds(ev *payments.Event, n Notification, f *payments.Fields) {
	confirmed := len(n.Refunds) > 0
	var sum int64 // at most MaxRefunds × models.MaxTotal: no overflow
	for i, r := range n.Refunds {
		key := r.RefundKey
		if key == "" {
			key = "chargeback:" + r.RefundChargebackID.String()
		}
		f.Text(fmt.Sprintf("refunds[%d].refund_key or refund_chargeback_id", i), key)
		amount := f.Amount(fmt.Sprintf("refunds[%d].refund_amount", i), r.RefundAmount, n.Currency)
		if f.Err != nil {
			return // the first problem is the answer: read no further
		}
		if amount == 0 {
			f.Fail("refunds[%d].refund_amount must be above 0", i)
			return
		}
		ev.Refunds = append(ev.Refunds, payments.Refund{Key: key, Amount: amount, Status: models.RefundSucceeded})
		sum += amount
		confirmed = confirmed && r.BankConfirmedAt != ""
	}
	readTotal(ev, n, sum, f)
	if confirmed {
		ev.Key += ":bank_confirmed"
	}
}
