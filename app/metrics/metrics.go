// Package metrics defines Sekali's Prometheus series (SPEC §8) in one
// registry, served at /metrics. Each series is a package variable so that
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
	// UniqueViolationSaves counts effects that a unique index refused
	// because they had happened before.
	UniqueViolationSaves = counterVec("sekali_unique_violation_saves_total",
		"Effects that a unique index refused because they had already happened, by table.", "table")
)

// Registry holds every Sekali series plus the Go runtime and process ones.
var Registry = newRegistry(
	collectors.NewGoCollector(),
	collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	Callbacks, CallbackDuplicates, CallbackConflicts, CallbackDuration, DeliveryRowsDropped, UniqueViolationSaves,
)

func newRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(cs...)
	return r
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}
