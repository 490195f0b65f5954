package payments

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// recordDelivery writes the audit row of a delivery that did not apply an
// effect (duplicates, conflicts, refusals, failures) and counts it on its
// callback row. The response does not depend on it, so a failure is
// logged, not returned: the audit trail may miss a row while the database
// is down, the business state never does.
func (s *Service) recordDelivery(ctx context.Context, d models.CallbackDelivery, conflict bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&d).Error; err != nil {
			return err
		}
		if d.CallbackID == nil {
			return nil
		}
		set := map[string]any{
			"attempts":         gorm.Expr("attempts + 1"),
			"last_received_at": gorm.Expr("greatest(last_received_at, ?)", d.ReceivedAt),
		}
		if conflict {
			set["conflict_count"] = gorm.Expr("conflict_count + 1")
		}
		return tx.Model(&models.PaymentCallback{}).Where("id = ?", *d.CallbackID).Updates(set).Error
	})
	if err != nil {
		s.log.ErrorContext(ctx, "callback delivery not recorded", "provider", d.Provider,
			"request_id", d.RequestID, "outcome", d.Outcome, "error", err)
	}
}
