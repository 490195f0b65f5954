// Package jobs runs Sekali's background work on Asynq: the outbox relay,
// the guarded business handlers (invoices, emails, order expiry) and the
// periodic maintenance tasks. Only this package and cmd/ import Asynq.
//
// Each job is a Spec beside its handler (invoice.go, email.go, expire.go,
// maintenance.go, reconcile.go), and specs in spec.go lists them; the mux,
// the enqueue options and the schedule are built from that list. The
// outbox writers in app/ write the business tasks into outbox_messages in
// the same transaction as the state change that causes them, with
// models.InvoiceTask, models.EmailTask and models.ExpireTask, whose
// models.TaskKind the specs hold too.
package jobs
