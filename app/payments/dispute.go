package payments

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// A dispute (a chargeback the customer's bank opened) is recorded on the
// charge it disputes — open, then won or lost — with the amount it holds
// or took back, and shows in the order's story as its callback. It
// changes no order status: while it is open or lost, refunds of the
// charge are refused (the bank holds the money, or took it back: a refund
// would pay the customer twice), and an admin decides what follows.

// dispute records a dispute event's new state and amount on the charge's
// payment row, under its order's lock: an open or lost dispute holds its
// amount (at most the charge's), a won one nothing. The WHERE names the
// state it leaves, as every transition here does.
func (s *Service) dispute(tx *gorm.DB, charge *models.Payment, ev Event) error {
	to, _ := models.DisputeOf(ev.Status)
	held := int64(0)
	if to.Blocks() {
		held = min(max(ev.Amount, 0), charge.Amount)
	}
	res := tx.Model(&models.Payment{}).Where("id = ? AND dispute = ? AND disputed_amount = ?", charge.ID, charge.Dispute, charge.DisputedAmount).
		Updates(map[string]any{"dispute": to, "disputed_amount": held, "updated_at": s.now().UTC()})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("payments.dispute: payment %s changed under its order's lock", charge.ProviderReference)
	}
	return nil
}

// errUnknownCharge says that an event which names its charge and not its
// order (a dispute, at some gateways) names a charge this shop has no payment of.
var errUnknownCharge = errors.New("names a charge this shop has no payment of")

// orderOfCharge fills in the order of an event that names only its
// charge: the order of the charge's payment row.
func (s *Service) orderOfCharge(ctx context.Context, provider string, ev *Event) error {
	var ids []string
	err := s.db.WithContext(ctx).Model(&models.Payment{}).
		Where("provider = ? AND provider_reference = ?", provider, ev.TransactionID).Limit(1).Pluck("order_id", &ids).Error
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return errUnknownCharge
	}
	ev.OrderID = ids[0]
	return nil
}
