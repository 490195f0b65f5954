package models

import "time"

// Invoice is the one invoice of a paid order. Number is INV-YYYY-NNNNNN;
// Year and Sequence are its parts, gapless per year.
type Invoice struct {
	ID       int64     `json:"-"`
	OrderID  string    `json:"order_id"`
	Number   string    `json:"number"`
	Year     int       `json:"-"`
	Sequence int64     `json:"-"`
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	IssuedAt time.Time `json:"issued_at"`
}

// InvoiceCounter holds the last invoice sequence of a year.
type InvoiceCounter struct {
	Year int `gorm:"primaryKey;autoIncrement:false"`
	Last int64
}
