package jobs

import (
	"context"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// expireJob releases the stock of an order still pending at its
// expires_at. Order creation writes its task with models.ExpireTask:
// order:expire:{order_id} (the idempotency key) with an OrderPayload, on
// the default queue, due at expires_at.
func expireJob() Spec {
	return Spec{
		Task:     models.ExpireKind,
		MaxRetry: 25, // it must happen eventually, and a retry of a job that is done costs one read
		Timeout:  time.Minute,
		Handler:  func(d Deps) asynq.HandlerFunc { return d.Guard.Wrap(ExpireEffect(d.Orders)) },
	}
}

// orderExpirer is the part of the orders service the expiry job needs.
type orderExpirer interface {
	ExpireTx(tx *gorm.DB, id string) (bool, error)
}

// ExpireEffect expires a pending order at its expires_at
// (order:expire:{order_id}); an order that is no longer pending is left
// alone.
func ExpireEffect(orders orderExpirer) Effect {
	return func(ctx context.Context, tx *gorm.DB, j Job) (string, error) {
		orderID, err := orderPayload(j)
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
