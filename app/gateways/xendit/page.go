package xendit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/payments"
)

// DefaultAPIURL is Xendit's API, for test and live keys alike (the key
// says which mode).
const DefaultAPIURL = "https://api.xendit.co"

// PageOpener opens Xendit invoices: POST /v2/invoices with the secret key
// as the basic-auth user, the request's Key as the external_id, amount
// and item prices as JSON numbers in the currency's major unit (Sekali's
// IDR has no minor unit, so rupiah both sides), and the return URL as the
// success and failure redirects. The invoice's invoice_url is the page.
//
// An invoice takes no idempotency key: Xendit documents none for
// invoices, and does not refuse a second invoice of one external_id (its
// list answers an array). So OpenPage looks first — GET
// /v2/invoices?external_id=Key — and answers with an invoice already
// there instead of making a second one: a PENDING one that has not
// expired, or a PAID or SETTLED one (a second invoice could be paid a
// second time). Only when there is none, or only expired ones, does it
// create. The look and the create are two calls, so two callers at once
// could both find nothing and both create; Sekali's ledger
// (gatewaycalls.Pages) lets one caller at a time call for a key, which closes
// that window. A create whose answer was lost is found by the next call's
// look.
//
// Answers: an invoice with an id and an invoice_url → its id and the
// url, with the amount and currency it states (Page's Amount and
// Currency: one made before for another amount is answered so, and the
// caller does not offer it); a 4xx but 408, 409, 425 and 429 (to the look or the create) →
// *gatewaycalls.Refused with Xendit's error_code and message; those, a 5xx,
// an answer that is not an invoice, no answer, or the context's end → a
// plain error: unknown whether Xendit acted. A request that cannot be
// sent as it is (no key, no amount, an amount or items the currency
// cannot write, items that do not add up to the amount) is refused before
// it is sent: *gatewaycalls.Refused with Status 0.
type PageOpener struct {
	BaseURL   string // https://api.xendit.co, or the sandbox gateway's emulation, or a test server
	secretKey string
	Client    *http.Client
	now       func() time.Time
}

// NewPageOpener returns the invoice opener for a secret API key ("xnd_…");
// apiURL is Xendit's (DefaultAPIURL) when empty, and may have a path (the
// sandbox gateway's emulation is at {sandbox}/sandbox/xendit).
func NewPageOpener(secretKey, apiURL string) (*PageOpener, error) {
	if err := CheckSecretKey(secretKey); err != nil {
		return nil, err
	}
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	return &PageOpener{BaseURL: strings.TrimSuffix(apiURL, "/"), secretKey: secretKey,
		Client: httpjson.NewClient(httpjson.DefaultTimeout), now: time.Now}, nil
}

// Provider implements gatewaycalls.PageOpener.
func (*PageOpener) Provider() string { return Name }

// checkoutOrigins are where Xendit serves its invoice pages.
var checkoutOrigins = []string{"https://checkout.xendit.co", "https://checkout-staging.xendit.co"}

// PageOrigins implements gatewaycalls.PageOpener: Xendit's checkout, and,
// with an API of its own (the sandbox gateway's emulation), that API's
// origin.
func (o *PageOpener) PageOrigins() []string {
	origins := slices.Clone(checkoutOrigins)
	if origin := gatewaycalls.Origin(o.BaseURL); o.BaseURL != DefaultAPIURL && origin != "" {
		origins = append(origins, origin)
	}
	return origins
}

// invoiceRequest is Xendit's create-invoice request.
type invoiceRequest struct {
	ExternalID         string        `json:"external_id"`
	Amount             json.Number   `json:"amount"`
	Currency           string        `json:"currency"`
	PayerEmail         string        `json:"payer_email,omitempty"`
	Description        string        `json:"description"`
	SuccessRedirectURL string        `json:"success_redirect_url"`
	FailureRedirectURL string        `json:"failure_redirect_url"`
	Items              []invoiceItem `json:"items,omitempty"`
	InvoiceDuration    int64         `json:"invoice_duration,omitempty"` // seconds from its creation
}

type invoiceItem struct {
	Name        string      `json:"name"`
	Quantity    int64       `json:"quantity"`
	Price       json.Number `json:"price"`
	ReferenceID string      `json:"reference_id,omitempty"`
}

// invoiceAnswer is the part of Xendit's invoice the opener reads, and its
// error.
type invoiceAnswer struct {
	ID         string      `json:"id"`
	Status     string      `json:"status"`
	InvoiceURL string      `json:"invoice_url"`
	ExpiryDate string      `json:"expiry_date"`
	Amount     json.Number `json:"amount"`
	Currency   string      `json:"currency"`
	ErrorCode  string      `json:"error_code"`
	Message    string      `json:"message"`
}

// page is the page of invoice inv, with the amount and currency it states
// — the caller offers it only when they are the order's — read in the
// currency it states (asked, when it states none). An amount that is not
// one of that currency is an answer Sekali cannot read: a plain error,
// and the press asks again.
func (inv invoiceAnswer) page(asked string) (gatewaycalls.Page, error) {
	page := gatewaycalls.Page{ObjectID: inv.ID, RedirectURL: inv.InvoiceURL, Currency: strings.ToUpper(inv.Currency)}
	if inv.Amount == "" {
		return page, nil
	}
	amount, err := payments.ParseAmount(string(inv.Amount), cmp.Or(page.Currency, asked))
	if err != nil {
		return gatewaycalls.Page{}, fmt.Errorf("xendit invoice %s: amount %s is not an amount of %s", inv.ID, payments.QuoteAmount(string(inv.Amount)), cmp.Or(page.Currency, asked))
	}
	page.Amount = amount
	return page, nil
}

// OpenPage implements gatewaycalls.PageOpener.
func (o *PageOpener) OpenPage(ctx context.Context, r gatewaycalls.PageRequest) (gatewaycalls.Page, error) {
	body, err := invoiceBody(r)
	if err != nil {
		return gatewaycalls.Page{}, err
	}
	currency := strings.ToUpper(r.Currency)
	if page, found, err := o.existing(ctx, r.Key, currency); err != nil || found {
		return page, err
	}
	code, answer, err := httpjson.Post(ctx, o.Client, o.BaseURL+"/v2/invoices", o.secretKey, body)
	if err != nil {
		return gatewaycalls.Page{}, fmt.Errorf("xendit invoice: %w", err)
	}
	var inv invoiceAnswer
	decodeErr := json.Unmarshal(answer, &inv)
	switch {
	case (code == http.StatusOK || code == http.StatusCreated) && decodeErr == nil && inv.ID != "" && inv.InvoiceURL != "":
		return inv.page(currency)
	case gatewaycalls.RefusedStatus(code):
		return gatewaycalls.Page{}, refusal(code, inv)
	}
	return gatewaycalls.Page{}, fmt.Errorf("xendit invoice: HTTP %d %.200s", code, answer)
}

// existing is the invoice of externalID that OpenPage answers with
// instead of creating one, if Xendit lists one.
func (o *PageOpener) existing(ctx context.Context, externalID, currency string) (gatewaycalls.Page, bool, error) {
	code, answer, err := httpjson.Get(ctx, o.Client, o.BaseURL+"/v2/invoices?external_id="+url.QueryEscape(externalID), o.secretKey)
	if err != nil {
		return gatewaycalls.Page{}, false, fmt.Errorf("xendit invoice lookup: %w", err)
	}
	var invoices []invoiceAnswer
	switch {
	case code == http.StatusOK && json.Unmarshal(answer, &invoices) == nil:
	case code == http.StatusNotFound && strings.Contains(string(answer), "NOT_FOUND"): // Xendit's "none", as the status client reads it
		return gatewaycalls.Page{}, false, nil
	case gatewaycalls.RefusedStatus(code):
		var e invoiceAnswer
		json.Unmarshal(answer, &e)
		return gatewaycalls.Page{}, false, refusal(code, e)
	default:
		return gatewaycalls.Page{}, false, fmt.Errorf("xendit invoice lookup: HTTP %d %.200s", code, answer)
	}
	for _, inv := range invoices {
		if inv.ID == "" || inv.InvoiceURL == "" {
			continue
		}
		switch inv.Status {
		case "PAID", "SETTLED":
			page, err := inv.page(currency)
			return page, err == nil, err
		case "PENDING":
			if expiry, err := time.Parse(time.RFC3339, inv.ExpiryDate); err == nil && !expiry.After(o.now()) {
				continue // expired, though Xendit has not said so yet
			}
			page, err := inv.page(currency)
			return page, err == nil, err
		}
	}
	return gatewaycalls.Page{}, false, nil
}

// FindPage implements gatewaycalls.PageFinder: the invoice OpenPage would
// answer with, looked up by the request's key (its external_id), without
// creating one.
func (o *PageOpener) FindPage(ctx context.Context, r gatewaycalls.PageRequest) (gatewaycalls.Page, bool, error) {
	return o.existing(ctx, r.Key, strings.ToUpper(r.Currency))
}

// refusal is Xendit's definite "no".
func refusal(code int, e invoiceAnswer) *gatewaycalls.Refused {
	msg := e.Message
	if e.ErrorCode != "" {
		msg = strings.TrimSuffix(e.ErrorCode+": "+msg, ": ")
	}
	if msg == "" {
		msg = http.StatusText(code)
	}
	return &gatewaycalls.Refused{Status: code, Message: msg}
}

// invoiceBody is the invoice that r asks for. A request without items is
// sent without items.
func invoiceBody(r gatewaycalls.PageRequest) ([]byte, error) {
	if r.Key == "" || r.Amount < 1 {
		return nil, &gatewaycalls.Refused{Message: "xendit invoice: no external_id (key) or no amount"}
	}
	currency := strings.ToUpper(r.Currency)
	inv := invoiceRequest{
		ExternalID: r.Key, Amount: json.Number(payments.MajorText(r.Amount, currency, 0)), Currency: currency,
		PayerEmail: r.CustomerEmail, Description: "Order " + r.OrderID,
		SuccessRedirectURL: r.ReturnURL, FailureRedirectURL: r.ReturnURL,
	}
	if within := r.PayWithin(time.Second); within > 0 { // whole seconds, rounded up
		inv.InvoiceDuration = int64((within + time.Second - 1) / time.Second)
	}
	for _, it := range r.Items {
		if it.Qty < 1 || it.UnitPrice < 0 {
			return nil, &gatewaycalls.Refused{Message: fmt.Sprintf("xendit invoice: %d × %d is not an item", it.Qty, it.UnitPrice)}
		}
		name := it.Name
		if name == "" {
			name = it.SKU
		}
		inv.Items = append(inv.Items, invoiceItem{Name: name, Quantity: it.Qty,
			Price: json.Number(payments.MajorText(it.UnitPrice, currency, 0)), ReferenceID: it.SKU})
	}
	if err := r.CheckItems("xendit invoice"); err != nil {
		return nil, err
	}
	return json.Marshal(inv)
}
