package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/models"
)

// TaskRefundSend asks a gateway for one refund an admin asked for.
const TaskRefundSend = "refund:send"

// RefundArgs are the args of refund:send:{refund_request_id}, on the
// critical queue (money is owed to a customer). Asking for a refund
// writes the task (Tasks.Refund) beside the refund record.
type RefundArgs struct {
	// RefundRequestID is the refund record's id (gateway_requests.id).
	RefundRequestID int64  `json:"refund_request_id"`
	OrderID         string `json:"order_id"`
	// RequestID is the id of the admin's HTTP request that asked for the
	// refund (the console's form, the admin API), as a callback's jobs
	// carry their delivery's: one search for it follows the refund from
	// the button to the gateway.
	RequestID string `json:"request_id,omitempty"`
}

// UnmarshalJSON reads the payloads of both versions: before the admin's
// request id travelled with the job, request_id was the refund record's
// id, a number. Such tasks may wait in an outbox or a queue for days.
func (a *RefundArgs) UnmarshalJSON(b []byte) error {
	var p struct {
		RefundRequestID int64           `json:"refund_request_id"`
		OrderID         string          `json:"order_id"`
		RequestID       json.RawMessage `json:"request_id"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	requestID, refundRequestID, err := requestIDs(p.RequestID)
	if err != nil {
		return err
	}
	*a = RefundArgs{RefundRequestID: cmp.Or(p.RefundRequestID, refundRequestID), OrderID: p.OrderID, RequestID: requestID}
	return nil
}

// requestIDs reads a payload's request_id: a string is the HTTP request
// that caused the job; a number, in a refund:send payload of the first
// version, is the refund record's id; absent or null is neither.
func requestIDs(raw json.RawMessage) (requestID string, refundRequestID int64, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", 0, nil
	}
	if raw[0] == '"' {
		err = json.Unmarshal(raw, &requestID)
		return requestID, 0, err
	}
	err = json.Unmarshal(raw, &refundRequestID)
	return "", refundRequestID, err
}

// Kind is refund:send on the critical queue.
func (RefundArgs) Kind() Kind { return Kind{Type: TaskRefundSend, Queue: QueueCritical} }

// Key is the refund record's id; "" without one.
func (a RefundArgs) Key() string {
	if a.RefundRequestID <= 0 {
		return ""
	}
	return strconv.FormatInt(a.RefundRequestID, 10)
}

// RefundSender is the part of the refunds service the job needs
// (refunds.Service): it sends refund record id, its log lines carrying
// requestID.
type RefundSender interface {
	Send(ctx context.Context, id int64, requestID string) (*models.GatewayRequest, error)
}

// refundJob asks the gateway for a refund until it answers definitely.
// The call itself is made exactly once in effect by the refund's own
// row (its lease, and the provider idempotency key every repeat
// carries); the guard makes the job's bookkeeping once.
func refundJob() Spec {
	return Spec{
		Task: RefundArgs{}.Kind(),
		// A refund that the gateway has not answered must be asked again
		// until it does: the retries grow to ten minutes apart (RetryDelay).
		MaxRetry: 50,
		Timeout:  2 * time.Minute,
		Guarded:  func(d Deps) (Prepare, Effect) { return RefundPrepare(d.Refunds), RefundEffect() },
		// Giving up on the job gives up on the refund: never sent again,
		// its amount no longer held back.
		Discard: func(tx *gorm.DB, taskID, why string) error {
			id, err := strconv.ParseInt(strings.TrimPrefix(taskID, TaskRefundSend+":"), 10, 64)
			if err != nil {
				return models.Errorf(models.EInvalid, "job %s names no refund", taskID)
			}
			return gatewaycalls.DiscardIn(tx, id, why)
		},
	}
}

// RefundPrepare is the call to the gateway, outside any transaction: it
// returns an error, and the job is tried again, while the refund is not
// done or failed (refunds.Service.Send).
func RefundPrepare(refunds RefundSender) Prepare {
	return func(ctx context.Context, j Job) error {
		args, err := decode[RefundArgs](j)
		if err != nil {
			return err
		}
		if refunds == nil {
			return fmt.Errorf("this worker cannot send refunds")
		}
		if _, err := refunds.Send(ctx, args.RefundRequestID, args.RequestID); err != nil {
			return skipIfGone(err)
		}
		return nil
	}
}

// RefundEffect completes the job once its refund is over: done, failed,
// declined, discarded or in conflict, as Prepare left it.
func RefundEffect() Effect {
	return func(ctx context.Context, tx *gorm.DB, j Job) (string, error) {
		args, err := decode[RefundArgs](j)
		if err != nil {
			return "", err
		}
		var r models.GatewayRequest
		if err := tx.Take(&r, "id = ? AND kind = ?", args.RefundRequestID, models.GatewayRefund).Error; err != nil {
			return "", err
		}
		switch r.Phase {
		case models.GatewayDone:
			return "refunded " + r.ProviderObjectID, nil
		case models.GatewayFailed:
			return "refused by the gateway", nil
		case models.GatewayDeclined: // an owner declined it: it is never sent
			return "declined by " + r.DeclinedBy, nil
		case models.GatewayDiscarded:
			return "discarded: " + r.LastError, nil
		case models.GatewayConflict: // answered, and not applied: an operator settles it
			return "answered in conflict: " + r.LastError, nil
		}
		return "", fmt.Errorf("refund %d is still %s", r.ID, r.Phase)
	}
}
