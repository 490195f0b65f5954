package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/invoices"
	"github.com/sekali/sekali/models"
)

// InvoiceEffect issues the invoice of a paid order (invoice:generate:{order_id}).
func InvoiceEffect(now func() time.Time) Effect {
	return func(ctx context.Context, tx *gorm.DB, t *asynq.Task) (string, error) {
		orderID, err := orderPayload(t)
		if err != nil {
			return "", err
		}
		inv, _, err := invoices.IssueTx(tx, orderID, now())
		if err != nil {
			return "", skipIfGone(err)
		}
		if inv == nil {
			return "not paid: nothing to invoice", nil
		}
		return inv.Number, nil
	}
}

// skipIfGone makes "the order does not exist" a permanent failure.
func skipIfGone(err error) error {
	if models.ErrorCode(err) == models.ENotFound {
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return err
}
