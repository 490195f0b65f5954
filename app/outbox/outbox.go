// Package outbox writes tasks into outbox_messages inside the caller's
// transaction, so a task exists exactly when the state change that causes
// it committed. A relay (jobs/relay.go) moves due rows to the queue.
package outbox

import (
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/models"
)

// Add writes msgs in tx. A message whose task_id is already in the outbox
// is skipped: the task it names exists already.
func Add(tx *gorm.DB, msgs ...models.OutboxMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&msgs).Error; err != nil {
		return fmt.Errorf("outbox.Add: %w", err)
	}
	return nil
}
