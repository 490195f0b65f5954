package stripe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/models"
)

// PageOpener opens Stripe Checkout Sessions (POST /v1/checkout/sessions,
// payment mode) with stripe-go, one line item of price_data per item of
// the order. The request's Key is the Idempotency-Key: Stripe answers a
// repeat with the same parameters with the first session, so a repeat
// after a lost answer is safe. stripe-go makes no retries of its own: the
// caller repeats.
//
// Answers: a session → its id (cs_…) and url, with the amount_total and
// currency it states (Page's Amount and Currency). Stripe's 400, 401, 402,
// 403 and 404 are *gatewaycalls.Refused — among them the 400
// idempotency_error of a key first used with other parameters or on
// another endpoint: the key cannot succeed, so a repeat must send exactly
// what the first call sent. A 409 (the key's first request is still in
// progress), a 429, a 5xx, an answer that is not Stripe's, no answer, or
// the context's end is a plain error: unknown whether Stripe acted. A
// request that cannot be sent as it is (no key, no amount, an amount that
// is not one of the currency, items that do not add up to the amount) is
// refused before it is sent: *gatewaycalls.Refused with Status 0.
type PageOpener struct {
	api     *api
	baseURL string
}

// NewPageOpener returns the opener for a Stripe secret or restricted key
// (with write access to Checkout Sessions). baseURL is Stripe's API
// (https://api.stripe.com) when empty; it may have a path, as the sandbox
// gateway's emulation has (http://host/sandbox/stripe).
func NewPageOpener(secretKey, baseURL string) (*PageOpener, error) {
	a, err := newAPI(secretKey, baseURL)
	if err != nil {
		return nil, err
	}
	return &PageOpener{api: a, baseURL: baseURL}, nil
}

// CheckoutOrigin is where Stripe serves its Checkout pages.
const CheckoutOrigin = "https://checkout.stripe.com"

// PageOrigins implements gatewaycalls.PageOrigins: Stripe's Checkout, and,
// with an API of its own (the sandbox gateway's emulation), that API's
// origin, where such an API serves its pages.
func (o *PageOpener) PageOrigins() []string {
	if origin := gatewaycalls.Origin(o.baseURL); origin != "" {
		return []string{CheckoutOrigin, origin}
	}
	return []string{CheckoutOrigin}
}

// Provider implements gatewaycalls.PageOpener.
func (*PageOpener) Provider() string { return Name }

// OpenPage implements gatewaycalls.PageOpener.
func (o *PageOpener) OpenPage(ctx context.Context, r gatewaycalls.PageRequest) (gatewaycalls.Page, error) {
	params, err := sessionParams(r)
	if err != nil {
		return gatewaycalls.Page{}, err
	}
	cs, err := o.api.createSession(ctx, params)
	if err != nil {
		return gatewaycalls.Page{}, answerError(err)
	}
	if cs.ID == "" || cs.URL == "" {
		return gatewaycalls.Page{}, fmt.Errorf("stripe checkout session: the answer has no id or url")
	}
	return sessionPage(cs, strings.ToUpper(r.Currency))
}

// sessionPage is the page of Checkout Session cs, with the amount_total
// and currency it states — the caller offers it only when they are the
// order's — read in the currency it states (asked, when it states none).
// An amount_total that is not one of that currency is an answer Sekali
// cannot read: a plain error, and the press asks again.
func sessionPage(cs *stripego.CheckoutSession, asked string) (gatewaycalls.Page, error) {
	page := gatewaycalls.Page{ObjectID: cs.ID, RedirectURL: cs.URL, Currency: strings.ToUpper(string(cs.Currency))}
	amount, ok := MinorUnits(cs.AmountTotal, cmp.Or(page.Currency, asked))
	if !ok {
		return gatewaycalls.Page{}, fmt.Errorf("stripe checkout session %s: amount_total %d is not an amount of %s", cs.ID, cs.AmountTotal, cmp.Or(page.Currency, asked))
	}
	page.Amount = amount
	return page, nil
}

// sessionParams is the Checkout Session that r asks for. A request
// without items is one line: the order.
func sessionParams(r gatewaycalls.PageRequest) (*stripego.CheckoutSessionCreateParams, error) {
	switch {
	case r.Key == "":
		return nil, &gatewaycalls.Refused{Message: "stripe checkout session: no idempotency key"}
	case r.Amount < 1: // Stripe would open a page of nothing to pay (a line of unit_amount 0 is valid there)
		return nil, &gatewaycalls.Refused{Message: fmt.Sprintf("stripe checkout session: %d is no amount to pay", r.Amount)}
	}
	currency := strings.ToUpper(r.Currency)
	items := r.Items
	if len(items) == 0 {
		items = []gatewaycalls.PageItem{{Name: "Order " + r.OrderID, Qty: 1, UnitPrice: r.Amount}}
	}
	p := &stripego.CheckoutSessionCreateParams{
		Mode:              stripego.String(string(stripego.CheckoutSessionModePayment)),
		SuccessURL:        stripego.String(r.ReturnURL),
		CancelURL:         stripego.String(r.ReturnURL),
		ClientReferenceID: stripego.String(r.OrderID),
		Metadata:          map[string]string{"order_id": r.OrderID},
		PaymentIntentData: &stripego.CheckoutSessionCreatePaymentIntentDataParams{
			Metadata: map[string]string{"order_id": r.OrderID},
		},
	}
	if r.CustomerEmail != "" {
		p.CustomerEmail = stripego.String(r.CustomerEmail)
	}
	for _, it := range items {
		unit, ok := Amount(it.UnitPrice, currency)
		if !ok || it.Qty < 1 {
			return nil, &gatewaycalls.Refused{Message: fmt.Sprintf("stripe checkout session: %d × %d is not an amount of %s", it.Qty, it.UnitPrice, currency)}
		}
		name := it.Name
		if name == "" {
			name = it.SKU
		}
		p.LineItems = append(p.LineItems, &stripego.CheckoutSessionCreateLineItemParams{
			Quantity: stripego.Int64(it.Qty),
			PriceData: &stripego.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripego.String(strings.ToLower(currency)),
				UnitAmount:  stripego.Int64(unit),
				ProductData: &stripego.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripego.String(name)},
			},
		})
	}
	if err := r.CheckItems("stripe checkout session"); err != nil {
		return nil, err
	}
	p.SetIdempotencyKey(r.Key)
	return p, nil
}

// answerError is what an error of stripe-go says: Stripe's definite "no";
// a spent key — the key used before with other parameters
// (idempotency_error), or a 5xx Stripe replays under the key (it keeps a
// key's first answer, errors included, for 24 hours) — which a new key
// gets past; or nothing known.
func answerError(err error) error {
	var se *stripego.Error
	if errors.As(err, &se) {
		msg := se.Msg
		if se.Type != "" {
			msg = string(se.Type) + ": " + msg
		}
		replayed := se.LastResponse != nil && se.LastResponse.Header.Get("Idempotent-Replayed") == "true"
		switch {
		case se.Type == stripego.ErrorTypeIdempotency || (replayed && se.HTTPStatusCode >= 500):
			return &gatewaycalls.KeySpent{Message: msg}
		case gatewaycalls.RefusedStatus(se.HTTPStatusCode):
			return &gatewaycalls.Refused{Status: se.HTTPStatusCode, Message: msg}
		}
	}
	return fmt.Errorf("stripe checkout session: %w", err)
}

// FindPage implements gatewaycalls.PageFinder: the Checkout Session of
// the request's order (client_reference_id, or metadata.order_id) that
// is open or complete, among the sessions created since the order was
// (its id says when, a minute earlier for clocks that differ), newest
// first (GET /v1/checkout/sessions, pages of 100). Stripe's list neither filters by order nor
// names the Idempotency-Key a session was made under; an order has one
// create_payment request, so its session is the one that request made.
// An expired session is no page to send a customer to: not found.
func (o *PageOpener) FindPage(ctx context.Context, r gatewaycalls.PageRequest) (gatewaycalls.Page, bool, error) {
	p := &stripego.CheckoutSessionListParams{}
	p.Limit = stripego.Int64(100)
	if t, ok := models.OrderIDTime(r.OrderID); ok {
		p.CreatedRange = &stripego.RangeQueryParams{GreaterThanOrEqual: t.Add(-time.Minute).Unix()}
	}
	read := 0
	for cs, err := range o.api.sessions(ctx, p) {
		if err != nil {
			return gatewaycalls.Page{}, false, fmt.Errorf("stripe checkout sessions: %w", err)
		}
		if read++; read > maxSessionPages*100 {
			return gatewaycalls.Page{}, false, fmt.Errorf("stripe checkout sessions: more than %d since order %s was made; its own not among them", maxSessionPages*100, r.OrderID)
		}
		if sessionOrder(cs) != r.OrderID || cs.Status == stripego.CheckoutSessionStatusExpired || cs.ID == "" || cs.URL == "" {
			continue
		}
		page, err := sessionPage(cs, strings.ToUpper(r.Currency))
		return page, err == nil, err
	}
	return gatewaycalls.Page{}, false, nil
}

// maxSessionPages bounds the pages of sessions FindPage reads. Beyond
// them it cannot say that the order has no session — it answers an
// error, and the outcome stays unknown: a shop that makes more than 500
// sessions while one order waits for its page.
const maxSessionPages = 5
