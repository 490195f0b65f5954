package alerts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Acks lets an operator acknowledge an alert: seen, and being dealt with.
// An acknowledged alert leaves the dashboard; its webhook goes on as
// before.
type Acks struct {
	db  *gorm.DB
	now func() time.Time
}

// NewAcks returns the acknowledgements of alerts in db.
func NewAcks(db *gorm.DB, now func() time.Time) *Acks { return &Acks{db: db, now: now} }

// Ack is one acknowledgement: which alert, by whom, from where.
type Ack struct {
	ID         int64
	Admin      string
	RemoteAddr string
}

// Acknowledge marks alert a.ID acknowledged by a.Admin, in one
// transaction with its action-log entry, and returns the alert. An alert
// acknowledged already is EInvalidTransition (it says by whom); an
// unknown one ENotFound.
func (k *Acks) Acknowledge(ctx context.Context, a Ack) (models.Alert, error) {
	var alert models.Alert
	err := store.Transaction(ctx, k.db, func(tx *gorm.DB) error {
		err := tx.Take(&alert, "id = ?", a.ID).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return models.Errorf(models.ENotFound, "no alert %d", a.ID)
		}
		if err != nil {
			return err
		}
		now := k.now().UTC()
		res := tx.Model(&models.Alert{}).Where("id = ? AND acknowledged_at IS NULL", a.ID).
			Updates(map[string]any{"acknowledged_at": now, "acknowledged_by": a.Admin})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			if err := tx.Take(&alert, "id = ?", a.ID).Error; err != nil {
				return err
			}
			return models.Errorf(models.EInvalidTransition, "alert %d was acknowledged already, by %s", a.ID, alert.AcknowledgedBy)
		}
		alert.AcknowledgedAt, alert.AcknowledgedBy = &now, a.Admin
		return admins.RecordTx(tx, models.AdminAction{
			AdminEmail: a.Admin, Action: "acknowledge alert", Target: "alert " + strconv.FormatInt(a.ID, 10),
			Result: models.ActionOK, Detail: alert.EventID, RemoteAddr: a.RemoteAddr, CreatedAt: now,
		})
	})
	if err != nil {
		return models.Alert{}, fmt.Errorf("alerts.Acknowledge: %w", err)
	}
	return alert, nil
}
