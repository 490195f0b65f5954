package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
)

// Periodic is one maintenance task and how often it runs.
type Periodic struct {
	Type  string
	Every time.Duration
}

// DefaultPeriodic is the maintenance schedule.
var DefaultPeriodic = []Periodic{
	{TaskSweepStuck, time.Minute},
	{TaskSweepExpired, time.Minute},
	{TaskPrune, time.Hour},
}

// Scheduler enqueues the periodic maintenance tasks. Each task id names
// its time bucket (sweep:stuck:{unix/60}), so the next period is never
// refused as a duplicate, and several schedulers running at once enqueue
// each period once: the others get ErrTaskIDConflict.
type Scheduler struct {
	queue    enqueuer
	log      *slog.Logger
	schedule []Periodic
	now      func() time.Time
}

// NewScheduler returns a scheduler of schedule.
func NewScheduler(queue enqueuer, log *slog.Logger, schedule []Periodic) *Scheduler {
	return &Scheduler{queue: queue, log: log, schedule: schedule, now: time.Now}
}

// Run enqueues each task at the start of each of its periods until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := map[string]int64{}
	for {
		for _, p := range s.schedule {
			bucket := s.now().Unix() / int64(max(p.Every, time.Second).Seconds()) // a period is at least the tick
			if last[p.Type] == bucket {
				continue
			}
			if err := s.enqueue(ctx, p, bucket); err != nil {
				s.log.Warn("scheduler: could not enqueue", "type", p.Type, "error", err)
				continue // try again on the next tick
			}
			last[p.Type] = bucket
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (s *Scheduler) enqueue(ctx context.Context, p Periodic, bucket int64) error {
	_, err := s.queue.EnqueueContext(ctx, asynq.NewTask(p.Type, nil),
		asynq.TaskID(fmt.Sprintf("%s:%d", p.Type, bucket)),
		asynq.Queue(QueueMaintenance),
		asynq.MaxRetry(3),
		asynq.Timeout(p.Every),
		asynq.Retention(p.Every), // keeps the bucket's id taken for its whole period
	)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // another scheduler enqueued this period
	}
	return err
}
