package models

import (
	"crypto/rand"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// OrderStatus is the state of an order; see Decide for the transitions.
type OrderStatus string

const (
	OrderPending        OrderStatus = "pending"
	OrderPaid           OrderStatus = "paid"
	OrderFailed         OrderStatus = "failed"
	OrderExpired        OrderStatus = "expired"
	OrderCancelled      OrderStatus = "cancelled"
	OrderRefundRequired OrderStatus = "refund_required"
	// OrderPartiallyRefunded: part of the payment was refunded at the
	// gateway; the rest may follow. The order keeps its stock.
	OrderPartiallyRefunded OrderStatus = "partially_refunded"
	// OrderRefunded: the payment was refunded at the gateway, in full. The
	// stock is not given back (the goods may have shipped): an admin
	// decides.
	OrderRefunded OrderStatus = "refunded"
)

// HoldsStock reports whether an order in this state keeps its items
// reserved (the audit counts reserve + rereserve - release = 1 for these).
// A refunded order keeps them, in part or in full: a refund does not
// bring goods back.
func (s OrderStatus) HoldsStock() bool {
	return s == OrderPending || s == OrderPaid || s == OrderPartiallyRefunded || s == OrderRefunded
}

// WasPaid reports whether an order in this state was paid: paid, or paid
// and refunded since. Its invoice and its "order paid" email are owed
// either way — a refund does not undo the sale's paperwork, and a job
// that runs after the refund must not find nothing to do.
func (s OrderStatus) WasPaid() bool {
	return s == OrderPaid || s == OrderPartiallyRefunded || s == OrderRefunded
}

// Refundable reports whether an order in this state has its own charge
// taken and not yet refunded in full.
func (s OrderStatus) Refundable() bool { return s == OrderPaid || s == OrderPartiallyRefunded }

// Order is a customer's order. Amounts are minor units of Currency.
type Order struct {
	ID            string      `json:"id"`
	CustomerEmail string      `json:"customer_email"`
	Status        OrderStatus `json:"status"`
	TotalAmount   int64       `json:"total_amount"`
	Currency      string      `json:"currency"`
	ExpiresAt     time.Time   `json:"expires_at"`
	PaidAt        *time.Time  `json:"paid_at"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
	// AccessTokenHash is the SHA-256 of the order's access token: the
	// customer's credential to read and cancel it. The token itself is
	// never stored; AccessToken carries it once, from creation to the
	// answer. AccessTokenNonce is the random part it is derived from
	// with the server's secret (orders.AccessToken), so that a replay of
	// the creation can derive it again; "" for an order from before
	// tokens were derived.
	AccessTokenHash  string `json:"-"`
	AccessTokenNonce string `json:"-"`
	AccessToken      string `gorm:"-" json:"-"`
	// ClientAddr is the client that made the order, as the per-client
	// limits name it (web.ClientIdentity): its IPv4 address, or its IPv6
	// network ("2001:db8:1:2::/64"), as the web layer saw it behind
	// TRUSTED_PROXIES — or, in a fork with customer accounts, the
	// account: what limits the unpaid orders one client may hold, and
	// who a replay of the order's creation shows its token to.
	ClientAddr string `json:"-"`

	Items    []OrderItem `gorm:"foreignKey:OrderID" json:"items"`
	Payments []Payment   `gorm:"foreignKey:OrderID" json:"payments"`
	Invoice  *Invoice    `gorm:"foreignKey:OrderID" json:"invoice"`
}

// OrderItem is one line of an order; UnitPrice is the product's price when
// the order was created.
type OrderItem struct {
	ID        int64  `json:"-"`
	OrderID   string `json:"-"`
	SKU       string `gorm:"column:sku" json:"sku"`
	Name      string `json:"name"` // the product's name when it was sold
	Qty       int64  `json:"qty"`
	UnitPrice int64  `json:"unit_price"`
}

// OrderTransition is one change of an order's status, written by the
// same statement that makes the change, so an order's story can be told
// from it. CallbackID names the payment callback that caused it, if one
// did.
type OrderTransition struct {
	ID         int64
	OrderID    string
	FromStatus OrderStatus
	ToStatus   OrderStatus
	Cause      string
	CallbackID *int64
	CreatedAt  time.Time
}

// Causes of order transitions (OrderTransition.Cause).
const (
	CauseCallback    = "callback"         // a payment callback; CallbackID says which
	CauseCustomer    = "customer cancel"  // POST /api/orders/{id}/cancel
	CauseAdmin       = "admin cancel"     // the admin console
	CauseExpiryJob   = "order:expire job" // the order's own expiry task
	CauseExpirySweep = "expiry sweep"     // the sweeper, for an expiry task that was lost
)

// OrderIDPrefix starts every order id.
const OrderIDPrefix = "ORD-"

// NewOrderID returns "ORD-" followed by a ULID for t, so ids sort by
// creation time. Its 80 random bits come from crypto/rand: an id must not
// be guessable from the ids before it (ulid's default entropy is
// math/rand, monotonic within a millisecond — the next customer's id
// was a few hundred guesses away). The id is not a credential even so:
// reading an order needs its access token.
func NewOrderID(t time.Time) string {
	return OrderIDPrefix + ulid.MustNew(ulid.Timestamp(t), rand.Reader).String()
}

// ValidOrderID reports whether id has the form NewOrderID produces.
func ValidOrderID(id string) bool {
	rest, ok := strings.CutPrefix(id, OrderIDPrefix)
	if !ok {
		return false
	}
	_, err := ulid.ParseStrict(rest)
	return err == nil
}

// OrderIDTime is the time an order id was made at (its ULID's time), and
// false for an id of another form.
func OrderIDTime(id string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(id, OrderIDPrefix)
	if !ok {
		return time.Time{}, false
	}
	u, err := ulid.ParseStrict(rest)
	if err != nil {
		return time.Time{}, false
	}
	return ulid.Time(u.Time()), true
}
