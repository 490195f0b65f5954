package orders

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Filter selects orders for the console's list.
type Filter struct {
	Status   models.OrderStatus
	Email    string // the customer's email, exactly
	IDPrefix string // a prefix of the order id
	// Transaction is a gateway's transaction id or reference of one of
	// the order's payments or callbacks, exactly.
	Transaction string
	From, To    time.Time // created_at window; zero: open
	Before      string    // keyset cursor: ids below it (ids sort by creation time)
	Limit       int
}

// List returns the newest orders matching f (without items) and the
// cursor of the next page ("" on the last).
func (s *Service) List(ctx context.Context, f Filter) ([]models.Order, string, error) {
	q := s.db.WithContext(ctx).Model(&models.Order{})
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Email != "" {
		q = q.Where("customer_email = ?", strings.TrimSpace(f.Email))
	}
	if f.IDPrefix != "" {
		q = q.Where("id LIKE ?", store.LikePrefix(f.IDPrefix))
	}
	if f.Transaction != "" {
		q = q.Where("(id IN (SELECT order_id FROM payments WHERE provider_reference = ?) OR id IN (SELECT order_id FROM payment_callbacks WHERE transaction_id = ?))",
			f.Transaction, f.Transaction)
	}
	var rows []models.Order
	next, err := store.WindowKeyset(q, "orders", "created_at", f.From, f.To, f.Before, f.Limit, &rows,
		func(o models.Order) string { return o.ID })
	if err != nil {
		return nil, "", fmt.Errorf("orders.List: %w", err)
	}
	return rows, next, nil
}

// CustomerEmails are the distinct customer emails of the orders ids
// (at most len(ids) of them): what a viewer's console masks wherever it
// is written on a page that names those orders.
func (s *Service) CustomerEmails(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var emails []string
	err := s.db.WithContext(ctx).Model(&models.Order{}).Distinct("customer_email").Where("id IN ?", ids).Pluck("customer_email", &emails).Error
	if err != nil {
		return nil, fmt.Errorf("orders.CustomerEmails: %w", store.Classify(err))
	}
	return emails, nil
}
