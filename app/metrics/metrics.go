// Package metrics defines Sekali's Prometheus series (the table in
// docs/api.md#get-metrics). serve builds one Set per process and hands it
// to the services that count; /metrics serves its Registry. A test builds
// a Set of its own, so the counts it reads are its own.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Set is one process's series, named after what they count.
type Set struct {
	// Callbacks counts callback deliveries by provider and result
	// (processed, stale, duplicate, conflict, rejected, error, or the
	// refusal: invalid_signature, ...).
	Callbacks *prometheus.CounterVec
	// CallbackDuplicates counts deliveries of an event that was already recorded.
	CallbackDuplicates *prometheus.CounterVec
	// CallbackConflicts counts deliveries that reused an event id with another payload.
	CallbackConflicts *prometheus.CounterVec
	// CallbackDuration observes the time from request to response.
	CallbackDuration *prometheus.HistogramVec
	// DeliveryRowsDropped counts callback_deliveries rows of non-applying
	// deliveries that could not be written (queue full, database down).
	DeliveryRowsDropped prometheus.Counter
	// RefusedRowsSkipped counts refused deliveries (a bad signature, a
	// malformed body) over the row budget: counted here and in
	// sekali_callbacks_total, not written to callback_deliveries.
	RefusedRowsSkipped prometheus.Counter
	// UniqueViolationSaves counts effects found already done, by the table
	// whose unique index (or row) says so: payment_callbacks (a repeated
	// event), stock_movements (a second release), invoices, outbound_emails.
	UniqueViolationSaves *prometheus.CounterVec

	// JobRuns counts business job runs by type and outcome: succeeded,
	// duplicate_ignored, failed, fenced (a newer claimant owned the job),
	// lock_busy (another worker holds its lock), lock_lost.
	JobRuns *prometheus.CounterVec
	// JobRetries counts runs that were a retry of an earlier one.
	JobRetries *prometheus.CounterVec
	// JobDuration observes how long business jobs ran.
	JobDuration *prometheus.HistogramVec
	// LockFailures counts jobs that found their lock held by another worker.
	LockFailures *prometheus.CounterVec
	// StuckJobsSwept counts processing jobs past their lease that the sweeper failed.
	StuckJobsSwept prometheus.Counter
	// OutboxDispatched counts outbox rows handed to the queue (a task id
	// the queue already had counts too).
	OutboxDispatched *prometheus.CounterVec
	// OutboxReconciled counts tasks the queue had lost and the reconciler
	// handed over again.
	OutboxReconciled *prometheus.CounterVec
	// OutboxErrors counts failed attempts to hand an outbox row to the queue.
	OutboxErrors prometheus.Counter

	// GatewayCalls counts Sekali's calls to a gateway's API (payment
	// pages, refunds) by provider, kind and what the gateway answered:
	// done, refused (its "no"), unanswered (a timeout, a 5xx: repeated
	// later with the same key), conflict (an object of another amount or
	// currency than asked: not applied).
	GatewayCalls *prometheus.CounterVec
	// StatusRequests counts the status poll's (and the catch-up's)
	// requests to a gateway's status API by provider and result:
	// answered (found or not), failed (an error status, a broken
	// answer, no answer).
	StatusRequests *prometheus.CounterVec
	// RefundsFailed counts refunds a gateway reported failed or canceled
	// (its notification, or its answer to Sekali's call), by provider.
	RefundsFailed *prometheus.CounterVec

	// Registry holds every series above plus the Go runtime and process
	// ones; register a process's own collectors here too.
	Registry *prometheus.Registry
}

// New returns a Set of fresh series, registered in a registry of its own.
func New() *Set {
	s := &Set{
		Callbacks: counterVec("sekali_callbacks_total",
			"Callback deliveries by provider and result.", "provider", "result"),
		CallbackDuplicates: counterVec("sekali_callback_duplicates_total",
			"Deliveries of an already recorded event.", "provider"),
		CallbackConflicts: counterVec("sekali_callback_conflicts_total",
			"Deliveries that reused an event id with a different payload.", "provider"),
		CallbackDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sekali_callback_duration_seconds",
			Help:    "Time to answer a callback delivery, by provider and result.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"provider", "result"}),
		DeliveryRowsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sekali_callback_delivery_rows_dropped_total",
			Help: "Audit rows of deliveries that changed nothing and could not be written.",
		}),
		RefusedRowsSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sekali_callback_refused_rows_skipped_total",
			Help: "Refused callback deliveries over the row budget of their client address: counted, not written.",
		}),
		UniqueViolationSaves: counterVec("sekali_unique_violation_saves_total",
			"Effects that a unique index refused because they had already happened, by table.", "table"),

		JobRuns:    counterVec("sekali_job_runs_total", "Business job runs by type and outcome.", "type", "outcome"),
		JobRetries: counterVec("sekali_job_retries_total", "Business job runs that were retries, by type.", "type"),
		JobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sekali_job_duration_seconds",
			Help:    "Duration of business job runs, by type.",
			Buckets: prometheus.DefBuckets,
		}, []string{"type"}),
		LockFailures: counterVec("sekali_job_lock_failures_total", "Jobs whose Redis lock was held by another worker, by type.", "type"),
		StuckJobsSwept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sekali_stuck_jobs_swept_total", Help: "Processing jobs past their lease that the sweeper marked failed.",
		}),
		OutboxDispatched: counterVec("sekali_outbox_dispatched_total", "Outbox rows handed to the queue, by task type.", "type"),
		OutboxReconciled: counterVec("sekali_outbox_reconciled_total", "Dispatched tasks the queue had lost, dispatched again, by task type.", "type"),
		OutboxErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sekali_outbox_errors_total", Help: "Failed attempts to hand an outbox row to the queue.",
		}),
		GatewayCalls: counterVec("sekali_gateway_calls_total",
			"Calls to a gateway's API by provider, kind and answer: done, refused, unanswered, conflict.", "provider", "kind", "result"),
		StatusRequests: counterVec("sekali_status_requests_total",
			"Requests to a gateway's status API (the status poll, the catch-up) by provider and result: answered, failed.", "provider", "result"),
		RefundsFailed: counterVec("sekali_refunds_failed_total",
			"Refunds a gateway reported failed or canceled, by provider.", "provider"),
		Registry: prometheus.NewRegistry(),
	}
	s.Registry.MustRegister(s.Collectors()...)
	return s
}

// Collectors returns every collector New registers: the Go runtime and
// process ones, then the Set's own series. The deploy checks read the
// names the server exports from it.
func (s *Set) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		s.Callbacks, s.CallbackDuplicates, s.CallbackConflicts, s.CallbackDuration, s.DeliveryRowsDropped, s.RefusedRowsSkipped, s.UniqueViolationSaves,
		s.JobRuns, s.JobRetries, s.JobDuration, s.LockFailures, s.StuckJobsSwept, s.OutboxDispatched, s.OutboxReconciled, s.OutboxErrors,
		s.GatewayCalls, s.StatusRequests, s.RefundsFailed,
	}
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}
