// Package orders creates orders with an all-or-nothing stock reservation,
// reads them, and moves them out of pending by cancel or expiry. Its stock
// functions (Reserve, Release) are the only code that changes
// products.stock for an order, and each change is guarded by a unique
// stock_movements row so it happens at most once.
package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Limits on one order, so that totals cannot overflow and a single
// request cannot lock the whole catalogue.
const (
	MaxItems = 100
	MaxQty   = 1_000_000
)

// Service is the orders capability.
type Service struct {
	db  *gorm.DB
	log *slog.Logger
	now func() time.Time
	ttl time.Duration
}

// NewService returns the orders service. now is the clock; ttl is how long
// a pending order holds its stock.
func NewService(db *gorm.DB, log *slog.Logger, now func() time.Time, ttl time.Duration) *Service {
	return &Service{db: db, log: log, now: now, ttl: ttl}
}

// CreateRequest is the body of POST /api/orders.
type CreateRequest struct {
	CustomerEmail string        `json:"customer_email"`
	Items         []ItemRequest `json:"items"`
}

// ItemRequest is one line of a CreateRequest.
type ItemRequest struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// Validate checks what can be checked without the database.
func (r CreateRequest) Validate() error {
	addr, err := mail.ParseAddress(r.CustomerEmail)
	if err != nil || addr.Address != r.CustomerEmail || addr.Name != "" {
		return models.Errorf(models.EInvalid, "customer_email %q is not an email address", r.CustomerEmail)
	}
	if len(r.Items) == 0 {
		return models.Errorf(models.EInvalid, "items must list at least one item")
	}
	if len(r.Items) > MaxItems {
		return models.Errorf(models.EInvalid, "items may list at most %d items", MaxItems)
	}
	seen := make(map[string]bool, len(r.Items))
	for i, it := range r.Items {
		switch {
		case strings.TrimSpace(it.SKU) == "":
			return models.Errorf(models.EInvalid, "items[%d].sku is empty", i)
		case it.Qty < 1 || it.Qty > MaxQty:
			return models.Errorf(models.EInvalid, "items[%d].qty must be between 1 and %d", i, MaxQty)
		case seen[it.SKU]:
			return models.Errorf(models.EInvalid, "items[%d]: sku %s is listed twice", i, it.SKU)
		}
		seen[it.SKU] = true
	}
	return nil
}

// Create creates an order and reserves its stock, in one transaction.
func (s *Service) Create(ctx context.Context, req CreateRequest) (*models.Order, error) {
	var o *models.Order
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var err error
		o, err = s.CreateTx(tx, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("orders.Create: %w", err)
	}
	return o, nil
}

// CreateTx is Create inside the caller's transaction (which, for example,
// also stores the response under a client's idempotency key). It runs in a
// savepoint: when it fails, nothing it wrote remains.
func (s *Service) CreateTx(tx *gorm.DB, req CreateRequest) (*models.Order, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	items := slices.Clone(req.Items)
	slices.SortFunc(items, func(a, b ItemRequest) int { return strings.Compare(a.SKU, b.SKU) })
	skus := make([]string, len(items))
	for i, it := range items {
		skus[i] = it.SKU
	}

	now := s.now().UTC().Truncate(time.Microsecond) // as PostgreSQL stores it
	o := &models.Order{
		ID:            models.NewOrderID(now),
		CustomerEmail: req.CustomerEmail,
		Status:        models.OrderPending,
		ExpiresAt:     now.Add(s.ttl),
		CreatedAt:     now,
		UpdatedAt:     now,
	}
	err := tx.Transaction(func(tx *gorm.DB) error {
		var products []models.Product
		if err := tx.Where("sku IN ?", skus).Order("sku").Find(&products).Error; err != nil {
			return err
		}
		if len(products) != len(skus) {
			return models.Errorf(models.EInvalid, "unknown sku: %s", missing(skus, products))
		}
		o.Currency = products[0].Currency
		for i, p := range products {
			if p.Currency != o.Currency {
				return models.Errorf(models.EInvalid, "items are priced in different currencies (%s, %s)", o.Currency, p.Currency)
			}
			o.Items = append(o.Items, models.OrderItem{OrderID: o.ID, SKU: p.SKU, Qty: items[i].Qty, UnitPrice: p.Price})
			o.TotalAmount += p.Price * items[i].Qty
		}
		if err := tx.Omit("Items", "Payments", "Invoice").Create(o).Error; err != nil {
			return err
		}
		if err := tx.Create(&o.Items).Error; err != nil {
			return err
		}
		if _, err := Reserve(tx, o.ID, o.Items, models.MovementReserve); err != nil {
			return err
		}
		return outbox.Add(tx, models.ExpireTask(o.ID, o.ExpiresAt))
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

func missing(skus []string, found []models.Product) string {
	have := make(map[string]bool, len(found))
	for _, p := range found {
		have[p.SKU] = true
	}
	var out []string
	for _, s := range skus {
		if !have[s] {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// Get returns the order with its items and payments.
func (s *Service) Get(ctx context.Context, id string) (*models.Order, error) {
	var o models.Order
	err := s.db.WithContext(ctx).
		Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("sku") }).
		Preload("Payments", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).
		Preload("Invoice").
		Take(&o, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("orders.Get: %w", store.Classify(err))
	}
	return &o, nil
}

// Cancel moves a pending order to cancelled and releases its stock.
// Cancelling a cancelled order succeeds again; any other state is an
// invalid transition.
func (s *Service) Cancel(ctx context.Context, id string) (*models.Order, error) {
	var o *models.Order
	err := store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		var err error
		if o, err = Lock(tx, id); err != nil {
			return err
		}
		switch o.Status {
		case models.OrderCancelled:
			return nil
		case models.OrderPending:
			return s.end(tx, o, models.OrderCancelled)
		default:
			return models.Errorf(models.EInvalidTransition, "order %s is %s and can no longer be cancelled", id, o.Status)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("orders.Cancel: %w", err)
	}
	s.log.InfoContext(ctx, "order cancelled", "order_id", id, "status_after", o.Status)
	return o, nil
}

// Expire moves a pending order to expired and releases its stock, as an
// expired payment event would. Any other state is left alone: expired
// reports whether the order changed.
func (s *Service) Expire(ctx context.Context, id string) (expired bool, err error) {
	err = store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		expired, err = s.ExpireTx(tx, id)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("orders.Expire: %w", err)
	}
	return expired, nil
}

// ExpireTx is Expire inside the caller's transaction (the order:expire
// job's, which also marks the job done).
func (s *Service) ExpireTx(tx *gorm.DB, id string) (bool, error) {
	o, err := Lock(tx, id)
	if err != nil || o.Status != models.OrderPending {
		return false, err
	}
	return true, s.end(tx, o, models.OrderExpired)
}

// end moves a locked pending order to a final state and releases its stock.
func (s *Service) end(tx *gorm.DB, o *models.Order, to models.OrderStatus) error {
	if err := Transition(tx, o, to, s.now(), models.OrderPending); err != nil {
		return err
	}
	if err := LoadItems(tx, o); err != nil {
		return err
	}
	return Release(tx, o.ID, o.Items)
}

// Lock reads the order with SELECT … FOR UPDATE: every change to an order
// starts here, so the order row is always the first lock a transaction
// takes (then products, in SKU order). Its items are not loaded: the
// paths that move stock call LoadItems, the others need one query less.
func Lock(tx *gorm.DB, id string) (*models.Order, error) {
	var o models.Order
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&o, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// LoadItems reads o's items, in SKU order, unless they are loaded.
func LoadItems(tx *gorm.DB, o *models.Order) error {
	if o.Items != nil {
		return nil
	}
	return tx.Where("order_id = ?", o.ID).Order("sku").Find(&o.Items).Error
}

// Transition moves o to status `to` with a conditional UPDATE that names
// the states it may leave from. Zero rows updated means the order was not
// in one of them: the caller's view was stale.
func Transition(tx *gorm.DB, o *models.Order, to models.OrderStatus, now time.Time, from ...models.OrderStatus) error {
	now = now.UTC()
	set := map[string]any{"status": to, "updated_at": now}
	if to == models.OrderPaid {
		set["paid_at"] = now
	}
	res := tx.Model(&models.Order{}).Where("id = ? AND status IN ?", o.ID, from).Updates(set)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("orders.Transition %s: %s is not in %v", o.ID, o.Status, from)
	}
	o.Status, o.UpdatedAt = to, now
	if to == models.OrderPaid {
		o.PaidAt = &now
	}
	return nil
}
