package jobs

import (
	"context"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/models"
)

// Gauges returns the collectors of the gauges every process reports,
// read at each scrape from PostgreSQL and Redis: serve registers them in
// its metrics.Set.Registry, and the deploy checks read the names they
// export from them.
func Gauges(db *gorm.DB, inspector *asynq.Inspector) []prometheus.Collector {
	return []prometheus.Collector{NewStats(db), NewQueueStats(inspector)}
}

// Stats reports, on each scrape, what only the database knows: the
// outbox backlog (pending rows that are due) and the age of its oldest
// row, the processing jobs past their lease, and the verdict of the
// latest integrity audit (so that a red audit can page someone instead
// of waiting for someone to look; nothing before the first run).
type Stats struct {
	db              *gorm.DB
	backlog         *prometheus.Desc
	oldest          *prometheus.Desc
	stuck           *prometheus.Desc
	processing      *prometheus.Desc
	auditOK         *prometheus.Desc
	auditViolations *prometheus.Desc
	auditRanAt      *prometheus.Desc
}

// NewStats returns the collector; register it in the process's metrics.Set.Registry.
func NewStats(db *gorm.DB) *Stats {
	return &Stats{
		db:         db,
		backlog:    prometheus.NewDesc("sekali_outbox_backlog", "Outbox rows that are due and not yet handed to the queue.", nil, nil),
		oldest:     prometheus.NewDesc("sekali_outbox_oldest_age_seconds", "Age of the oldest due outbox row not yet handed to the queue.", nil, nil),
		stuck:      prometheus.NewDesc("sekali_jobs_stuck", "Processing jobs past their lease (locked_until).", nil, nil),
		processing: prometheus.NewDesc("sekali_jobs_processing", "Jobs being processed now.", nil, nil),
		auditOK:    prometheus.NewDesc("sekali_audit_last_ok", "1 when the latest integrity audit was green, 0 when it was red.", nil, nil),
		auditViolations: prometheus.NewDesc("sekali_audit_last_violations",
			"Violations the latest integrity audit found.", nil, nil),
		auditRanAt: prometheus.NewDesc("sekali_audit_last_run_timestamp_seconds",
			"When the latest integrity audit ran (Unix time).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *Stats) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.backlog
	ch <- s.oldest
	ch <- s.stuck
	ch <- s.processing
	ch <- s.auditOK
	ch <- s.auditViolations
	ch <- s.auditRanAt
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
	if last, err := audit.Latest(ctx, s.db); err == nil && last != nil {
		ok := 0.0
		if last.OK {
			ok = 1
		}
		ch <- prometheus.MustNewConstMetric(s.auditOK, prometheus.GaugeValue, ok)
		ch <- prometheus.MustNewConstMetric(s.auditViolations, prometheus.GaugeValue, float64(last.Violations))
		ch <- prometheus.MustNewConstMetric(s.auditRanAt, prometheus.GaugeValue, float64(last.CreatedAt.Unix()))
	}
}

// QueueStats reports Asynq's own view of each queue on each scrape: tasks
// by state, and the age of the oldest pending task. The archived count is
// the one to alert on: those are jobs that gave up.
type QueueStats struct {
	inspector *asynq.Inspector
	tasks     *prometheus.Desc
	latency   *prometheus.Desc
}

// NewQueueStats returns the collector; register it in the process's metrics.Set.Registry.
func NewQueueStats(inspector *asynq.Inspector) *QueueStats {
	return &QueueStats{
		inspector: inspector,
		tasks:     prometheus.NewDesc("sekali_queue_tasks", "Asynq tasks by queue and state.", []string{"queue", "state"}, nil),
		latency:   prometheus.NewDesc("sekali_queue_latency_seconds", "Age of the oldest pending task, by queue.", []string{"queue"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (q *QueueStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.tasks
	ch <- q.latency
}

// Collect implements prometheus.Collector; a queue Redis cannot report on
// is left out.
func (q *QueueStats) Collect(ch chan<- prometheus.Metric) {
	for queue := range QueueWeights() {
		info, err := q.inspector.GetQueueInfo(queue)
		if err != nil {
			continue // the queue has never been used, or Redis is away
		}
		for state, n := range map[string]int{
			"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled,
			"retry": info.Retry, "archived": info.Archived, "completed": info.Completed,
		} {
			ch <- prometheus.MustNewConstMetric(q.tasks, prometheus.GaugeValue, float64(n), queue, state)
		}
		ch <- prometheus.MustNewConstMetric(q.latency, prometheus.GaugeValue, info.Latency.Seconds(), queue)
	}
}
