package jobs

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// TaskOrderExpire releases the stock of an order still pending at its
// expires_at.
const TaskOrderExpire = "order:expire"

// ExpireArgs are the args of order:expire:{order_id}, on the default
// queue. Order creation writes the task, due at the order's expires_at
// (Tasks.Expire).
type ExpireArgs struct {
	OrderID string `json:"order_id"`
}

// Kind is order:expire on the default queue.
func (ExpireArgs) Kind() Kind { return Kind{Type: TaskOrderExpire, Queue: QueueDefault} }

// Key is the order id.
func (a ExpireArgs) Key() string { return a.OrderID }

// expireJob expires an order still pending at its expires_at, once.
func expireJob() Spec {
	return Spec{
		Task:     ExpireArgs{}.Kind(),
		MaxRetry: 25, // it must happen eventually, and a retry of a job that is done costs one read
		Timeout:  time.Minute,
		Guarded:  func(d Deps) (Prepare, Effect) { return nil, ExpireEffect(d.Orders) },
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
		args, err := decode[ExpireArgs](j)
		if err != nil {
			return "", err
		}
		expired, err := orders.ExpireTx(tx, args.OrderID)
		if err != nil {
			return "", skipIfGone(err)
		}
		if expired {
			return "expired", nil
		}
		return "no longer pending", nil
	}
}
