package jobs

import (
	"context"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"
)

// orderExpirer is the part of the orders service the expiry job needs.
type orderExpirer interface {
	ExpireTx(tx *gorm.DB, id string) (bool, error)
}

// ExpireEffect expires a pending order at its expires_at
// (order:expire:{order_id}); an order that is no longer pending is left
// alone.
func ExpireEffect(orders orderExpirer) Effect {
	return func(ctx context.Context, tx *gorm.DB, t *asynq.Task) (string, error) {
		orderID, err := orderPayload(t)
		if err != nil {
			return "", err
		}
		expired, err := orders.ExpireTx(tx, orderID)
		if err != nil {
			return "", skipIfGone(err)
		}
		if expired {
			return "expired", nil
		}
		return "no longer pending", nil
	}
}
