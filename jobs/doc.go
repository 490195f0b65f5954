// Package jobs runs Sekali's background work on Asynq: the outbox relay,
// the guarded business handlers (invoices, emails, order expiry) and the
// periodic maintenance tasks. Only this package and cmd/ import Asynq.
//
// The callback pipeline already writes the tasks into outbox_messages in
// the same transaction as the state change that causes them; see
// models.InvoiceTask, models.EmailTask and models.ExpireTask.
package jobs
