package jobs

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/invoices"
	"github.com/sekali/sekali/app/metrics"
)

// TaskInvoiceGenerate issues the invoice of a paid order.
const TaskInvoiceGenerate = "invoice:generate"

// InvoiceArgs are the args of invoice:generate:{order_id}, on the critical
// queue. The callback that paid the order writes the task (Tasks.Paid);
// RequestID is that delivery's request id, so the job's log lines follow
// the payment from its callback.
type InvoiceArgs struct {
	OrderID   string `json:"order_id"`
	RequestID string `json:"request_id,omitempty"`
}

// Kind is invoice:generate on the critical queue.
func (InvoiceArgs) Kind() Kind { return Kind{Type: TaskInvoiceGenerate, Queue: QueueCritical} }

// Key is the order id.
func (a InvoiceArgs) Key() string { return a.OrderID }

// invoiceJob issues the invoice of a paid order, once.
func invoiceJob() Spec {
	return Spec{
		Task:     InvoiceArgs{}.Kind(),
		MaxRetry: 25, // it must happen eventually, and a retry of a job that is done costs one read
		Timeout:  time.Minute,
		Guarded:  func(d Deps) (Prepare, Effect) { return nil, InvoiceEffect(d.Now, d.Metrics) },
	}
}

// InvoiceEffect issues the invoice of a paid order (invoice:generate:{order_id}).
// An invoice found issued counts in m as a save of the invoices table.
func InvoiceEffect(now func() time.Time, m *metrics.Set) Effect {
	return func(ctx context.Context, tx *gorm.DB, j Job) (string, error) {
		args, err := decode[InvoiceArgs](j)
		if err != nil {
			return "", err
		}
		inv, created, err := invoices.IssueTx(tx, args.OrderID, now())
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
