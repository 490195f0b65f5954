package refunds

import (
	"context"
	"errors"
	"fmt"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// ErrCannotAsk: the refund's gateway cannot be asked what became of a
// refund it accepted (its refunder is no gatewaycalls.RefundLooker); its
// notification is what tells.
var ErrCannotAsk = errors.New("refunds: the gateway cannot be asked about its refunds")

// Can reports what the service can do with the refunds of provider's
// charges: send them (a refunder is configured), and look up what became
// of one the gateway accepted (its refunder is a
// gatewaycalls.RefundLooker).
func (s *Service) Can(provider string) (send, lookUp bool) {
	r, ok := s.refunders[provider]
	_, lookUp = r.(gatewaycalls.RefundLooker)
	return ok, lookUp
}

// PendingAtGateway reports whether done refund request r's refund is
// pending at its gateway: accepted, not made, and not known to have
// succeeded or failed since — its own refunds row, named by the
// gateway's id of it or by Sekali's key, as check 9 of the audit finds
// it.
func (s *Service) PendingAtGateway(ctx context.Context, r *models.GatewayRequest) (bool, error) {
	if r.Kind != models.GatewayRefund || r.Phase != models.GatewayDone || r.PaymentID == nil {
		return false, nil
	}
	var n int64
	err := s.db.WithContext(ctx).Model(&models.Refund{}).
		Where("provider = ? AND payment_id = ? AND refund_key IN ? AND status = ?",
			r.Provider, *r.PaymentID, []string{r.ProviderObjectID, r.IdempotencyKey}, models.RefundPending).
		Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("refunds: is request %d pending: %w", r.ID, store.Classify(err))
	}
	return n > 0, nil
}

// LookUp asks the gateway what became of refund request id, done — the
// gateway accepted it — and pending there, and applies what it says as
// the gateway's notification of the same refund would be applied: a
// refund that succeeded is counted as made (and its customer told), one
// that failed gives its amount back to the charge and fails the request
// (payments.FailAfterAcceptance). A refund still pending changes
// nothing. The error is ErrCannotAsk for a gateway that cannot be asked,
// and wraps ErrUnanswered when the gateway did not answer or does not
// list the refund; requestID is the request the question is for (the
// janitor's run, or the admin's "ask now").
func (s *Service) LookUp(ctx context.Context, id int64, requestID string) (*models.GatewayRequest, error) {
	r, err := s.get(ctx, id)
	if err != nil || r.Phase != models.GatewayDone {
		return r, err // not accepted (yet), or over: nothing to look up
	}
	looker, ok := s.refunders[r.Provider].(gatewaycalls.RefundLooker)
	if !ok {
		return nil, ErrCannotAsk
	}
	var charge models.Payment
	if err := s.db.WithContext(ctx).Take(&charge, *r.PaymentID).Error; err != nil {
		return nil, fmt.Errorf("refunds.LookUp: the charge: %w", store.Classify(err))
	}
	callCtx, cancel := context.WithTimeout(ctx, s.CallTimeout)
	defer cancel()
	st, found, err := looker.LookUpRefund(callCtx, gatewaycalls.RefundRequest{OrderID: r.OrderID, Key: r.IdempotencyKey,
		Charge: charge.ProviderReference, Amount: r.Amount, Currency: r.Currency, Reason: r.Reason, Attempt: r.Attempts})
	log := s.log.With("provider", r.Provider, "order_id", r.OrderID, "idempotency_key", r.IdempotencyKey,
		"request_id", requestID, "refund_request_id", r.ID)
	switch {
	case err != nil:
		log.WarnContext(ctx, "the gateway could not be asked about a pending refund", "error", err)
		return nil, fmt.Errorf("%w: %v", ErrUnanswered, err)
	case !found:
		log.WarnContext(ctx, "the gateway lists no refund under the key of one it accepted")
		return nil, fmt.Errorf("%w: the gateway lists no refund under key %s", ErrUnanswered, r.IdempotencyKey)
	case st.Status == models.RefundPending:
		return r, nil
	}
	// What the gateway holds now, as its notification would tell it: a
	// key of its own per state, so the same answer applied twice is one
	// fact, and the notification of it, applied too, adds nothing.
	ev := payments.Event{Key: "refund:" + r.IdempotencyKey + ":" + string(st.Status), OrderID: r.OrderID,
		TransactionID: charge.ProviderReference, Status: models.EventRefunded, Amount: st.Amount, Currency: r.Currency,
		Refunds: []payments.Refund{{Key: st.RefundKey, Amount: st.Amount, Status: st.Status, Reason: st.Reason}}}
	out, err := s.payments.ApplyAnswer(context.WithoutCancel(ctx), r.Provider, requestID, ev)
	if err != nil {
		return nil, fmt.Errorf("refunds.LookUp: apply the gateway's answer: %w", err)
	}
	log.InfoContext(ctx, "a pending refund was asked about", "status_after", st.Status, "result", out.Word())
	return s.get(ctx, r.ID)
}
