package jobs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// Stats reports, on each scrape, what only the database knows: the
// outbox backlog (pending rows that are due) and the age of its oldest
// row, and the processing jobs past their lease.
type Stats struct {
	db         *gorm.DB
	backlog    *prometheus.Desc
	oldest     *prometheus.Desc
	stuck      *prometheus.Desc
	processing *prometheus.Desc
}

// NewStats returns the collector; register it with metrics.Registry.
func NewStats(db *gorm.DB) *Stats {
	return &Stats{
		db:         db,
		backlog:    prometheus.NewDesc("sekali_outbox_backlog", "Outbox rows that are due and not yet handed to the queue.", nil, nil),
		oldest:     prometheus.NewDesc("sekali_outbox_oldest_age_seconds", "Age of the oldest due outbox row not yet handed to the queue.", nil, nil),
		stuck:      prometheus.NewDesc("sekali_jobs_stuck", "Processing jobs past their lease (locked_until).", nil, nil),
		processing: prometheus.NewDesc("sekali_jobs_processing", "Jobs being processed now.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *Stats) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.backlog
	ch <- s.oldest
	ch <- s.stuck
	ch <- s.processing
}

// Collect implements prometheus.Collector; a failed query reports nothing.
func (s *Stats) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var outbox struct {
		Backlog int64
		Oldest  float64
	}
	err := s.db.WithContext(ctx).Model(&models.OutboxMessage{}).
		Select("count(*) AS backlog, coalesce(extract(epoch FROM now() - min(process_at)), 0) AS oldest").
		Where("status = ? AND process_at <= now()", models.OutboxPending).Scan(&outbox).Error
	if err == nil {
		ch <- prometheus.MustNewConstMetric(s.backlog, prometheus.GaugeValue, float64(outbox.Backlog))
		ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, outbox.Oldest)
	}
	var jobs struct {
		Processing int64
		Stuck      int64
	}
	err = s.db.WithContext(ctx).Model(&models.JobExecution{}).
		Select("count(*) AS processing, count(*) FILTER (WHERE locked_until < now()) AS stuck").
		Where("status = ?", models.JobProcessing).Scan(&jobs).Error
	if err == nil {
		ch <- prometheus.MustNewConstMetric(s.processing, prometheus.GaugeValue, float64(jobs.Processing))
		ch <- prometheus.MustNewConstMetric(s.stuck, prometheus.GaugeValue, float64(jobs.Stuck))
	}
}
