package models

import "time"

// DefaultCurrency is the ISO 4217 code used when none is given.
const DefaultCurrency = "IDR"

// Product is a thing for sale. Stock is in units; Price is in minor units
// of Currency (IDR has none: 150000 means Rp150.000).
type Product struct {
	ID       int64  `json:"-"`
	SKU      string `gorm:"column:sku" json:"sku"`
	Name     string `json:"name"`
	Price    int64  `json:"price"`
	Currency string `json:"currency"`
	Stock    int64  `json:"stock"`
	// MaxPerOrder caps the units of this product one order may hold, so
	// that one buyer cannot hold its whole stock unpaid; nil: no cap of
	// its own (ORDER_MAX_UNITS still holds).
	MaxPerOrder *int64    `json:"max_per_order"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// MovementKind says why products.stock changed.
type MovementKind string

const (
	MovementAdjust    MovementKind = "adjust"    // seeding and restocking; no order
	MovementReserve   MovementKind = "reserve"   // an order was created
	MovementRelease   MovementKind = "release"   // the order failed, expired or was cancelled
	MovementRereserve MovementKind = "rereserve" // a late payment took the stock back
)

// Sign is +1 for kinds that add to stock and -1 for kinds that take from it.
func (k MovementKind) Sign() int64 {
	switch k {
	case MovementReserve, MovementRereserve:
		return -1
	default:
		return 1
	}
}

// StockMovement is one change of a product's stock. Qty is positive; the
// kind gives the direction (see Sign). OrderID is nil for adjust rows.
type StockMovement struct {
	ID        int64
	SKU       string `gorm:"column:sku"`
	OrderID   *string
	Kind      MovementKind
	Qty       int64
	CreatedAt time.Time
}

// ValidCurrency reports whether s looks like an ISO 4217 code (three
// capital letters).
func ValidCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// CurrencyExponent is the number of minor-unit digits of an ISO 4217
// currency as Sekali stores it: 0 for the rupiah, the yen, the won and
// the dong (150000 means Rp150.000), 2 for most others.
func CurrencyExponent(currency string) int {
	switch currency {
	case "IDR", "JPY", "KRW", "VND", "CLP", "PYG", "UGX", "XAF", "XOF":
		return 0
	case "BHD", "JOD", "KWD", "OMR", "TND":
		return 3
	}
	return 2
}
