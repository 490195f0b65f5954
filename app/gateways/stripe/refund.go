package stripe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/sekali/sekali/app/gatewaycalls"
)

// Refunder refunds Stripe charges (gatewaycalls.Refunder) with stripe-go:
// POST /v1/refunds of the PaymentIntent (RefundRequest.Charge), for the
// amount, reason requested_by_customer, metadata order_id, refund_key
// (the request's Key) and reason (Sekali's, cut to Stripe's 500
// characters), with the Key as the Idempotency-Key and the charge
// expanded (expand[]=charge).
//
// The answer names the refund by its id (RefundKey re_…), as Stripe's
// refund.created, refund.updated and refund.failed events do, with
// Pending when Stripe has accepted it without making it yet; Total is
// the expanded charge's amount_refunded after this refund, as Stripe's
// charge.refunded event states it (that event names no refund: the
// pipeline counts a total above what is named as refunds not named yet,
// until the named ones take their place).
//
// A repeat with the same key and parameters is answered by Stripe with
// the first refund (Idempotent-Replayed), but Stripe keeps a key for 24
// hours only. So a repeat (Attempt > 1) first lists the PaymentIntent's
// refunds (GET /v1/refunds?payment_intent=…, data.charge expanded) and
// answers with the one whose metadata.refund_key is the Key; only when
// there is none does it create.
//
// Answers: a refund that is succeeded → Refunded; pending or
// requires_action → Refunded with Pending (Stripe has accepted it; a
// refund that fails later is Stripe's refund.failed event, which gives
// the amount back); one that is failed or canceled → *gatewaycalls.Refused. Stripe's 4xx that gatewaycalls.RefusedStatus
// calls definite → *gatewaycalls.Refused — among them the 400
// idempotency_error of a key first used with other parameters: Sekali
// sends the same parameters on every repeat, so it is a fault of
// Sekali's that no repeat mends. A 409 (the key's first request still
// in progress), 401, 403, 404, 429, a 5xx (also a 5xx that Stripe
// replays under the key), no answer, or the context's end is a plain
// error: unknown whether Stripe refunded. A request that cannot be sent
// as it is (no key, no charge, an amount that is not one of the
// currency) is refused before it is sent: *gatewaycalls.Refused with Status
// 0.
type Refunder struct {
	api *api
}

// NewRefunder returns the refunder for a Stripe secret or restricted key
// (with write access to refunds); apiURL is as NewPageOpener takes it.
func NewRefunder(secretKey, apiURL string) (*Refunder, error) {
	a, err := newAPI(secretKey, apiURL)
	if err != nil {
		return nil, err
	}
	return &Refunder{api: a}, nil
}

// Provider implements gatewaycalls.Refunder.
func (*Refunder) Provider() string { return Name }

// MaxMetadataValue is how long a metadata value Stripe takes, in
// characters.
const MaxMetadataValue = 500

// Refund implements gatewaycalls.Refunder.
func (f *Refunder) Refund(ctx context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.Refunded, error) {
	currency := strings.ToUpper(r.Currency)
	amount, ok := Amount(r.Amount, currency)
	switch {
	case r.Key == "" || r.Charge == "":
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Message: "stripe refund: no idempotency key or no PaymentIntent"}
	case !ok || amount < 1:
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Message: fmt.Sprintf("stripe refund: %d is not an amount of %s", r.Amount, currency)}
	}
	if r.Attempt > 1 {
		if a, found, err := f.existing(ctx, r.Charge, r.Key, r.Amount, currency); err != nil || found {
			return a, err
		}
	}
	re, err := f.api.createRefund(ctx, createParams(r, amount))
	if err != nil {
		return gatewaycalls.Refunded{}, refundError(err)
	}
	return f.refunded(ctx, re, r.Amount, currency)
}

// createParams are the refund of r, amount in Stripe's units, with its
// charge.
func createParams(r gatewaycalls.RefundRequest, amount int64) *stripego.RefundCreateParams {
	p := &stripego.RefundCreateParams{
		PaymentIntent: stripego.String(r.Charge),
		Amount:        stripego.Int64(amount),
		Reason:        stripego.String(string(stripego.RefundReasonRequestedByCustomer)),
		Metadata: map[string]string{"order_id": r.OrderID, "refund_key": r.Key,
			"reason": truncateChars(r.Reason, MaxMetadataValue)},
	}
	p.AddExpand("charge")
	p.SetIdempotencyKey(r.Key)
	return p
}

// listParams list the refunds of PaymentIntent pi, with their charges.
func listParams(pi string) *stripego.RefundListParams {
	p := &stripego.RefundListParams{PaymentIntent: stripego.String(pi)}
	p.Limit = stripego.Int64(100)
	p.AddExpand("data.charge")
	return p
}

// retrieveParams read a refund with its charge.
func retrieveParams() *stripego.RefundRetrieveParams {
	p := &stripego.RefundRetrieveParams{}
	p.AddExpand("charge")
	return p
}

// existing is the refund of the PaymentIntent whose metadata.refund_key
// is key, if Stripe lists one.
func (f *Refunder) existing(ctx context.Context, pi, key string, asked int64, currency string) (gatewaycalls.Refunded, bool, error) {
	re, err := f.find(ctx, pi, key)
	if err != nil || re == nil {
		return gatewaycalls.Refunded{}, false, err
	}
	a, err := f.refunded(ctx, re, asked, currency)
	return a, true, err
}

// find is the refund of PaymentIntent pi whose metadata.refund_key is
// key; nil when Stripe lists none.
func (f *Refunder) find(ctx context.Context, pi, key string) (*stripego.Refund, error) {
	for re, err := range f.api.refunds(ctx, listParams(pi)) {
		if err != nil {
			return nil, refundError(err)
		}
		if re.Metadata["refund_key"] == key {
			return re, nil
		}
	}
	return nil, nil
}

// LookUpRefund implements gatewaycalls.RefundLooker: the refund whose
// metadata.refund_key is the request's key, among the PaymentIntent's
// (GET /v1/refunds?payment_intent=…), in its state now.
func (f *Refunder) LookUpRefund(ctx context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.RefundState, bool, error) {
	re, err := f.find(ctx, r.Charge, r.Key)
	if err != nil || re == nil {
		return gatewaycalls.RefundState{}, false, err
	}
	state, ok := refundStates[re.Status]
	amount, okAmount := MinorUnits(re.Amount, strings.ToUpper(r.Currency))
	if !ok || !okAmount || amount < 1 {
		return gatewaycalls.RefundState{}, false, fmt.Errorf("stripe refund %s: status %q, amount %d of %s", re.ID, re.Status, re.Amount, r.Currency)
	}
	return gatewaycalls.RefundState{Refunded: gatewaycalls.Refunded{ObjectID: re.ID, RefundKey: re.ID, Amount: amount},
		Status: state, Reason: string(re.FailureReason)}, true, nil
}

// refunded is the answer a Stripe refund gives to the refund asked of
// that amount and currency: its amount and currency, and its charge's
// refunded total (read again when the charge came unexpanded).
func (f *Refunder) refunded(ctx context.Context, re *stripego.Refund, asked int64, currency string) (gatewaycalls.Refunded, error) {
	switch {
	case re.ID == "":
		return gatewaycalls.Refunded{}, errors.New("stripe refund: the answer names no refund")
	case re.Status == stripego.RefundStatusFailed || re.Status == stripego.RefundStatusCanceled:
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Status: http.StatusOK,
			Message: fmt.Sprintf("stripe refund %s is %s: %s", re.ID, re.Status, re.FailureReason)}
	}
	if re.Charge == nil || re.Charge.Object != "charge" { // not expanded
		again, err := f.api.refund(ctx, re.ID, retrieveParams())
		if err != nil {
			return gatewaycalls.Refunded{}, refundError(err)
		}
		if again.Charge == nil || again.Charge.Object != "charge" {
			return gatewaycalls.Refunded{}, fmt.Errorf("stripe refund %s: the answer has no charge to read the refunded total of", re.ID)
		}
		re.Charge = again.Charge
	}
	// The refund's amount is read in the currency it states; the
	// charge's total in the charge's. An answer in another currency than
	// asked is answered as it is: the caller does not apply it.
	stated := cmp.Or(strings.ToUpper(string(re.Currency)), currency)
	amount, ok1 := MinorUnits(re.Amount, stated)
	total, ok2 := MinorUnits(re.Charge.AmountRefunded, cmp.Or(strings.ToUpper(string(re.Charge.Currency)), stated))
	pending := re.Status == stripego.RefundStatusPending || re.Status == stripego.RefundStatusRequiresAction
	a := gatewaycalls.Refunded{ObjectID: re.ID, RefundKey: re.ID, Amount: amount, Currency: stated, Total: total, Pending: pending}
	switch {
	case !ok1 || !ok2 || amount < 1:
		return gatewaycalls.Refunded{}, fmt.Errorf("stripe refund %s: amount %d and refunded total %d are not amounts of %s",
			re.ID, re.Amount, re.Charge.AmountRefunded, stated)
	case stated != currency || amount != asked:
		a.Total = 0 // not the refund asked: nothing of it is applied, its total least of all
	case total < amount:
		return gatewaycalls.Refunded{}, fmt.Errorf("stripe refund %s: the refunded total %d is less than the refund's amount %d", re.ID, total, amount)
	}
	return a, nil
}

// refundError is what an error of stripe-go says of a refund: Stripe's
// definite "no", or nothing known. An idempotency_error other than a 409
// is the key used before with other parameters: definite, as no repeat
// sends other parameters.
func refundError(err error) error {
	var se *stripego.Error
	if errors.As(err, &se) {
		msg := se.Msg
		if se.Type != "" {
			msg = string(se.Type) + ": " + msg
		}
		if se.HTTPStatusCode != http.StatusConflict && gatewaycalls.RefusedStatus(se.HTTPStatusCode) {
			return &gatewaycalls.Refused{Status: se.HTTPStatusCode, Message: msg}
		}
	}
	return fmt.Errorf("stripe refund: %w", err)
}

// truncateChars is s cut to at most n characters.
func truncateChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
