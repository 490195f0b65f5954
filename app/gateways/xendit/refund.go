package xendit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/payments"
)

// Refunder refunds paid Xendit invoices (gatewaycalls.Refunder) with
// Xendit's Refunds API (docs.xendit.co/apidocs/refund-payment-request;
// xendit-go's refund package): POST /refunds with the secret key as the
// basic-auth user, the request's Key as the Idempotency-key header and
// as reference_id, {invoice_id: the invoice (RefundRequest.Charge),
// amount: a JSON number in the currency's major unit, currency, reason:
// REQUESTED_BY_CUSTOMER, metadata: order_id and Sekali's reason, cut to
// Xendit's 500 characters}. The answer is Refunded{ObjectID and
// RefundKey: the refund's id (rfd-…), Amount and Currency: the refund's
// amount and currency, as it states them}.
//
// Xendit answers a create with the refund, PENDING until the channel
// has refunded (its refund.succeeded or refund.failed callback follows,
// which the Xendit provider reads). PENDING counts as accepted —
// Refunded with Pending — as SUCCEEDED does; FAILED or CANCELLED in the
// answer is *gatewaycalls.Refused. A refund.failed after a PENDING answer
// gives the amount back to the charge.
//
// Xendit does not replay an answer: the same Idempotency-key again is
// 409 DUPLICATE_ERROR ("duplicate value on idempotency_key"). So on
// that 409 the refunder looks the refund up — GET /refunds?invoice_id=
// (Xendit's list filters by invoice, not by reference_id) — and answers
// with the one whose reference_id is the Key. A repeat (Attempt > 1)
// looks first, before it creates: Xendit does not say how long it keeps
// a key. A 409 whose refund is not listed (yet) is a plain error: the
// call is repeated later.
//
// Other answers: 400 REFUND_IN_PROGRESS (another refund of the payment
// still running) is a plain error, as a repeat may get past it; any
// other 4xx that gatewaycalls.RefusedStatus calls definite (400
// API_VALIDATION_ERROR, MAXIMUM_REFUND_AMOUNT_REACHED, …) →
// *gatewaycalls.Refused; 401, 403, 404 DATA_NOT_FOUND, 429, a 5xx, an
// answer that is not a refund, no answer, or the context's end → a plain
// error: unknown whether Xendit refunded. A request that cannot be sent
// as it is (no key, no invoice, no amount) is refused before it is sent:
// *gatewaycalls.Refused with Status 0.
type Refunder struct {
	BaseURL   string // https://api.xendit.co, or the sandbox gateway's emulation, or a test server
	secretKey string
	Client    *http.Client
}

// NewRefunder returns the refunder for a secret API key ("xnd_…", with
// write access to refunds); apiURL is Xendit's (DefaultAPIURL) when
// empty, and may have a path.
func NewRefunder(secretKey, apiURL string) (*Refunder, error) {
	if err := CheckSecretKey(secretKey); err != nil {
		return nil, err
	}
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	return &Refunder{BaseURL: strings.TrimSuffix(apiURL, "/"), secretKey: secretKey,
		Client: httpjson.NewClient(httpjson.DefaultTimeout)}, nil
}

// Provider implements gatewaycalls.Refunder.
func (*Refunder) Provider() string { return Name }

// IdempotencyHeader carries a Xendit request's idempotency key.
const IdempotencyHeader = "Idempotency-key"

// MaxMetadataValue is how long a metadata value Xendit takes, in
// characters.
const MaxMetadataValue = 500

// refundRequest is Xendit's create-refund request.
type refundRequest struct {
	InvoiceID   string            `json:"invoice_id"`
	ReferenceID string            `json:"reference_id"`
	Amount      json.Number       `json:"amount"`
	Currency    string            `json:"currency"`
	Reason      string            `json:"reason"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// refundAnswer is the part of Xendit's refund the refunder reads, and
// its error.
type refundAnswer struct {
	ID          string      `json:"id"`
	InvoiceID   string      `json:"invoice_id"`
	ReferenceID string      `json:"reference_id"`
	Amount      json.Number `json:"amount"`
	Currency    string      `json:"currency"`
	Status      string      `json:"status"`
	FailureCode string      `json:"failure_code"`
	ErrorCode   string      `json:"error_code"`
	Message     string      `json:"message"`
}

// Refund implements gatewaycalls.Refunder.
func (f *Refunder) Refund(ctx context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.Refunded, error) {
	if r.Key == "" || r.Charge == "" || r.Amount < 1 {
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Message: "xendit refund: no reference_id (key), no invoice or no amount"}
	}
	currency := strings.ToUpper(r.Currency)
	if r.Attempt > 1 {
		if a, found, err := f.existing(ctx, r); err != nil || found {
			return a, err
		}
	}
	reason := r.Reason
	if utf8.RuneCountInString(reason) > MaxMetadataValue {
		reason = string([]rune(reason)[:MaxMetadataValue])
	}
	body, err := json.Marshal(refundRequest{
		InvoiceID: r.Charge, ReferenceID: r.Key, Amount: json.Number(payments.MajorText(r.Amount, currency, 0)),
		Currency: currency, Reason: "REQUESTED_BY_CUSTOMER", Metadata: map[string]string{"order_id": r.OrderID, "reason": reason},
	})
	if err != nil {
		return gatewaycalls.Refunded{}, err
	}
	header := http.Header{}
	header.Set(IdempotencyHeader, r.Key)
	code, answer, err := httpjson.PostWith(ctx, f.Client, f.BaseURL+"/refunds", f.secretKey, header, body)
	if err != nil {
		return gatewaycalls.Refunded{}, fmt.Errorf("xendit refund: %w", err)
	}
	var a refundAnswer
	decodeErr := json.Unmarshal(answer, &a)
	switch {
	case (code == http.StatusOK || code == http.StatusCreated) && decodeErr == nil && a.ID != "":
		return refunded(code, a, r)
	case code == http.StatusConflict && a.ErrorCode == "DUPLICATE_ERROR": // the key was used: by an earlier attempt
		found, ok, err := f.existing(ctx, r)
		switch {
		case err != nil:
			return gatewaycalls.Refunded{}, err
		case !ok:
			return gatewaycalls.Refunded{}, fmt.Errorf("xendit refund: %s: no refund of invoice %s has reference_id %s yet",
				errorText(code, a), r.Charge, r.Key)
		}
		return found, nil
	case a.ErrorCode == "REFUND_IN_PROGRESS":
	case gatewaycalls.RefusedStatus(code):
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Status: code, Message: errorText(code, a)}
	}
	return gatewaycalls.Refunded{}, fmt.Errorf("xendit refund: HTTP %d %.200s", code, answer)
}

// existing is the refund of r's invoice whose reference_id is r's key,
// if Xendit lists one.
func (f *Refunder) existing(ctx context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.Refunded, bool, error) {
	a, code, found, err := f.find(ctx, r)
	if err != nil || !found {
		return gatewaycalls.Refunded{}, false, err
	}
	done, err := refunded(code, a, r)
	return done, true, err
}

// LookUpRefund implements gatewaycalls.RefundLooker: the refund of the
// request's invoice whose reference_id is its key (GET
// /refunds?invoice_id=), in its state now.
func (f *Refunder) LookUpRefund(ctx context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.RefundState, bool, error) {
	a, _, found, err := f.find(ctx, r)
	if err != nil || !found {
		return gatewaycalls.RefundState{}, false, err
	}
	state, ok := refundStates[a.Status]
	amount, err := payments.ParseAmount(string(a.Amount), strings.ToUpper(r.Currency))
	if !ok || err != nil || amount < 1 {
		return gatewaycalls.RefundState{}, false, fmt.Errorf("xendit refund %s: status %q, amount %s", a.ID, a.Status, payments.QuoteAmount(string(a.Amount)))
	}
	return gatewaycalls.RefundState{Refunded: gatewaycalls.Refunded{ObjectID: a.ID, RefundKey: a.ID, Amount: amount},
		Status: state, Reason: a.FailureCode}, true, nil
}

// find is the refund of r's invoice whose reference_id is r's key, and
// the status of the answer that listed it, if Xendit lists one: every
// page, 100 a page, newest first.
func (f *Refunder) find(ctx context.Context, r gatewaycalls.RefundRequest) (refundAnswer, int, bool, error) {
	after := ""
	for {
		q := url.Values{"invoice_id": {r.Charge}, "limit": {"100"}}
		if after != "" {
			q.Set("after_id", after)
		}
		code, answer, err := httpjson.Get(ctx, f.Client, f.BaseURL+"/refunds?"+q.Encode(), f.secretKey)
		if err != nil {
			return refundAnswer{}, 0, false, fmt.Errorf("xendit refund lookup: %w", err)
		}
		var list struct {
			Data    []refundAnswer `json:"data"`
			HasMore bool           `json:"has_more"`
		}
		decodeErr := json.Unmarshal(answer, &list)
		switch {
		case code == http.StatusOK && decodeErr == nil:
		case code == http.StatusNotFound: // none of the invoice: Xendit may answer so
			return refundAnswer{}, code, false, nil
		case gatewaycalls.RefusedStatus(code):
			var e refundAnswer
			json.Unmarshal(answer, &e)
			return refundAnswer{}, code, false, &gatewaycalls.Refused{Status: code, Message: errorText(code, e)}
		default:
			return refundAnswer{}, code, false, fmt.Errorf("xendit refund lookup: HTTP %d %.200s", code, answer)
		}
		for _, a := range list.Data {
			if a.ReferenceID == r.Key && a.ID != "" {
				return a, code, true, nil
			}
		}
		if !list.HasMore || len(list.Data) == 0 {
			return refundAnswer{}, code, false, nil
		}
		after = list.Data[len(list.Data)-1].ID
	}
}

// refunded is the answer a Xendit refund gives.
func refunded(code int, a refundAnswer, r gatewaycalls.RefundRequest) (gatewaycalls.Refunded, error) {
	switch a.Status {
	case "PENDING", "SUCCEEDED":
	case "FAILED", "CANCELLED":
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Status: code,
			Message: strings.TrimSuffix(fmt.Sprintf("xendit refund %s is %s: %s", a.ID, a.Status, a.FailureCode), ": ")}
	default:
		return gatewaycalls.Refunded{}, fmt.Errorf("xendit refund %s: status %q", a.ID, a.Status)
	}
	// What the refund states is answered as it is — the caller does not
	// apply a refund of another amount or currency than asked — but for
	// an amount that is not one of its currency: an answer Sekali cannot
	// read, asked again. A refund that states no amount (Xendit's always
	// does) is taken for the amount asked.
	currency := strings.ToUpper(a.Currency)
	done := gatewaycalls.Refunded{ObjectID: a.ID, RefundKey: a.ID, Amount: r.Amount, Currency: currency, Pending: a.Status == "PENDING"}
	if a.Amount != "" {
		amount, err := payments.ParseAmount(string(a.Amount), cmp.Or(currency, strings.ToUpper(r.Currency)))
		if err != nil {
			return gatewaycalls.Refunded{}, errors.New("xendit refund " + a.ID + ": its amount " + payments.QuoteAmount(string(a.Amount)) + " is not one of " + cmp.Or(currency, r.Currency))
		}
		done.Amount = amount
	}
	return done, nil
}

// errorText is Xendit's error, or the status's text.
func errorText(code int, a refundAnswer) string {
	msg := strings.TrimPrefix(strings.TrimSuffix(a.ErrorCode+": "+a.Message, ": "), ": ")
	if msg == "" {
		msg = http.StatusText(code)
	}
	return msg
}
