package jobs

import (
	"context"

	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/models"
)

// ListOutbox returns the outbox rows the console's outbox page shows;
// DispatchNow acts on them.
func (c *Console) ListOutbox(ctx context.Context, f outbox.Filter) ([]models.OutboxMessage, int64, error) {
	return outbox.List(ctx, c.db, f)
}
