package jobs

import (
	"context"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/invoices"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/models"
)

// invoiceJob issues the invoice of a paid order, once. The paid callback
// writes its task with models.InvoiceTask: invoice:generate:{order_id}
// (the idempotency key) with an OrderPayload, on the critical queue.
func invoiceJob() Spec {
	return Spec{
		Task:     models.InvoiceKind,
		MaxRetry: 25, // it must happen eventually, and a retry of a job that is done costs one read
		Timeout:  time.Minute,
		Handler:  func(d Deps) asynq.HandlerFunc { return d.Guard.Wrap(InvoiceEffect(d.Guard.now, d.Guard.metrics)) },
	}
}

// InvoiceEffect issues the invoice of a paid order (invoice:generate:{order_id}).
// An invoice found issued counts in m as a save of the invoices table.
func InvoiceEffect(now func() time.Time, m *metrics.Set) Effect {
	return func(ctx context.Context, tx *gorm.DB, j Job) (string, error) {
		orderID, err := orderPayload(j)
		if err != nil {
			return "", err
		}
		inv, created, err := invoices.IssueTx(tx, orderID, now())
		if err != nil {
			return "", skipIfGone(err)
		}
		if inv == nil {
			return "not paid: nothing to invoice", nil
		}
		if !created {
			m.UniqueViolationSaves.WithLabelValues("invoices").Inc()
		}
		return inv.Number, nil
	}
}
