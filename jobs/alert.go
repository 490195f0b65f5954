package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/models"
)

// TaskAlertSend POSTs one operational webhook (app/alerts).
const TaskAlertSend = "alert:send"

// AlertArgs are the args of alert:send:{event_id}, on the default queue.
// Raising an alert writes the task (Tasks.Alert) beside the alert's row.
type AlertArgs struct {
	EventID string `json:"event_id"`
}

// Kind is alert:send on the default queue.
func (AlertArgs) Kind() Kind { return Kind{Type: TaskAlertSend, Queue: QueueDefault} }

// Key is the alert's event id, its webhook-id.
func (a AlertArgs) Key() string { return a.EventID }

// Alert is the row of the task that sends alert eventID (alerts.Tasks).
func (Tasks) Alert(eventID string, now time.Time) models.OutboxMessage {
	return Row(AlertArgs{EventID: eventID}, now)
}

// alertRetries: with RetryDelay's backoff (1 s doubling, capped at ten
// minutes) the tries span about two hours before the alert is marked
// failed.
const alertRetries = 20

// alertJob sends an alert until the receiver answers 2xx. It needs no
// guard: the alert's row says whether it went out, and a repeat carries
// the same webhook-id, which the receiver dedupes on.
func alertJob() Spec {
	return Spec{
		Task:     AlertArgs{}.Kind(),
		MaxRetry: alertRetries,
		Timeout:  time.Minute,
		Handler:  func(d Deps) asynq.HandlerFunc { return AlertHandler(d.Alerts) },
	}
}

// AlertHandler delivers the alert its task names through sender.
func AlertHandler(sender *alerts.Sender) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		args, err := decode[AlertArgs](Job{Type: t.Type(), Payload: t.Payload()})
		if err != nil {
			return err
		}
		if sender == nil {
			return fmt.Errorf("this worker cannot send alerts")
		}
		retry, okRetry := asynq.GetRetryCount(ctx)
		most, okMost := asynq.GetMaxRetry(ctx)
		_, err = sender.Deliver(ctx, args.EventID, okRetry && okMost && retry >= most)
		return skipIfGone(err)
	}
}
