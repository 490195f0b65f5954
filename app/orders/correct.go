package orders

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// An order's total is what a paid event must match. When a price was
// wrong as the order was made, the gateway's payment of the right price
// is rejected (amount_mismatch); an owner corrects the total, with a
// reason, and applies the kept delivery again (payments.ApplyAgain).

// CorrectionTarget is the action-log target of a correction of order id's
// total: the order's story reads them by it.
func CorrectionTarget(id string) string { return "order " + id }

// MaxCorrectionReason bounds the reason of a correction.
const MaxCorrectionReason = 500

// correctable are the statuses whose paid event is compared with the
// total (models.Action.ChecksAmount): not yet paid.
var correctable = []models.OrderStatus{models.OrderPending, models.OrderFailed, models.OrderExpired, models.OrderCancelled}

// Correction is an owner's correction of an order's total.
type Correction struct {
	OrderID    string
	Amount     int64 // the new total, in the order's currency's minor units
	Reason     string
	Admin      string // who corrects it, for the action log
	RemoteAddr string
}

// CorrectTotal sets order c.OrderID's total to c.Amount, in one
// transaction with its entry in the action log, and returns the total it
// had. Only an order not yet paid, with a payment rejected for its amount
// that still stands, may be corrected (EInvalidTransition otherwise):
// anything else has no payment waiting on the total. The amount is
// positive and at most models.MaxTotal; the reason is 1 to
// MaxCorrectionReason characters of text (EInvalid).
func (s *Service) CorrectTotal(ctx context.Context, c Correction) (before int64, err error) {
	c.Reason = strings.TrimSpace(c.Reason)
	switch {
	case c.Amount < 1 || c.Amount > models.MaxTotal:
		return 0, models.Errorf(models.EInvalid, "the total must be 1 to %d minor units", int64(models.MaxTotal))
	case c.Reason == "" || len(c.Reason) > MaxCorrectionReason || !models.CleanText(c.Reason):
		return 0, models.Errorf(models.EInvalid, "reason must be 1 to %d characters of text", MaxCorrectionReason)
	case !models.ValidOrderID(c.OrderID):
		return 0, models.Errorf(models.ENotFound, "no order %q", c.OrderID)
	}
	err = store.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		o, err := Lock(tx, c.OrderID)
		if err != nil {
			return err
		}
		before = o.TotalAmount
		if err := s.mayCorrect(tx, o); err != nil {
			return err
		}
		res := tx.Model(&models.Order{}).Where("id = ? AND status IN ?", o.ID, correctable).
			Updates(map[string]any{"total_amount": c.Amount, "updated_at": s.now().UTC()})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return models.Errorf(models.EInvalidTransition, "order %s changed meanwhile", o.ID)
		}
		return admins.RecordTx(tx, models.AdminAction{
			AdminEmail: c.Admin, Action: models.ActionCorrectTotal, Target: CorrectionTarget(o.ID), Result: models.ActionOK, RemoteAddr: c.RemoteAddr,
			Detail: models.Truncate(fmt.Sprintf("%d → %d %s; %s", before, c.Amount, o.Currency, c.Reason), 500),
		})
	})
	if err != nil {
		return 0, fmt.Errorf("orders.CorrectTotal: %w", err)
	}
	s.log.InfoContext(ctx, "order total corrected", "order_id", c.OrderID, "total_before", before, "total_after", c.Amount, "admin", c.Admin)
	return before, nil
}

// mayCorrect refuses a correction of order o unless it is not yet paid
// and a payment of it stands rejected for its amount.
func (s *Service) mayCorrect(tx *gorm.DB, o *models.Order) error {
	if !slices.Contains(correctable, o.Status) {
		return models.Errorf(models.EInvalidTransition, "order %s is %s: only an order not yet paid has a total to correct", o.ID, o.Status)
	}
	var n int64
	err := tx.Model(&models.PaymentCallback{}).
		Where("order_id = ? AND status = ? AND result = ?", o.ID, models.CallbackRejected, models.ReasonAmountMismatch).
		Count(&n).Error
	if err != nil {
		return err
	}
	if n == 0 {
		return models.Errorf(models.EInvalidTransition, "order %s has no payment rejected for its amount: its total is what was ordered", o.ID)
	}
	return nil
}

// CanCorrectTotal says whether order o may have its total corrected now
// (mayCorrect), for the order page's form.
func (s *Service) CanCorrectTotal(ctx context.Context, o *models.Order) (bool, error) {
	err := s.mayCorrect(s.db.WithContext(ctx), o)
	switch {
	case err == nil:
		return true, nil
	case models.ErrorCode(err) == models.EInvalidTransition:
		return false, nil
	}
	return false, fmt.Errorf("orders.CanCorrectTotal: %w", store.Classify(err))
}
