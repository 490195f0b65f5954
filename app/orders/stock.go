package orders

import (
	"errors"
	"slices"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/models"
)

// Reserve takes every item's quantity from stock, in SKU order, recording
// one movement of kind (reserve or rereserve) per item. It is
// all-or-nothing: it runs in a savepoint, and if any item is short it
// returns EInsufficientStock with nothing changed. If the order already
// has movements of this kind, they were taken before: done is false and
// nothing changes.
func Reserve(tx *gorm.DB, orderID string, items []models.OrderItem, kind models.MovementKind) (done bool, err error) {
	err = tx.Transaction(func(tx *gorm.DB) error {
		for _, it := range sortedBySKU(items) {
			inserted, err := addMovement(tx, orderID, it, kind)
			if err != nil {
				return err
			}
			if !inserted {
				return errAlreadyMoved
			}
			res := tx.Exec("UPDATE products SET stock = stock - ?, updated_at = now() WHERE sku = ? AND stock >= ?", it.Qty, it.SKU, it.Qty)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return models.Errorf(models.EInsufficientStock, "not enough stock for %s", it.SKU)
			}
		}
		done = true
		return nil
	})
	if errors.Is(err, errAlreadyMoved) {
		return false, nil
	}
	return done, err
}

// Release gives every item's quantity back to stock, at most once per
// order and item: the release movement's unique index decides.
func Release(tx *gorm.DB, orderID string, items []models.OrderItem) error {
	for _, it := range sortedBySKU(items) {
		inserted, err := addMovement(tx, orderID, it, models.MovementRelease)
		if err != nil {
			return err
		}
		if !inserted {
			continue // released before
		}
		if err := tx.Exec("UPDATE products SET stock = stock + ?, updated_at = now() WHERE sku = ?", it.Qty, it.SKU).Error; err != nil {
			return err
		}
	}
	return nil
}

// errAlreadyMoved rolls Reserve's savepoint back when a movement exists.
var errAlreadyMoved = errors.New("stock already moved for this order")

// addMovement records one movement unless (order, sku, kind) exists; it
// reports whether the row was written. ON CONFLICT DO NOTHING keeps a
// duplicate from aborting the transaction.
func addMovement(tx *gorm.DB, orderID string, it models.OrderItem, kind models.MovementKind) (bool, error) {
	m := models.StockMovement{SKU: it.SKU, OrderID: &orderID, Kind: kind, Qty: it.Qty}
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&m)
	return res.RowsAffected == 1, res.Error
}

// sortedBySKU returns the items in SKU order, the order in which every
// transaction locks products.
func sortedBySKU(items []models.OrderItem) []models.OrderItem {
	out := slices.Clone(items)
	slices.SortFunc(out, func(a, b models.OrderItem) int { return strings.Compare(a.SKU, b.SKU) })
	return out
}
