package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
)

// TaskAlertsWatch is the maintenance task that raises the alerts no
// single transaction causes.
const TaskAlertsWatch = "alerts:watch"

func watchJob() Spec {
	return periodic(TaskAlertsWatch, time.Minute, func(d Deps) asynq.HandlerFunc { return d.Watch.Check })
}

// archivedPage is how many of a queue's newest archived tasks one look
// reads: a window's worth, or more than an alert needs to name.
const archivedPage = 100

// Watch raises, once a minute, the alerts that are seen rather than
// caused: bursts of conflicts, gateways not answering, refunds refused
// (alerts.Detect), and tasks the queue gave up on. Each is keyed by what
// it is about (a refund, a window), so a second look raises nothing.
type Watch struct {
	db   *gorm.DB
	insp *asynq.Inspector
	log  *slog.Logger
	now  func() time.Time
}

// NewWatch returns the watch; insp reads the archived tasks.
func NewWatch(db *gorm.DB, insp *asynq.Inspector, log *slog.Logger, now func() time.Time) *Watch {
	return &Watch{db: db, insp: insp, log: log, now: now}
}

// Check is the maintenance task's handler.
func (w *Watch) Check(ctx context.Context, _ *asynq.Task) error {
	_, err := w.Once(ctx)
	return err
}

// Once looks once and returns how many alerts it raised.
func (w *Watch) Once(ctx context.Context) (int, error) {
	now := w.now().UTC()
	raised, derr := alerts.Detect(ctx, w.db, Tasks{}, now)
	events, aerr := w.archived(now)
	if aerr == nil && len(events) > 0 {
		aerr = w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			for _, e := range events {
				ok, err := alerts.Raise(tx, Tasks{}, e)
				if err != nil {
					return err
				}
				if ok {
					raised++
				}
			}
			return nil
		})
	}
	if raised > 0 {
		w.log.WarnContext(ctx, "alerts raised", "count", raised)
	}
	return raised, errors.Join(derr, aerr)
}

// archived is a jobs.archived alert per window (this one and the last)
// in which the queue gave up on a task.
func (w *Watch) archived(now time.Time) ([]alerts.Event, error) {
	byWindow := map[time.Time][]string{}
	since := now.Truncate(alerts.Window).Add(-alerts.Window)
	existing, err := w.insp.Queues()
	if err != nil {
		return nil, fmt.Errorf("archived tasks: %w", err)
	}
	for _, q := range queueNames() {
		if !slices.Contains(existing, q) {
			continue // nothing was ever enqueued into it; GetQueueInfo would fail
		}
		info, err := w.insp.GetQueueInfo(q)
		if err != nil {
			return nil, fmt.Errorf("archived tasks of %s: %w", q, err)
		}
		if info.Archived == 0 {
			continue
		}
		// The list is oldest first: the newest are on its last page.
		last := (info.Archived + archivedPage - 1) / archivedPage
		tasks, err := w.insp.ListArchivedTasks(q, asynq.PageSize(archivedPage), asynq.Page(last))
		if err != nil {
			return nil, fmt.Errorf("archived tasks of %s: %w", q, err)
		}
		for _, t := range tasks {
			if t.LastFailedAt.Before(since) {
				continue
			}
			start := t.LastFailedAt.UTC().Truncate(alerts.Window)
			byWindow[start] = append(byWindow[start], t.ID)
		}
	}
	var events []alerts.Event
	for start, ids := range byWindow {
		events = append(events, alerts.Event{Type: alerts.JobsArchived, Key: alerts.WindowKey(start), At: now,
			Data: map[string]any{"window_start": start, "window_end": start.Add(alerts.Window),
				"tasks": len(ids), "task_ids": ids[:min(len(ids), 20)]}})
	}
	return events, nil
}
