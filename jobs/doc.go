// Package jobs runs Sekali's background work on Asynq: the outbox relay,
// the guarded business handlers (invoices, emails, order expiry, refunds sent
// to the gateway) and the
// periodic maintenance tasks. Only this package and cmd/ import Asynq.
//
// Each job is one file: its typed args (kind, queue, key), its Spec
// (retries, timeout) and its handler — invoice.go, email.go, expire.go,
// refund.go —
// or a periodic Spec and its handler (maintenance.go, reconcile.go);
// specs in spec.go lists them, and the mux, the enqueue options and the
// schedule are built from that list. The app packages that cause a
// business task (orders, payments, refunds) write its outbox row in the same
// transaction as the state change, through Tasks (task.go): they declare
// the part they need and do not import this package.
package jobs
