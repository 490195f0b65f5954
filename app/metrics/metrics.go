// Package metrics defines Sekali's Prometheus series (the table in
// docs/api.md#get-metrics) in one registry, served at /metrics. Each series is a package variable so that
// the code that counts reads like what it counts.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

var (
	// Callbacks counts callback deliveries by provider and result
	// (processed, stale, duplicate, conflict, rejected, error, or the
	// refusal: invalid_signature, ...).
	Callbacks = counterVec("sekali_callbacks_total",
		"Callback deliveries by provider and result.", "provider", "result")
	// CallbackDuplicates counts deliveries of an event that was already recorded.
	CallbackDuplicates = counterVec("sekali_callback_duplicates_total",
		"Deliveries of an already recorded event.", "provider")
	// CallbackConflicts counts deliveries that reused an event id with another payload.
	CallbackConflicts = counterVec("sekali_callback_conflicts_total",
		"Deliveries that reused an event id with a different payload.", "provider")
	// CallbackDuration observes the time from request to response.
	CallbackDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sekali_callback_duration_seconds",
		Help:    "Time to answer a callback delivery, by provider and result.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"provider", "result"})
	// DeliveryRowsDropped counts callback_deliveries rows of non-applying
	// deliveries that could not be written (queue full, database down).
	DeliveryRowsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sekali_callback_delivery_rows_dropped_total",
		Help: "Audit rows of deliveries that changed nothing and could not be written.",
	})
	// UniqueViolationSaves counts effects found already done, by the table
	// whose unique index (or row) says so: payment_callbacks (a repeated
	// event), stock_movements (a second release), invoices, outbound_emails.
	UniqueViolationSaves = counterVec("sekali_unique_violation_saves_total",
		"Effects that a unique index refused because they had already happened, by table.", "table")
)

// Jobs and the outbox.
var (
	// JobRuns counts business job runs by type and outcome: succeeded,
	// duplicate_ignored, failed, fenced (a newer claimant owned the job),
	// lock_busy (another worker holds its lock), lock_lost.
	JobRuns = counterVec("sekali_job_runs_total", "Business job runs by type and outcome.", "type", "outcome")
	// JobRetries counts runs that were a retry of an earlier one.
	JobRetries = counterVec("sekali_job_retries_total", "Business job runs that were retries, by type.", "type")
	// JobDuration observes how long business jobs ran.
	JobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sekali_job_duration_seconds",
		Help:    "Duration of business job runs, by type.",
		Buckets: prometheus.DefBuckets,
	}, []string{"type"})
	// LockFailures counts jobs that found their lock held by another worker.
	LockFailures = counterVec("sekali_job_lock_failures_total", "Jobs whose Redis lock was held by another worker, by type.", "type")
	// StuckJobsSwept counts processing jobs past their lease that the sweeper failed.
	StuckJobsSwept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sekali_stuck_jobs_swept_total", Help: "Processing jobs past their lease that the sweeper marked failed.",
	})
	// OutboxDispatched counts outbox rows handed to the queue (a task id
	// the queue already had counts too).
	OutboxDispatched = counterVec("sekali_outbox_dispatched_total", "Outbox rows handed to the queue, by task type.", "type")
	// OutboxReconciled counts tasks the queue had lost and the reconciler
	// handed over again.
	OutboxReconciled = counterVec("sekali_outbox_reconciled_total", "Dispatched tasks the queue had lost, dispatched again, by task type.", "type")
	// OutboxErrors counts failed attempts to hand a row to the queue.
	OutboxErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sekali_outbox_errors_total", Help: "Failed attempts to hand an outbox row to the queue.",
	})
)

// Registry holds every Sekali series plus the Go runtime and process ones.
var Registry = newRegistry(
	collectors.NewGoCollector(),
	collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	Callbacks, CallbackDuplicates, CallbackConflicts, CallbackDuration, DeliveryRowsDropped, UniqueViolationSaves,
	JobRuns, JobRetries, JobDuration, LockFailures, StuckJobsSwept, OutboxDispatched, OutboxReconciled, OutboxErrors,
)

func newRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(cs...)
	return r
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}
