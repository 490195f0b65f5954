package mail

import (
	"context"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// AdminNotice is the template of an email that tells an admin of a
// change to their own account's second factor: whoever made it — they
// themselves, an owner, or someone holding a session of theirs — the
// admin learns of it.
const AdminNotice = "admin_notice"

// AdminNoticeKey is the key of the notice to admin adminID of a change
// made at at: admin_notice:{admin_id}:{unix microseconds}.
func AdminNoticeKey(adminID int64, at time.Time) string {
	return Key(AdminNotice, strconv.FormatInt(adminID, 10)+":"+strconv.FormatInt(at.UnixMicro(), 10))
}

// AdminNoticeTx writes in tx, the transaction of the change it tells
// of, the notice with key to the admin to: the change and its email
// commit together or not at all.
func AdminNoticeTx(tx *gorm.DB, key, to, subject, body string) error {
	_, err := intent(tx, models.OutboundEmail{Key: key, MessageID: MessageID(key), To: to, Subject: subject, Body: body,
		Status: models.EmailPending})
	return err
}

// AdminNoticeIntent returns the row of the notice with key, written with
// its change; nil when there is none (the change was rolled back).
func AdminNoticeIntent(ctx context.Context, db *gorm.DB, key string) (*models.OutboundEmail, error) {
	var rows []models.OutboundEmail
	if err := db.WithContext(ctx).Where("key = ?", key).Limit(1).Find(&rows).Error; err != nil || len(rows) == 0 {
		return nil, err
	}
	return &rows[0], nil
}
