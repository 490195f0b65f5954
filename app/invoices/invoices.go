// Package invoices issues the one invoice of a paid order, numbered
// INV-YYYY-NNNNNN without gaps per year.
package invoices

import (
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/models"
)

// IssueTx issues orderID's invoice in tx, or returns the one it has.
// created is false when the invoice existed, and when the order was never
// paid (then inv is nil: there is nothing to invoice). An order paid and
// refunded before its invoice job ran still gets its invoice: the sale
// happened (models.OrderStatus.WasPaid). An order that does
// not exist is an ENotFound error.
//
// The order row is locked first, so two workers running the same job at
// once take turns: the second finds the first one's invoice. The invoice
// is looked up before a number is taken, so no number is burnt; the
// number comes from the year's counter row, updated in this transaction,
// so concurrent invoices wait for each other and a rollback returns it.
func IssueTx(tx *gorm.DB, orderID string, now time.Time) (inv *models.Invoice, created bool, err error) {
	o, err := orders.Lock(tx, orderID)
	if err != nil {
		return nil, false, err
	}
	if !o.Status.WasPaid() {
		return nil, false, nil
	}
	var existing models.Invoice
	err = tx.Take(&existing, "order_id = ?", orderID).Error
	if err == nil {
		return &existing, false, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, false, err
	}

	now = now.UTC().Truncate(time.Microsecond)
	counter := models.InvoiceCounter{Year: now.Year(), Last: 1}
	err = tx.Clauses(
		clause.OnConflict{
			Columns:   []clause.Column{{Name: "year"}},
			DoUpdates: clause.Assignments(map[string]any{"last": gorm.Expr("invoice_counters.last + 1")}),
		},
		clause.Returning{Columns: []clause.Column{{Name: "last"}}},
	).Create(&counter).Error
	if err != nil {
		return nil, false, fmt.Errorf("invoices: next number: %w", err)
	}
	inv = &models.Invoice{
		OrderID:  orderID,
		Number:   Number(counter.Year, counter.Last),
		Year:     counter.Year,
		Sequence: counter.Last,
		Amount:   o.TotalAmount,
		Currency: o.Currency,
		IssuedAt: now,
	}
	if err := tx.Create(inv).Error; err != nil {
		return nil, false, fmt.Errorf("invoices: %w", err)
	}
	return inv, true, nil
}

// Number formats an invoice number: INV-2026-000001.
func Number(year int, sequence int64) string { return fmt.Sprintf("INV-%d-%06d", year, sequence) }
