// Package catalog creates products and changes their stock outside of
// orders: seeding and restocking. Every change of products.stock here is
// written together with an `adjust` stock movement, so the audit can add
// them up.
package catalog

import (
	"context"
	"fmt"
	"regexp"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

var skuPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Demo are the products `sekali seed` creates.
var Demo = []models.Product{
	{SKU: "DEMO-TSHIRT", Name: "Sekali T-shirt", Price: 150000, Currency: "IDR", Stock: 100},
	{SKU: "DEMO-MUG", Name: "Sekali mug", Price: 75000, Currency: "IDR", Stock: 50},
	{SKU: "DEMO-LIMITED", Name: "Sekali limited print", Price: 250000, Currency: "IDR", Stock: 3},
}

// Validate checks a new product.
func Validate(p models.Product) error {
	switch {
	case !skuPattern.MatchString(p.SKU):
		return models.Errorf(models.EInvalid, "sku %q must be 1-64 letters, digits, '.', '_' or '-'", p.SKU)
	case p.Name == "":
		return models.Errorf(models.EInvalid, "name is required")
	case p.Price < 0:
		return models.Errorf(models.EInvalid, "price must be 0 or more minor units")
	case p.Stock < 0:
		return models.Errorf(models.EInvalid, "stock must be 0 or more")
	case !models.ValidCurrency(p.Currency):
		return models.Errorf(models.EInvalid, "currency must be an ISO 4217 code such as IDR")
	}
	return nil
}

// Create adds a product with its initial stock as an adjust movement, in
// tx. created is false, and nothing changes, when the SKU exists.
func Create(tx *gorm.DB, p *models.Product) (created bool, err error) {
	if p.Currency == "" {
		p.Currency = models.DefaultCurrency
	}
	if err := Validate(*p); err != nil {
		return false, err
	}
	err = tx.Transaction(func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(p)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		created = true
		if p.Stock == 0 {
			return nil
		}
		return tx.Create(&models.StockMovement{SKU: p.SKU, Kind: models.MovementAdjust, Qty: p.Stock}).Error
	})
	return created, err
}

// Restock adds qty units to sku's stock with an adjust movement, in tx.
func Restock(tx *gorm.DB, sku string, qty int64) (*models.Product, error) {
	if qty < 1 {
		return nil, models.Errorf(models.EInvalid, "qty must be 1 or more")
	}
	var p models.Product
	err := tx.Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&p).Clauses(clause.Returning{}).Where("sku = ?", sku).
			Updates(map[string]any{"stock": gorm.Expr("stock + ?", qty), "updated_at": gorm.Expr("now()")})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return models.Errorf(models.ENotFound, "no product %q", sku)
		}
		return tx.Create(&models.StockMovement{SKU: sku, Kind: models.MovementAdjust, Qty: qty}).Error
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// Seed creates the demo products that do not exist yet and returns the
// SKUs it created.
func Seed(ctx context.Context, db *gorm.DB) (created []string, err error) {
	err = store.Transaction(ctx, db, func(tx *gorm.DB) error {
		created = nil
		for _, p := range Demo {
			p := p
			ok, err := Create(tx, &p)
			if err != nil {
				return fmt.Errorf("seed %s: %w", p.SKU, err)
			}
			if ok {
				created = append(created, p.SKU)
			}
		}
		return nil
	})
	return created, err
}

// Service is the catalog for the admin API.
type Service struct{ db *gorm.DB }

// NewService returns the catalog service.
func NewService(db *gorm.DB) *Service { return &Service{db: db} }

// Create adds a new product with its stock; an existing SKU is an
// EAlreadyExists error.
func (s *Service) Create(ctx context.Context, p models.Product) (*models.Product, error) {
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		created, err := Create(tx, &p)
		if err == nil && !created {
			return models.Errorf(models.EAlreadyExists, "product %s exists", p.SKU)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog.Create: %w", err)
	}
	return &p, nil
}

// RestockTx is Restock for the admin API, inside the caller's transaction
// (which also stores the response under the client's Idempotency-Key).
func (s *Service) RestockTx(tx *gorm.DB, sku string, qty int64) (*models.Product, error) {
	return Restock(tx, sku, qty)
}
