package gatewaycalls

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// PageRequest is what a gateway needs to open its hosted payment page for
// an order.
type PageRequest struct {
	OrderID string
	// Key is the provider idempotency key, chosen before the first call
	// and sent with every repeat of it: an Idempotency-Key header, or an
	// order or external id the gateway takes once.
	Key           string
	Amount        int64 // minor units
	Currency      string
	CustomerEmail string
	Items         []PageItem
	// ReturnURL is where the gateway sends the customer back: the order's
	// page, with its access token.
	ReturnURL string
	// ExpiresAt is the order's deadline, when its stock is released;
	// AskedAt is when this call is made. A gateway whose page takes a
	// deadline and does not compare a repeat's parameters is given the time between them: a payment after the
	// order's end would have no stock left to pay for. Zero: none.
	ExpiresAt, AskedAt time.Time
}

// PayWithin is how long the customer has to pay, from AskedAt, and at
// least least, so that a page asked in the order's last moments still
// opens; 0 when the request names no deadline.
func (r PageRequest) PayWithin(least time.Duration) time.Duration {
	if r.ExpiresAt.IsZero() || r.AskedAt.IsZero() {
		return 0
	}
	return max(r.ExpiresAt.Sub(r.AskedAt), least)
}

// CheckItems refuses, before anything is sent, a request whose items do
// not add up to its amount: every gateway's page lists them, and each
// refuses a total other than the amount. No items: nothing to check.
// gateway names the call in the refusal ("<gateway> checkout session").
func (r PageRequest) CheckItems(gateway string) error {
	var total int64
	for _, it := range r.Items {
		total += it.Qty * it.UnitPrice
	}
	if len(r.Items) > 0 && total != r.Amount {
		return &Refused{Message: fmt.Sprintf("%s: the items add up to %d, the order to %d", gateway, total, r.Amount)}
	}
	return nil
}

// PageItem is one line of the order, as the gateway shows it.
type PageItem struct {
	SKU       string
	Name      string
	Qty       int64
	UnitPrice int64 // minor units
}

// Page is a gateway's hosted payment page for an order.
type Page struct {
	// ObjectID is the gateway's id of what it created: a Snap token, a
	// Checkout Session (cs_…), an invoice id.
	ObjectID    string
	RedirectURL string
	// Amount (minor units) and Currency are what the gateway's answer
	// states the page asks the customer to pay — a Checkout Session's
	// amount_total and currency, an invoice's amount and currency — or 0
	// and "" where it states none (a Snap token). A page for another
	// amount or currency than the order's is not offered (Pages.Open).
	Amount   int64
	Currency string
}

// Stated is what the answer states of the page's money.
func (p Page) Stated() Stated { return Stated{Amount: p.Amount, Currency: p.Currency} }

// PageOpener opens hosted payment pages at one gateway. OpenPage returns
// a *Refused error when the gateway answered and said no (that request
// will never succeed); any other error — a timeout, a 5xx, a connection
// that broke — says nothing about whether the gateway acted, and the
// call is repeated with the same key.
type PageOpener interface {
	Provider() string
	OpenPage(ctx context.Context, r PageRequest) (Page, error)
	// PageOrigins are the origins (scheme://host) its hosted pages are
	// served from: the shop's Pay form redirects there, and a browser
	// follows that redirect only to origins the page's
	// Content-Security-Policy (form-action) names.
	PageOrigins() []string
}

// Origin is the scheme://host[:port] of rawURL, "" when it has none.
func Origin(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// Refused is a gateway's definite "no": it answered, and the same request
// will never succeed (a 4xx other than a rate limit or a conflict with a
// request still in progress).
type Refused struct {
	Status  int    // the gateway's HTTP status
	Message string // what the gateway said
}

func (e *Refused) Error() string { return fmt.Sprintf("refused (%d): %s", e.Status, e.Message) }

// RefusedStatus reports whether a gateway's HTTP status is a definite
// "no" to this request: a 4xx other than 408 (timeout), 409 (a request in
// progress), 425 (too early) and 429 (rate limit), each of which a repeat
// may get past, and other than 401, 403 and 404, which say that Sekali is
// set up wrong (a rotated key, a wrong API URL) rather than that the
// request is: failing the order's page for good over them would leave
// every order pressed meanwhile unpayable once the setting is fixed.
func RefusedStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return false
	}
	return code >= 400 && code < 500
}

// KeySpent is a gateway's answer that the request's key was used before
// and cannot be used again — an order id the gateway takes once and
// does not replay: after a lost answer, the repeat is refused so. A new
// key may succeed.
type KeySpent struct {
	Message string // what the gateway said
}

func (e *KeySpent) Error() string { return "the key was used before: " + e.Message }

// IsKeySpent reports whether err says the request's key is spent.
func IsKeySpent(err error) bool {
	var k *KeySpent
	return errors.As(err, &k)
}

// IsRefused reports whether err is a gateway's definite "no".
func IsRefused(err error) bool {
	var r *Refused
	return errors.As(err, &r)
}
