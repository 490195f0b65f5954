package jobs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// TaskRefundSend asks a gateway for one refund an admin asked for.
const TaskRefundSend = "refund:send"

// RefundArgs are the args of refund:send:{request_id}, on the critical
// queue (money is owed to a customer). Asking for a refund writes the
// task (Tasks.Refund) beside the refund record.
type RefundArgs struct {
	RequestID int64  `json:"request_id"`
	OrderID   string `json:"order_id"`
}

// Kind is refund:send on the critical queue.
func (RefundArgs) Kind() Kind { return Kind{Type: TaskRefundSend, Queue: QueueCritical} }

// Key is the refund request's id; "" without one.
func (a RefundArgs) Key() string {
	if a.RequestID <= 0 {
		return ""
	}
	return strconv.FormatInt(a.RequestID, 10)
}

// RefundSender is the part of the refunds service the job needs
// (refunds.Service).
type RefundSender interface {
	Send(ctx context.Context, id int64) (*models.GatewayRequest, error)
}

// refundJob asks the gateway for a refund until it answers definitely.
// The call itself is made exactly once in effect by the refund's own
// row (its lease, and the provider idempotency key every repeat
// carries); the guard makes the job's bookkeeping once.
func refundJob() Spec {
	return Spec{
		Task: RefundArgs{}.Kind(),
		// A refund that the gateway has not answered must be asked again
		// until it does: the retries grow to ten minutes apart (RetryDelay).
		MaxRetry: 50,
		Timeout:  2 * time.Minute,
		Handler: func(d Deps) asynq.HandlerFunc {
			return d.Guard.WrapPrepared(RefundPrepare(d.Refunds), RefundEffect())
		},
	}
}

// RefundPrepare is the call to the gateway, outside any transaction: it
// returns an error, and the job is tried again, while the refund is not
// done or failed (refunds.Service.Send).
func RefundPrepare(refunds RefundSender) Prepare {
	return func(ctx context.Context, j Job) error {
		args, err := decode[RefundArgs](j)
		if err != nil {
			return err
		}
		if refunds == nil {
			return fmt.Errorf("this worker cannot send refunds")
		}
		if _, err := refunds.Send(ctx, args.RequestID); err != nil {
			return skipIfGone(err)
		}
		return nil
	}
}

// RefundEffect completes the job once its refund is over: done or
// failed, as Prepare left it.
func RefundEffect() Effect {
	return func(ctx context.Context, tx *gorm.DB, j Job) (string, error) {
		args, err := decode[RefundArgs](j)
		if err != nil {
			return "", err
		}
		var r models.GatewayRequest
		if err := tx.Take(&r, "id = ? AND kind = ?", args.RequestID, models.GatewayRefund).Error; err != nil {
			return "", err
		}
		switch r.Phase {
		case models.GatewayDone:
			return "refunded " + r.ProviderObjectID, nil
		case models.GatewayFailed:
			return "refused by the gateway", nil
		}
		return "", fmt.Errorf("refund %d is still %s", r.ID, r.Phase)
	}
}
