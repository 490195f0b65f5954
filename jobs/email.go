package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/models"
)

// EmailEffect sends a templated email (email:send:{template}:{order_id}).
// The SMTP session runs inside the job's transaction: if the process dies
// after the server accepted the message but before the commit, the retry
// sends it again with the same Message-ID (see app/mail).
func EmailEffect(sender mail.Sender, from string, now func() time.Time) Effect {
	return func(ctx context.Context, tx *gorm.DB, t *asynq.Task) (string, error) {
		var p models.EmailPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.OrderID == "" {
			return "", fmt.Errorf("decode %s: %v: %w", t.Type(), err, asynq.SkipRetry)
		}
		if p.Template != models.EmailOrderPaid {
			return "", fmt.Errorf("email template %q: unknown: %w", p.Template, asynq.SkipRetry)
		}
		e, err := mail.SendOrderPaidTx(ctx, tx, sender, from, p.OrderID, now())
		if err != nil {
			return "", skipIfGone(err)
		}
		if e == nil {
			return "not paid: nothing to send", nil
		}
		return e.MessageID, nil
	}
}
