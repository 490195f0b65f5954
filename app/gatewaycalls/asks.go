package gatewaycalls

import (
	"context"
	"fmt"
	"time"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// The janitor's writes to a row whose outcome is unknown. Each is one
// conditional statement that names the row as the janitor read it (its
// asks), so that two janitors at once, or a janitor and an admin's "ask
// now", ask once: the first to write wins, the other changes nothing.

// Due reads up to limit rows whose next ask is due (next_ask_at passed,
// on the database's clock), soonest first.
func (l *Ledger) Due(ctx context.Context, limit int) ([]models.GatewayRequest, error) {
	var rows []models.GatewayRequest
	err := l.db.WithContext(ctx).Where("next_ask_at <= now()").Order("next_ask_at, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("gatewaycalls: due asks: %w", store.Classify(err))
	}
	return rows, nil
}

// Turn takes r's next ask for the caller: it counts the ask and sets the
// next one wait later, before the caller asks, so that a caller that dies
// while asking is followed by the next ask on time. It reports false
// when the row is not as the caller read it (another caller took this
// ask, or the outcome became known) or, unless now, when its ask is not
// due. r becomes the row as taken.
func (l *Ledger) Turn(ctx context.Context, r *models.GatewayRequest, wait time.Duration, now bool) (bool, error) {
	var rows []models.GatewayRequest
	err := l.db.WithContext(ctx).Raw(`UPDATE gateway_requests
		SET asks = asks + 1, next_ask_at = now() + make_interval(secs => ?)
		WHERE id = ? AND asks = ? AND next_ask_at IS NOT NULL AND (? OR next_ask_at <= now())
		RETURNING *`, wait.Seconds(), r.ID, r.Asks, now).Scan(&rows).Error
	if err != nil {
		return false, fmt.Errorf("gatewaycalls: take request %d's ask: %w", r.ID, store.Classify(err))
	}
	if len(rows) == 0 {
		return false, nil
	}
	*r = rows[0]
	return true, nil
}

// Untake gives back the ask Turn took of r when the caller could not
// ask — another caller holds the call's lease, and is asking the
// gateway right now — and sets the next ask for the end of that lease
// (or now, when it has none). An ask that was taken again since, or a
// row whose outcome has become known (its schedule ended), is left as it
// is.
func (l *Ledger) Untake(ctx context.Context, r *models.GatewayRequest) error {
	return l.reschedule(ctx, r, "asks - 1", "greatest(locked_until, now())")
}

// Postpone sets r's next ask wait from now without asking: its gateway
// cannot be asked (a hosted page no API returns), and the janitor looks again
// then whether something else (a notification, the customer's next Pay,
// the order's end) made its outcome known.
func (l *Ledger) Postpone(ctx context.Context, r *models.GatewayRequest, wait time.Duration) error {
	return l.reschedule(ctx, r, "asks", "now() + make_interval(secs => ?)", wait.Seconds())
}

func (l *Ledger) reschedule(ctx context.Context, r *models.GatewayRequest, asks, next string, args ...any) error {
	err := l.db.WithContext(ctx).Exec(`UPDATE gateway_requests SET asks = `+asks+`, next_ask_at = `+next+`
		WHERE id = ? AND asks = ? AND next_ask_at IS NOT NULL`, append(args, r.ID, r.Asks)...).Error
	if err != nil {
		return fmt.Errorf("gatewaycalls: reschedule request %d's ask: %w", r.ID, store.Classify(err))
	}
	return nil
}

// Settle ends r's schedule without asking: its outcome is known without
// the gateway's word (a notification told it; the order of a page is
// over, so no page is needed), or there was nothing to ask (a refund not
// sent). why, when not "", replaces its last error. It changes nothing
// if another caller took an ask of r since it was read.
func (l *Ledger) Settle(ctx context.Context, r *models.GatewayRequest, why string) (bool, error) {
	change := map[string]any{"unknown_since": nil, "next_ask_at": nil}
	if why != "" {
		change["last_error"], change["updated_at"] = truncate(why), l.now().UTC()
	}
	res := l.db.WithContext(ctx).Model(&models.GatewayRequest{}).Where("id = ? AND asks = ?", r.ID, r.Asks).Updates(change)
	if res.Error != nil {
		return false, fmt.Errorf("gatewaycalls: settle request %d: %w", r.ID, store.Classify(res.Error))
	}
	return res.RowsAffected == 1, nil
}

// NotMade records, on r while the caller holds it, the gateway's answer
// that the call whose answer was lost made nothing (no page under its
// key): the row is planned again, not sent, its lease and schedule over,
// and the next caller (the customer's next Pay) sends it with the same
// key. why says what the gateway said.
func (l *Ledger) NotMade(ctx context.Context, r *models.GatewayRequest, why string) (bool, error) {
	res := l.Held(ctx, r).Updates(map[string]any{"phase": models.GatewayPlanned, "locked_until": nil, "last_error": truncate(why),
		"updated_at": l.now().UTC(), "unknown_since": nil, "next_ask_at": nil})
	if res.Error != nil {
		return false, fmt.Errorf("gatewaycalls: record request %d as not made: %w", r.ID, store.Classify(res.Error))
	}
	return res.RowsAffected == 1, nil
}
