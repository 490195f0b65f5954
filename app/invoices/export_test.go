package invoices

import (
	"errors"

	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// Get returns orderID's invoice, or nil when it has none.
func Get(db *gorm.DB, orderID string) (*models.Invoice, error) {
	var inv models.Invoice
	err := db.Take(&inv, "order_id = ?", orderID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return &inv, err
}
