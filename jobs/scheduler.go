package jobs

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
)

// Scheduler enqueues the periodic tasks (the specs with Every set). Each
// task id names its time bucket (sweep:stuck:{unix/60}), so the next
// period is never refused as a duplicate, and several schedulers running
// at once enqueue each period once: the others get ErrTaskIDConflict.
type Scheduler struct {
	queue    enqueuer
	log      *slog.Logger
	schedule []Spec
	now      func() time.Time
}

// NewScheduler returns a scheduler of schedule.
func NewScheduler(queue enqueuer, log *slog.Logger, schedule []Spec) *Scheduler {
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
			if last[p.Task.Type] == bucket {
				continue
			}
			if err := s.enqueue(ctx, p, bucket); err != nil {
				s.log.Warn("scheduler: could not enqueue", "type", p.Task.Type, "error", err)
				continue // try again on the next tick
			}
			last[p.Task.Type] = bucket
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (s *Scheduler) enqueue(ctx context.Context, p Spec, bucket int64) error {
	_, err := s.queue.EnqueueContext(ctx, asynq.NewTask(p.Task.Type, nil),
		asynq.TaskID(p.Task.ID(strconv.FormatInt(bucket, 10))),
		asynq.Queue(p.Task.Queue),
		asynq.MaxRetry(p.MaxRetry),
		asynq.Timeout(p.Timeout),
		asynq.Retention(p.Every), // keeps the bucket's id taken for its whole period
	)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // another scheduler enqueued this period
	}
	return err
}
