package midtrans

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/payments"
)

// Refunder refunds Midtrans transactions (gatewaycalls.Refunder) with the
// Core API's refund (docs.midtrans.com/reference/refund-transaction):
// POST {api}/v2/{transaction_id}/refund with the server key as the
// basic-auth user and {refund_key, amount, reason} — refund_key the
// request's Key, amount whole rupiah (Midtrans takes IDR only), reason
// cut to Midtrans's 255 characters. Midtrans's refund notification names
// the refund by that refund_key, so the answer does too: Refunded's
// ObjectID and RefundKey are the Key; its Amount and Currency are what
// the answer states (refund_amount, currency: answered).
//
// Midtrans answers with HTTP 200 and the outcome in the body's
// status_code, or with the status itself; the body's code is read first.
// "200" → Refunded. A refund_key is single-use, and Midtrans does not
// replay an answer: the same key again is "406 Duplicate refund ID"
// (Midtrans asks a merchant retrying a refund to send the same
// refund_key, and refuses a second refund so). A 406 is therefore
// checked with the status API (GET /v2/{transaction_id}/status), which
// lists the transaction's refunds by refund_key: the refund listed under
// the request's Key is done, for the amount listed. A Key not listed was
// taken by a call that did not refund (refused, its answer lost): on a
// repeat (Attempt > 1) that is a plain error — the refund stays open and
// is asked again, never counted — and on a first call (Attempt 1) the
// key was used by someone else: *gatewaycalls.Refused.
//
// Other answers: a 4xx that gatewaycalls.RefusedStatus calls definite (412
// the transaction cannot be refunded, 414 an amount above what is left,
// 400) → *gatewaycalls.Refused; 401, 404, 408, 409, 429, a 5xx, an answer
// that is not Midtrans's, no answer, or the context's end → a plain
// error: unknown whether Midtrans refunded. A request that cannot be
// sent as it is (no key, a key with characters Midtrans does not allow,
// no transaction, another currency than IDR) is refused before it is
// sent: *gatewaycalls.Refused with Status 0.
type Refunder struct {
	BaseURL   string // the Core API: https://api.midtrans.com, https://api.sandbox.midtrans.com, or a test server
	serverKey string
	Client    *http.Client
}

// NewRefunder returns the refunder for the server key; the Core API is
// APIURL(serverKey) unless apiURL says otherwise (MIDTRANS_API_URL, as
// the status client asks).
func NewRefunder(serverKey, apiURL string) (*Refunder, error) {
	if err := CheckServerKey(serverKey); err != nil {
		return nil, err
	}
	if apiURL == "" {
		apiURL = APIURL(serverKey)
	}
	return &Refunder{BaseURL: strings.TrimSuffix(apiURL, "/"), serverKey: serverKey,
		Client: httpjson.NewClient(httpjson.DefaultTimeout)}, nil
}

// Provider implements gatewaycalls.Refunder.
func (*Refunder) Provider() string { return Name }

// RefundKeyPattern is what Midtrans allows in a refund_key.
var RefundKeyPattern = regexp.MustCompile(`^[A-Za-z0-9\-_]+$`)

// maxReason is how long a reason Midtrans takes, in characters.
const maxReason = 255

// refundRequest is Midtrans's refund request.
type refundRequest struct {
	RefundKey string      `json:"refund_key"`
	Amount    json.Number `json:"amount"`
	Reason    string      `json:"reason,omitempty"`
}

// Refund implements gatewaycalls.Refunder.
func (f *Refunder) Refund(ctx context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.Refunded, error) {
	switch {
	case strings.ToUpper(r.Currency) != "IDR":
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Message: fmt.Sprintf("midtrans refund: Midtrans takes IDR, not %q", r.Currency)}
	case !RefundKeyPattern.MatchString(r.Key) || r.Charge == "" || r.Amount < 1:
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Message: fmt.Sprintf(
			"midtrans refund: refund_key %q (letters, digits, - and _), a transaction and a positive amount are required", r.Key)}
	}
	reason := r.Reason
	if utf8.RuneCountInString(reason) > maxReason {
		reason = string([]rune(reason)[:maxReason])
	}
	body, err := json.Marshal(refundRequest{RefundKey: r.Key, Amount: json.Number(payments.MajorText(r.Amount, "IDR", 0)), Reason: reason})
	if err != nil {
		return gatewaycalls.Refunded{}, err
	}
	code, answer, err := httpjson.Post(ctx, f.Client, f.BaseURL+"/v2/"+url.PathEscape(r.Charge)+"/refund", f.serverKey, body)
	if err != nil {
		return gatewaycalls.Refunded{}, fmt.Errorf("midtrans refund: %w", err)
	}
	var a struct {
		StatusCode    string `json:"status_code"`
		StatusMessage string `json:"status_message"`
		RefundKey     string `json:"refund_key"`
		RefundAmount  string `json:"refund_amount"`
		Currency      string `json:"currency"`
	}
	decodeErr := json.Unmarshal(answer, &a)
	status := code
	if n, err := strconv.Atoi(a.StatusCode); decodeErr == nil && err == nil && code == http.StatusOK {
		status = n // Midtrans's HTTP 200 with the outcome in the body
	}
	msg := a.StatusMessage
	if msg == "" {
		msg = http.StatusText(status)
	}
	switch {
	case status == http.StatusOK && decodeErr == nil && (a.RefundKey == "" || a.RefundKey == r.Key):
		return answered(r, a.RefundAmount, a.Currency)
	case status == http.StatusNotAcceptable && r.Attempt > 1: // the key was used: by an earlier attempt of this request?
		return f.listed(ctx, r, msg)
	case status == http.StatusNotAcceptable:
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Status: status,
			Message: msg + ": refund_key " + r.Key + " was used before this refund was first asked for"}
	case gatewaycalls.RefusedStatus(status):
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Status: status, Message: msg}
	}
	return gatewaycalls.Refunded{}, fmt.Errorf("midtrans refund: HTTP %d %.200s", code, answer)
}

// listed answers a 406 "Duplicate refund ID" on a repeat of r by what
// the status API lists of the transaction's refunds: the refund whose
// refund_key is r's key is done, for the amount listed. A key that is not
// listed was taken by a call that did not refund (refused, its answer
// lost) and is never counted: the refund stays open, with a plain error
// that says so, and is asked again.
func (f *Refunder) listed(ctx context.Context, r gatewaycalls.RefundRequest, msg string) (gatewaycalls.Refunded, error) {
	code, body, err := httpjson.Get(ctx, f.Client, f.BaseURL+"/v2/"+url.PathEscape(r.Charge)+"/status", f.serverKey)
	if err != nil {
		return gatewaycalls.Refunded{}, fmt.Errorf("midtrans refund: 406 %s for refund_key %s, and the status API could not be asked: %w", msg, r.Key, err)
	}
	if _, found, err := readStatus(code, body); err != nil || !found {
		return gatewaycalls.Refunded{}, fmt.Errorf("midtrans refund: 406 %s for refund_key %s, and the status API does not list the transaction (found %v, %v)",
			msg, r.Key, found, err)
	}
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return gatewaycalls.Refunded{}, fmt.Errorf("midtrans refund: the status API's refunds: %w", err)
	}
	for _, listed := range n.Refunds {
		if listed.RefundKey != r.Key {
			continue
		}
		if listed.RefundAmount == "" {
			return gatewaycalls.Refunded{}, fmt.Errorf("midtrans refund: the status API lists refund_key %s with no refund_amount", r.Key)
		}
		return answered(r, listed.RefundAmount, n.Currency)
	}
	return gatewaycalls.Refunded{}, fmt.Errorf("midtrans refund: 406 %s, and the status API lists no refund with refund_key %s: not counted; asked again later", msg, r.Key)
}

// answered is the refund of r as Midtrans's answer states it: its
// refund_amount (decimal rupiah) and currency. An answer without a
// refund_amount — Midtrans's documented answer has one — is taken for the
// amount asked; one without a currency states none (Refunded.Currency
// ""), and its amount is read in IDR, the currency Midtrans refunds in.
// An amount that is not one of its currency is an answer Sekali cannot
// read: a plain error, the refund asked again.
func answered(r gatewaycalls.RefundRequest, refundAmount, currency string) (gatewaycalls.Refunded, error) {
	a := gatewaycalls.Refunded{ObjectID: r.Key, RefundKey: r.Key, Amount: r.Amount, Currency: strings.ToUpper(currency)}
	if refundAmount == "" {
		return a, nil
	}
	amount, err := payments.ParseAmount(refundAmount, cmp.Or(a.Currency, "IDR"))
	if err != nil || amount < 1 {
		return gatewaycalls.Refunded{}, fmt.Errorf("midtrans refund: refund_key %s is answered with refund_amount %s of %s", r.Key,
			payments.QuoteAmount(refundAmount), cmp.Or(a.Currency, "IDR"))
	}
	a.Amount = amount
	return a, nil
}
