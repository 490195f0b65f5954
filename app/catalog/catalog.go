// Package catalog creates products and changes their stock outside of
// orders: seeding and restocking. Every change of products.stock here is
// written together with an `adjust` stock movement, so the audit can add
// them up.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

var skuPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Demo are the products `sekali seed` creates, each with a cap on the
// units one order may hold, so that no buyer can hold all of one unpaid.
var Demo = []models.Product{
	{SKU: "DEMO-TSHIRT", Name: "Sekali T-shirt", Price: 150000, Currency: "IDR", Stock: 100, MaxPerOrder: Units(10)},
	{SKU: "DEMO-MUG", Name: "Sekali mug", Price: 75000, Currency: "IDR", Stock: 50, MaxPerOrder: Units(10)},
	{SKU: "DEMO-LIMITED", Name: "Sekali limited print", Price: 250000, Currency: "IDR", Stock: 3, MaxPerOrder: Units(1)},
}

// Units is a MaxPerOrder of n.
func Units(n int64) *int64 { return &n }

// Validate checks a new product.
func Validate(p models.Product) error {
	switch {
	case !skuPattern.MatchString(p.SKU):
		return models.Errorf(models.EInvalid, "sku %q must be 1-64 letters, digits, '.', '_' or '-'", p.SKU)
	case p.Name == "":
		return models.Errorf(models.EInvalid, "name is required")
	case !models.CleanText(p.Name) || len(p.Name) > 200:
		return models.Errorf(models.EInvalid, "name must be at most 200 bytes of text without NUL")
	case p.Price < 0 || p.Price > models.MaxPrice:
		return models.Errorf(models.EInvalid, "price must be 0 to %d minor units", int64(models.MaxPrice))
	case p.Stock < 0 || p.Stock > models.MaxStock:
		return models.Errorf(models.EInvalid, "stock must be 0 to %d", int64(models.MaxStock))
	case !models.ValidCurrency(p.Currency):
		return models.Errorf(models.EInvalid, "currency must be an ISO 4217 code such as IDR")
	}
	return validMaxPerOrder(p.MaxPerOrder)
}

func validMaxPerOrder(n *int64) error {
	if n != nil && (*n < 1 || *n > models.MaxQty) {
		return models.Errorf(models.EInvalid, "max_per_order must be 1 to %d units, or none", models.MaxQty)
	}
	return nil
}

// SetMaxPerOrder caps the units of sku one order may hold (nil: no cap of
// its own), in tx; it returns the product as it is now.
func SetMaxPerOrder(tx *gorm.DB, sku string, n *int64) (*models.Product, error) {
	if err := validMaxPerOrder(n); err != nil {
		return nil, err
	}
	var p models.Product
	res := tx.Model(&p).Clauses(clause.Returning{}).Where("sku = ?", sku).Update("max_per_order", n)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 0 {
		return nil, models.Errorf(models.ENotFound, "no product %s", sku)
	}
	return &p, nil
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
	if qty < 1 || qty > models.MaxRestock {
		return nil, models.Errorf(models.EInvalid, "qty must be 1 to %d", int64(models.MaxRestock))
	}
	if !skuPattern.MatchString(sku) {
		return nil, models.Errorf(models.ENotFound, "no product %q", sku)
	}
	var p models.Product
	err := tx.Transaction(func(tx *gorm.DB) error {
		// stock ≤ MaxStock and qty ≤ MaxRestock: the sum cannot overflow.
		res := tx.Model(&p).Clauses(clause.Returning{}).Where("sku = ? AND stock + ? <= ?", sku, qty, int64(models.MaxStock)).
			Updates(map[string]any{"stock": gorm.Expr("stock + ?", qty), "updated_at": gorm.Expr("now()")})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			var n int64
			if err := tx.Model(&models.Product{}).Where("sku = ?", sku).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return models.Errorf(models.EInvalid, "%s would hold more than %d units", sku, int64(models.MaxStock))
			}
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
	var created *models.Product
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var err error
		created, err = s.createTx(tx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog.Create: %w", err)
	}
	return created, nil
}

// CreateOnce is Create under an Idempotency-Key (the console's form): the
// product and the answer made of it commit together.
func (s *Service) CreateOnce(ctx context.Context, once idempotency.Once, p models.Product, answer idempotency.Answer[*models.Product]) (idempotency.Response, error) {
	return once.Do(ctx, func(tx *gorm.DB) (idempotency.Response, error) {
		return answer(s.createTx(tx, p))
	})
}

func (s *Service) createTx(tx *gorm.DB, p models.Product) (*models.Product, error) {
	created, err := Create(tx, &p)
	if err == nil && !created {
		return nil, models.Errorf(models.EAlreadyExists, "product %s exists", p.SKU)
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// RestockOnce adds qty units of sku under an Idempotency-Key (the admin
// API's and the console's restock): the adjust movement and the answer
// made of it commit together, so a retried restock adds nothing more.
func (s *Service) RestockOnce(ctx context.Context, once idempotency.Once, sku string, qty int64, answer idempotency.Answer[*models.Product]) (idempotency.Response, error) {
	return once.Do(ctx, func(tx *gorm.DB) (idempotency.Response, error) {
		return answer(Restock(tx, sku, qty))
	})
}

// SetMaxPerOrder is the package's SetMaxPerOrder in its own transaction.
func (s *Service) SetMaxPerOrder(ctx context.Context, sku string, n *int64) (*models.Product, error) {
	var p *models.Product
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var err error
		p, err = SetMaxPerOrder(tx, sku, n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog.SetMaxPerOrder: %w", err)
	}
	return p, nil
}

// List returns every product, by SKU. The catalogue is small: it is not
// paginated.
func (s *Service) List(ctx context.Context) ([]models.Product, error) {
	var ps []models.Product
	if err := s.db.WithContext(ctx).Order("sku").Limit(1000).Find(&ps).Error; err != nil {
		return nil, fmt.Errorf("catalog.List: %w", store.Classify(err))
	}
	return ps, nil
}

// Get returns the product sku.
func (s *Service) Get(ctx context.Context, sku string) (*models.Product, error) {
	if !skuPattern.MatchString(sku) {
		return nil, models.Errorf(models.ENotFound, "no product %q", sku)
	}
	var p models.Product
	err := s.db.WithContext(ctx).Take(&p, "sku = ?", sku).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no product %q", sku)
	}
	if err != nil {
		return nil, fmt.Errorf("catalog.Get: %w", store.Classify(err))
	}
	return &p, nil
}

// Ledger returns sku's stock movements, newest first, and the cursor of
// the next page (0 on the last).
func (s *Service) Ledger(ctx context.Context, sku string, before int64, limit int) ([]models.StockMovement, int64, error) {
	if !skuPattern.MatchString(sku) {
		return nil, 0, models.Errorf(models.ENotFound, "no product %q", sku)
	}
	q := s.db.WithContext(ctx).Model(&models.StockMovement{}).Where("sku = ?", sku)
	var rows []models.StockMovement
	next, err := store.Keyset(q, before, limit, &rows, func(m models.StockMovement) int64 { return m.ID })
	if err != nil {
		return nil, 0, fmt.Errorf("catalog.Ledger: %w", err)
	}
	return rows, next, nil
}
