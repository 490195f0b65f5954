package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Discard gives up on job d.Key for good, for d.Reason (required, at most
// models.MaxDiscardReason bytes). Only a job that failed, or that is
// stuck (processing past its lease: its worker is gone), may be
// discarded; a job that succeeded, one running under a live lease, one
// the queue is about to run (pending or active in Redis, or its outbox
// row pending: a re-run handed it back) and one discarded already are
// refused with EInvalidTransition; a key with no job row is ENotFound.
//
// In one transaction, with the job row locked (a re-run of the same job
// waits, and then refuses it): the job row becomes discarded with its
// fence raised (a stuck worker that wakes up commits nothing), its outbox
// row discarded (the relay and the reconciler skip it), its open attempt
// ended, and the action log gets its entry (actor, reason). The queue's
// copy, if it holds one waiting (archived, retry, scheduled), is deleted;
// one it hands out all the same is finished by the guard without its
// effect.
func (c *Console) Discard(ctx context.Context, d jobview.Discard) error {
	if err := c.discard(ctx, d); err != nil {
		return fmt.Errorf("jobs.Console.Discard: %w", err)
	}
	return nil
}

func (c *Console) discard(ctx context.Context, d jobview.Discard) error {
	d.Reason = strings.TrimSpace(d.Reason)
	switch {
	case d.Reason == "":
		return models.Errorf(models.EMissingField, "a discard needs a reason")
	case len(d.Reason) > models.MaxDiscardReason || !models.CleanText(d.Reason):
		return models.Errorf(models.EInvalid, "the reason must be printable text of at most %d bytes", models.MaxDiscardReason)
	}
	err := c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var j models.JobExecution
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&j, "idempotency_key = ?", d.Key).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return models.Errorf(models.ENotFound, "no job %q: only a job that has run can be discarded", d.Key)
		}
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		switch {
		case j.Status == models.JobSucceeded:
			return models.Errorf(models.EInvalidTransition, "job %s succeeded: its effect happened, there is nothing to discard", d.Key)
		case j.Status == models.JobDiscarded:
			return models.Errorf(models.EInvalidTransition, "job %s is discarded already", d.Key)
		case j.Status == models.JobProcessing && (j.LockedUntil == nil || j.LockedUntil.After(now)):
			return models.Errorf(models.EInvalidTransition, "job %s is running under a live lease; discard it once it failed or is stuck", d.Key)
		}
		var m models.OutboxMessage
		err = tx.Take(&m, "task_id = ?", d.Key).Error
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		if m.Status == models.OutboxPending {
			return models.Errorf(models.EInvalidTransition, "job %s is being handed to the queue again (a re-run); discard it once it has run", d.Key)
		}
		info, err := c.find(d.Key, j.QueueName, m.Queue)
		if err != nil {
			return err
		}
		if info != nil {
			switch info.State {
			case asynq.TaskStatePending, asynq.TaskStateActive, asynq.TaskStateAggregating:
				return models.Errorf(models.EInvalidTransition, "job %s is %s in the queue; discard it once it has run", d.Key, info.State)
			}
		}
		if spec, ok := specOfTask(d.Key); ok && spec.Discard != nil {
			if err := spec.Discard(tx, d.Key, fmt.Sprintf("discarded by %s: %s", d.Admin, d.Reason)); err != nil {
				return err
			}
		}
		res := tx.Model(&models.JobExecution{}).
			Where("id = ? AND status IN ?", j.ID, []models.JobStatus{models.JobFailed, models.JobProcessing}).
			Updates(map[string]any{
				"status": models.JobDiscarded, "fence": gorm.Expr("fence + 1"), "locked_until": nil,
				"finished_at": now, "discarded_at": now, "discarded_by": d.Admin, "discard_reason": d.Reason,
			})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return models.Errorf(models.EInvalidTransition, "job %s changed meanwhile", d.Key)
		}
		err = tx.Model(&models.OutboxMessage{}).Where("task_id = ? AND status = ?", d.Key, models.OutboxDispatched).
			Update("status", models.OutboxDiscarded).Error
		if err != nil {
			return err
		}
		err = tx.Model(&models.JobAttempt{}).Where("idempotency_key = ? AND finished_at IS NULL", d.Key).
			Updates(map[string]any{"finished_at": now, "outcome": string(RunDiscarded)}).Error
		if err != nil {
			return err
		}
		err = admins.RecordTx(tx, models.AdminAction{
			AdminEmail: d.Admin, Action: "discard job", Target: d.Key, Result: models.ActionOK,
			Detail: d.Reason, RemoteAddr: d.RemoteAddr, CreatedAt: now,
		})
		if err != nil {
			return err
		}
		if info != nil && info.State != asynq.TaskStateCompleted {
			// Archived, waiting for a retry or scheduled: the queue
			// forgets it. Should the commit fail, the reconciler hands it
			// over again, as for any lost task.
			err := c.insp.DeleteTask(info.Queue, d.Key)
			if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
				if again, lookErr := c.insp.GetTaskInfo(info.Queue, d.Key); lookErr == nil && again.State != info.State {
					// A worker took it meanwhile (its claim waits for this
					// transaction): refused like any run going on.
					return models.Errorf(models.EInvalidTransition, "job %s started running meanwhile; discard it once it has run", d.Key)
				}
				return fmt.Errorf("delete %s from %s: %w", d.Key, info.Queue, err)
			}
		}
		return nil
	})
	return store.Classify(err)
}

// Discardable returns the keys a bulk discard with f would discard: the
// failed jobs and the stuck ones (processing past their lease) that match
// f's type and key, whatever f.Status says, newest first; at most 1000,
// as for a bulk re-run.
func (c *Console) Discardable(ctx context.Context, f jobview.Filter) ([]string, error) {
	var keys []string
	err := filterJobs(c.db.WithContext(ctx).Model(&models.JobExecution{}), f).
		Where("(status = ? OR (status = ? AND locked_until < now()))", models.JobFailed, models.JobProcessing).
		Order("id DESC").Limit(maxRerun).Pluck("idempotency_key", &keys).Error
	if err != nil {
		return nil, fmt.Errorf("jobs.Console.Discardable: %w", store.Classify(err))
	}
	return keys, nil
}

// DiscardAll discards every key of Discardable(f), each in its own
// transaction with its own action log entry, for the same reason. A job
// that left the states a discard leaves from meanwhile is counted refused;
// other errors do not stop the rest and come back joined.
func (c *Console) DiscardAll(ctx context.Context, f jobview.Filter, d jobview.Discard) (map[jobview.DiscardOutcome]int, error) {
	keys, err := c.Discardable(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("jobs.Console.DiscardAll: %w", err)
	}
	counts := map[jobview.DiscardOutcome]int{}
	var errs []error
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		d.Key = key
		err := c.discard(ctx, d)
		switch code := models.ErrorCode(err); {
		case err == nil:
			counts[jobview.DiscardDone]++
		case code == models.EInvalidTransition || code == models.ENotFound:
			counts[jobview.DiscardRefused]++
		case code == models.EMissingField || code == models.EInvalid:
			return nil, fmt.Errorf("jobs.Console.DiscardAll: %w", err) // the reason: the same for every key
		default:
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return counts, fmt.Errorf("jobs.Console.DiscardAll: %w", err)
	}
	return counts, nil
}
