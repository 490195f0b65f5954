package refunds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// ErrBusy: another caller holds the refund's lease (it is calling the
// gateway, or died doing so and its lease has not passed). Try later.
var ErrBusy = errors.New("refunds: another caller is sending this refund")

// ErrUnanswered: the gateway did not answer definitely (a timeout, a
// 5xx): it may have refunded. The refund stays sent; try later, with the
// same key.
var ErrUnanswered = errors.New("refunds: the gateway did not answer")

// Send asks the gateway for refund request id, once it can be claimed,
// and records the answer: done (the money applied as the gateway's
// notification would apply it, then the row), failed (the gateway's
// "no"), or left sent — ErrUnanswered — when the answer is unknown. A
// refund that is over is returned as it is. Safe to call again and from
// many processes: only the holder of the row's lease calls, and a repeat
// carries the same key. requestID is the request this send is for, which
// its log lines carry: the admin's that asked for the refund (its job
// passes it on), or the one pressing "Send again now".
func (s *Service) Send(ctx context.Context, id int64, requestID string) (*models.GatewayRequest, error) {
	r, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	switch r.Phase {
	case models.GatewayDone: // a crash may have come between Done and failIfFailed
		if err := s.failIfFailed(ctx, r); err != nil {
			return nil, fmt.Errorf("refunds.Send: %w", err)
		}
		return s.get(ctx, r.ID)
	case models.GatewayFailed, models.GatewayDeclined, models.GatewayDiscarded, models.GatewayConflict: // over: never sent (again)
		return r, nil
	case models.GatewayAwaitingApproval: // nothing is sent before an owner approves it
		return nil, models.Errorf(models.EInvalidTransition, "refund %d of order %s awaits an owner's approval: it is not sent before", r.ID, r.OrderID)
	}
	refunder, ok := s.refunders[r.Provider]
	if !ok {
		return nil, fmt.Errorf("refunds.Send: no refunder for %s", r.Provider)
	}
	var charge models.Payment
	if err := s.db.WithContext(ctx).Take(&charge, *r.PaymentID).Error; err != nil {
		return nil, fmt.Errorf("refunds.Send: the charge: %w", store.Classify(err))
	}
	if r.Phase == models.GatewayPlanned {
		// Never sent: what was left when it was asked may be gone.
		if over, err := s.failIfUnfit(ctx, r); err != nil || over {
			if err != nil {
				return nil, fmt.Errorf("refunds.Send: %w", err)
			}
			return s.get(ctx, r.ID)
		}
	}
	claimed, err := s.ledger.Claim(ctx, r, gatewaycalls.Lease(s.CallTimeout))
	if err != nil {
		return nil, fmt.Errorf("refunds.Send: %w", err)
	}
	if !claimed {
		return nil, ErrBusy
	}
	log := s.log.With("provider", r.Provider, "order_id", r.OrderID, "idempotency_key", r.IdempotencyKey,
		"request_id", requestID, "refund_request_id", r.ID, "attempt", r.Attempts)
	callCtx, cancel := context.WithTimeout(ctx, s.CallTimeout)
	defer cancel()
	answer, err := refunder.Refund(callCtx, gatewaycalls.RefundRequest{OrderID: r.OrderID, Key: r.IdempotencyKey,
		Charge: charge.ProviderReference, Amount: r.Amount, Currency: r.Currency, Reason: r.Reason, Attempt: r.Attempts})
	// What the gateway answered is written whatever happens to ctx now.
	wctx := context.WithoutCancel(ctx)
	switch {
	case err == nil && answer.ObjectID != "":
		return s.done(wctx, r, &charge, answer, requestID, log)
	case err == nil:
		err = errors.New("the gateway's answer names no refund")
	case gatewaycalls.IsRefused(err):
		if uerr := s.refused(wctx, r, err); uerr != nil {
			return nil, fmt.Errorf("refunds.Send: %w", uerr)
		}
		log.WarnContext(ctx, "refund refused by the gateway", "error", err)
		return s.get(wctx, id)
	}
	// Unknown: the gateway may have refunded, or may still be at it. The
	// row stays sent and keeps its lease; the next try repeats the call
	// with the same key once the lease has passed.
	if uerr := s.ledger.Unknown(wctx, r, err); uerr != nil {
		log.ErrorContext(ctx, "could not record a gateway error", "error", uerr)
	}
	log.WarnContext(ctx, "refund not answered yet", "error", err)
	return nil, fmt.Errorf("%w: %v", ErrUnanswered, err)
}

// done applies the refund the gateway answered with, then records the
// row done. In that order: a crash between the two leaves the row sent,
// the call is repeated with the same key, and the same answer applied
// again adds nothing (the refunds table's unique key, or the charge's
// stated total). The gateway's notification of the refund converges the
// same way, whichever comes first. An answer of another amount or
// currency than asked is not applied (conflict).
func (s *Service) done(ctx context.Context, r *models.GatewayRequest, charge *models.Payment, a gatewaycalls.Refunded, requestID string, log *slog.Logger) (*models.GatewayRequest, error) {
	if why := a.Stated().Disagreement(r.Amount, r.Currency); why != "" {
		return s.conflict(ctx, r, a, why, log)
	}
	ev := payments.Event{
		Key: "refund:" + r.IdempotencyKey, OrderID: r.OrderID, TransactionID: charge.ProviderReference,
		Status: models.EventRefunded, Amount: a.Amount, Currency: r.Currency,
	}
	if a.RefundKey != "" {
		status := models.RefundSucceeded
		if a.Pending {
			status = models.RefundPending
		}
		ev.Refunds = []payments.Refund{{Key: a.RefundKey, Amount: a.Amount, Status: status}}
	}
	if a.Total > 0 {
		ev.Amount = a.Total
	}
	out, err := s.payments.ApplyAnswer(ctx, r.Provider, requestID, ev)
	if err != nil {
		return nil, fmt.Errorf("refunds.Send: apply the gateway's answer: %w", err)
	}
	if out.Result == models.ResultRejected || out.Result == models.ResultConflict {
		// The gateway refunded, but what it says does not fit what Sekali
		// knows of the charge: the row is done (the refund exists), and
		// the audit and the callbacks page show the disagreement.
		log.ErrorContext(ctx, "the gateway's refund does not fit the charge", "result", out.Word(), "reason", out.Reason)
	}
	record := func(ctx context.Context, r *models.GatewayRequest, objectID string, said gatewaycalls.Stated) (bool, error) {
		return s.ledger.Done(ctx, r, objectID, "", said)
	}
	if a.Pending { // accepted, not made: the janitor asks until the gateway says what became of it
		record = s.ledger.Accepted
	}
	recorded, err := record(ctx, r, a.ObjectID, a.Stated())
	if err != nil {
		return nil, fmt.Errorf("refunds.Send: %w", err)
	}
	if recorded {
		log.InfoContext(ctx, "refund done", "provider_object_id", a.ObjectID, "amount", a.Amount, "pending", a.Pending, "result", out.Word())
	}
	// The gateway may have failed the refund already — its notification
	// applied before this answer, or between the answer and Done — and
	// the notification marks failed only a request that is done.
	r.ProviderObjectID = a.ObjectID
	if err := s.failIfFailed(ctx, r); err != nil {
		return nil, fmt.Errorf("refunds.Send: %w", err)
	}
	return s.get(ctx, r.ID)
}

// conflict records the gateway's answer to r, which the caller holds,
// when it states another amount or currency than r asked (why says both):
// nothing of it is applied, and gateway.conflict is raised in the same
// transaction. The gateway did refund something, so r is never sent
// again under its key — a repeat would be answered with the same refund,
// or, where a key is single-use, refused — and it is not done either:
// done says the refund asked is counted, and the audit holds each done
// refund to a counted refund of its amount. Its amount stays held back
// from what is left to refund until an operator settles it in the
// gateway's dashboard; the gateway's notification of the refund, a
// signed fact, counts what it says.
func (s *Service) conflict(ctx context.Context, r *models.GatewayRequest, a gatewaycalls.Refunded, why string, log *slog.Logger) (*models.GatewayRequest, error) {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		recorded, err := s.ledger.ConflictIn(tx, r, a.ObjectID, "", a.Stated(), "not applied: "+why)
		if err != nil || !recorded {
			return err // another caller had taken the row over: its outcome stands
		}
		var row models.GatewayRequest
		if err := tx.Take(&row, r.ID).Error; err != nil {
			return err
		}
		_, err = alerts.Raise(tx, s.tasks, alerts.GatewayConflictEvent(row, s.now()))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("refunds.Send: %w", store.Classify(err))
	}
	log.ErrorContext(ctx, "refund answer not applied: another amount or currency than asked",
		"provider_object_id", a.ObjectID, "amount", r.Amount, "currency", r.Currency,
		"answered_amount", a.Amount, "answered_currency", a.Currency, "error", why)
	return s.get(ctx, r.ID)
}

// refused records the gateway's "no" to r, which the caller holds, and
// raises refund.failed in the same transaction.
func (s *Service) refused(ctx context.Context, r *models.GatewayRequest, cause error) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.ledger.FailedIn(tx, r, cause); err != nil {
			return err
		}
		var failed int64
		if err := tx.Model(r).Where("id = ? AND phase = ?", r.ID, models.GatewayFailed).Count(&failed).Error; err != nil || failed == 0 {
			return err // another caller had taken the row over: its outcome stands
		}
		e := alerts.RefundFailedEvent(*r, s.now())
		e.Data["error"] = cause.Error()
		_, err := alerts.Raise(tx, s.tasks, e)
		return err
	})
}

// failIfFailed marks refund request r, done, failed when its refund at
// the gateway — named by the gateway's id of it or by Sekali's key, as
// payments.FailAfterAcceptance finds it — is recorded failed or
// canceled: the notification of the failure marks only requests that
// were done when it was applied.
//
// It holds the order's lock, as the notification's transaction does:
// without it, a notification that looked at r before Done and committed
// after this check would leave r done with its refund failed.
func (s *Service) failIfFailed(ctx context.Context, r *models.GatewayRequest) error {
	keys := []string{r.IdempotencyKey}
	if r.ProviderObjectID != "" {
		keys = append(keys, r.ProviderObjectID)
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if _, err := orders.Lock(tx, r.OrderID); err != nil {
			return err
		}
		var charge models.Payment
		if err := tx.Take(&charge, *r.PaymentID).Error; err != nil {
			return err
		}
		var failed int64
		err := tx.Model(&models.Refund{}).Where("provider = ? AND payment_id = ? AND refund_key IN ? AND status IN ?",
			r.Provider, r.PaymentID, keys, []models.RefundStatus{models.RefundFailed, models.RefundCanceled}).Count(&failed).Error
		if err != nil || failed == 0 {
			return err
		}
		return payments.FailAfterAcceptance(tx, s.tasks, &charge, keys, s.now().UTC())
	})
	return store.Classify(err)
}

// failIfUnfit fails planned refund r, unsent, when it no longer fits in
// what is left of its charge (stillFits) — a refund made in the gateway's
// dashboard since, a dispute opened — and raises refund.failed: sending
// it would refund more than the charge, or pay the customer twice. It
// reports whether r is over.
func (s *Service) failIfUnfit(ctx context.Context, r *models.GatewayRequest) (bool, error) {
	var over bool
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		o, err := orders.Lock(tx, r.OrderID)
		if err != nil {
			return err
		}
		var charge models.Payment
		if err := tx.Take(&charge, *r.PaymentID).Error; err != nil {
			return err
		}
		unfit := s.stillFits(tx, o, &charge, r)
		if code := models.ErrorCode(unfit); code != models.EInvalidTransition && code != models.EChargeDisputed {
			return unfit // nil: it fits
		}
		why := "not sent: " + models.ErrorMessage(unfit)
		res := tx.Model(&models.GatewayRequest{}).Where("id = ? AND phase = ?", r.ID, models.GatewayPlanned).
			Updates(map[string]any{"phase": models.GatewayFailed, "last_error": why, "updated_at": s.now().UTC()})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error // claimed meanwhile: the claim's caller sends it
		}
		over = true
		failed := *r
		failed.Phase, failed.LastError = models.GatewayFailed, why
		e := alerts.RefundFailedEvent(failed, s.now())
		e.Data["error"] = why
		_, err = alerts.Raise(tx, s.tasks, e)
		return err
	})
	return over, store.Classify(err)
}

// get reads refund request id.
func (s *Service) get(ctx context.Context, id int64) (*models.GatewayRequest, error) {
	var r models.GatewayRequest
	err := s.db.WithContext(ctx).Take(&r, "id = ? AND kind = ?", id, models.GatewayRefund).Error
	if err != nil {
		return nil, fmt.Errorf("refunds: request %d: %w", id, store.Classify(err))
	}
	return &r, nil
}
