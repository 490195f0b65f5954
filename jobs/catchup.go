package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/models"
)

// TaskCatchUp asks the gateways what Sekali missed (app/catchup), every
// CATCH_UP_EVERY; off by default.
const TaskCatchUp = "payments:catch-up"

// catchUpTimeout bounds one run: a long backlog of open orders is many
// status requests, and what a run applied before it was stopped stays
// applied.
const catchUpTimeout = 30 * time.Minute

// catchUpJob is registered on every worker but scheduled only with
// CATCH_UP_EVERY (WithCatchUp): Every is 0 here. A failed run is not
// retried: the next period starts from the last run that finished.
func catchUpJob() Spec {
	return Spec{Task: Kind{Type: TaskCatchUp, Queue: QueueMaintenance}, MaxRetry: 0, Timeout: catchUpTimeout,
		Handler: func(d Deps) asynq.HandlerFunc { return d.Maintenance.CatchUp }}
}

// CatchUpArgs are the args of a catch-up an operator asked for on the
// console (payments:catch-up:{minute}); the scheduled one has none.
type CatchUpArgs struct {
	Asked string `json:"asked"`        // the minute it was asked, 20261207T0405Z
	By    string `json:"by,omitempty"` // the admin who asked, kept on the run
}

// Kind is payments:catch-up on the maintenance queue.
func (CatchUpArgs) Kind() Kind { return Kind{Type: TaskCatchUp, Queue: QueueMaintenance} }

// Key is the minute: the clicks of one minute ask one run.
func (a CatchUpArgs) Key() string { return a.Asked }

// CatchUp is the row of the catch-up admin asked for at now
// (catchup.Tasks).
func (Tasks) CatchUp(now time.Time, admin string) models.OutboxMessage {
	return Row(CatchUpArgs{Asked: now.UTC().Format("20060102T1504Z"), By: admin}, now)
}

// WithCatchUp is schedule with the catch-up every `every`
// (CATCH_UP_EVERY), or schedule itself when every is 0.
func WithCatchUp(schedule []Spec, every time.Duration) []Spec {
	if every <= 0 {
		return schedule
	}
	s := catchUpJob()
	s.Every, s.Timeout = every, min(every, catchUpTimeout)
	return append(schedule, s)
}

// CatchUp is the payments:catch-up task: it runs the catch-up the worker
// was given, which records itself as a catch_up_runs row, with the
// admin who asked for it (none for the scheduled one, which has no
// payload).
func (m *Maintenance) CatchUp(ctx context.Context, t *asynq.Task) error {
	if m.CatchUpRun == nil {
		return nil
	}
	var args CatchUpArgs
	if len(t.Payload()) > 0 {
		if err := json.Unmarshal(t.Payload(), &args); err != nil {
			return fmt.Errorf("decode %s: %v: %w", t.Type(), err, asynq.SkipRetry)
		}
	}
	return m.CatchUpRun(ctx, args.By)
}
