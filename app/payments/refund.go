package payments

import (
	"fmt"
	"strconv"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/models"
)

// Refunds are amounts. A refunded event names refunds by the gateway's
// ids of them (Midtrans, the sandbox), or states only the charge's
// refunded total (Stripe's amount_refunded), or both. Each refund is one
// refunds row under its unique (provider, refund_key), so a refund told
// twice is one row; the payment keeps the total. What an event adds is
// its refunds not yet recorded, and, where its stated total is higher
// than all that, the difference, as one row keyed
// {reference}:refunded:{total}: then the rows add up to the highest
// total any event stated, whatever order the events came in.

// refundPlan is what a refunded event adds to its charge.
type refundPlan struct {
	rows  []models.Refund // the new refunds, amounts and keys only
	added int64           // what they add up to
}

// planRefunds finds which of ev's refunds are new for charge, and the
// difference its stated total leaves. It runs under the order's lock,
// and first reads the charge again: lockOrder's join read it in the
// snapshot taken before it waited for the lock, so a refund committed
// meanwhile would be missing from its total.
func planRefunds(tx *gorm.DB, provider string, ev Event, charge *models.Payment) (refundPlan, error) {
	var plan refundPlan
	if err := tx.Take(charge, charge.ID).Error; err != nil {
		return plan, err
	}
	keys := make([]string, len(ev.Refunds))
	for i, r := range ev.Refunds {
		keys[i] = r.Key
	}
	var known []string
	if len(keys) > 0 {
		if err := tx.Model(&models.Refund{}).Where("provider = ? AND refund_key IN ?", provider, keys).
			Pluck("refund_key", &known).Error; err != nil {
			return plan, err
		}
	}
	seen := map[string]bool{}
	for _, k := range known {
		seen[k] = true
	}
	for _, r := range ev.Refunds {
		if seen[r.Key] || r.Amount <= 0 {
			continue
		}
		seen[r.Key] = true
		plan.rows = append(plan.rows, models.Refund{RefundKey: r.Key, Amount: r.Amount})
		plan.added += r.Amount
	}
	if rest := ev.Amount - (charge.RefundedAmount + plan.added); rest > 0 {
		plan.rows = append(plan.rows, models.Refund{
			RefundKey: ev.TransactionID + ":refunded:" + strconv.FormatInt(ev.Amount, 10), Amount: rest})
		plan.added += rest
	}
	return plan, nil
}

// decideRefund decides a refunded event: stale when it adds nothing or
// names a charge that was not taken; rejected when its currency is not
// the charge's, or when the refunds would exceed the charge; else the
// refund action, full when they reach the charge's amount.
func decideRefund(ev Event, o *models.Order, charge *models.Payment, plan refundPlan) (models.Action, string) {
	if charge == nil || plan.added == 0 {
		return models.ActionStale, ""
	}
	action := models.DecideRefund(o.Status, charge.Status, charge.RefundedAmount+plan.added == charge.Amount)
	switch {
	case action == models.ActionStale:
		return action, ""
	case ev.Currency != charge.Currency:
		return action, models.ReasonCurrencyMismatch
	case charge.RefundedAmount+plan.added > charge.Amount:
		return action, models.ReasonRefundExceedsPayment
	}
	return action, ""
}

// refund carries out a refund action under the order's lock: the new
// refund rows, the payment's refunded total (and status, when in full),
// and the order's status for its own charge. It returns the order's
// status afterwards.
func (s *Service) refund(tx *gorm.DB, o *models.Order, charge *models.Payment, plan refundPlan, action models.Action, callbackID int64) (models.OrderStatus, error) {
	now := s.now().UTC()
	for i := range plan.rows {
		r := &plan.rows[i]
		r.Provider, r.PaymentID, r.OrderID, r.Currency, r.CallbackID, r.CreatedAt = charge.Provider, charge.ID, o.ID, charge.Currency, &callbackID, now
	}
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&plan.rows)
	if res.Error != nil {
		return "", res.Error
	}
	if res.RowsAffected != int64(len(plan.rows)) { // the order lock makes this impossible; the unique key is the last guard
		return "", fmt.Errorf("payments.refund: %d of %d refunds of %s were recorded before", int64(len(plan.rows))-res.RowsAffected, len(plan.rows), charge.ProviderReference)
	}
	status := charge.Status
	if to, ok := action.PaymentStatus(); ok {
		status = to
	}
	res = tx.Model(&models.Payment{}).
		Where("id = ? AND status IN ? AND refunded_amount = ?", charge.ID, []models.PaymentStatus{models.PaymentSucceeded, models.PaymentRefundRequired}, charge.RefundedAmount).
		Updates(map[string]any{"refunded_amount": charge.RefundedAmount + plan.added, "status": status, "updated_at": now})
	if res.Error != nil {
		return "", res.Error
	}
	if res.RowsAffected != 1 {
		return "", fmt.Errorf("payments.refund: payment %s changed under its order's lock", charge.ProviderReference)
	}
	if from, to := action.OrderFrom(), action.OrderStatusAfter(o.Status); from != nil && to != o.Status {
		cause := orders.Cause{What: models.CauseCallback, CallbackID: &callbackID}
		if err := orders.Transition(tx, o, to, now, cause, from...); err != nil {
			return "", err
		}
	}
	return o.Status, nil
}
