package models

import (
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
)

// HoldsStock reports whether an order in this state keeps its items
// reserved (the audit counts reserve + rereserve - release = 1 for these).
func (s OrderStatus) HoldsStock() bool { return s == OrderPending || s == OrderPaid }

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
	Qty       int64  `json:"qty"`
	UnitPrice int64  `json:"unit_price"`
}

// OrderIDPrefix starts every order id.
const OrderIDPrefix = "ORD-"

// NewOrderID returns "ORD-" followed by a ULID for t, so ids sort by
// creation time.
func NewOrderID(t time.Time) string {
	return OrderIDPrefix + ulid.MustNew(ulid.Timestamp(t), ulid.DefaultEntropy()).String()
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
