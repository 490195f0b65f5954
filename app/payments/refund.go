package payments

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/models"
)

// Refunds are amounts with the gateway's own states. A refunded event
// names refunds by the gateway's ids of them (refund events or callbacks,
// the sandbox's), each with its state —
// pending, succeeded, failed, canceled — or states only the charge's
// refunded total (a charge's amount_refunded), or both.
// Each refund is one refunds row under its unique (provider,
// refund_key), so a refund told twice is one row; the payment keeps the
// total of the rows that count (pending and succeeded). A refund that
// fails after it was counted gives its amount back to the charge.
//
// A total that is higher than all that is known stands for refunds not
// yet named: the difference is one row keyed {reference}:refunded:{total}
// (a placeholder). When the gateway names a refund, the new named row
// takes a placeholder's place — the placeholder shrinks by the named
// amount, or is superseded — so that one refund never counts twice,
// whichever of its two tellings came first. Refunds that failed are
// subtracted from a stated total too: a total told before a refund
// failed and delivered after it must not count that refund again.

// placeholderInfix marks the key of a refund told only by its charge's
// total: {reference}:refunded:{total}.
const placeholderInfix = ":refunded:"

// placeholder reports whether key is such a refund's: it stands for
// refunds not named yet, and is no refund of its own.
func placeholder(key string) bool { return strings.Contains(key, placeholderInfix) }

// refundPlan is what refund news does to its charge.
type refundPlan struct {
	rows   []models.Refund // new refunds: key, amount, status, reason
	moves  []refundMove    // known refunds whose state changes
	shrink []refundShrink  // placeholders that named refunds take the place of
	// before and after are what counts as refunded of the charge.
	before, after int64
	// otherCharge is a refund the event names that is another charge's:
	// a refund belongs to one charge, so the event is rejected whole.
	otherCharge string
}

// refundMove is a known refund's new state.
type refundMove struct {
	row    models.Refund // as it is
	to     models.RefundStatus
	reason string
}

// refundShrink lowers a placeholder's amount by by; to nothing
// supersedes it.
type refundShrink struct {
	row models.Refund
	by  int64
}

// changes reports whether the plan changes anything.
func (p refundPlan) changes() bool { return len(p.rows)+len(p.moves) > 0 }

// state is the refund's state as told; a gateway that tells a refund only
// once it is made (the sandbox, among others) leaves it empty: succeeded.
func (r Refund) state() models.RefundStatus {
	return cmp.Or(r.Status, models.RefundSucceeded)
}

// planRefunds works out what ev's refund news does to charge: which
// refunds are new, which known ones change state, which placeholders
// they take the place of, and the difference a stated total leaves. It
// runs under the order's lock, and first reads the charge again:
// the locking query's join read it in the snapshot taken before it waited for
// the lock, so a refund committed meanwhile would be missing from it.
func planRefunds(tx *gorm.DB, provider string, ev Event, charge *models.Payment) (refundPlan, error) {
	plan := refundPlan{}
	if err := tx.Take(charge, charge.ID).Error; err != nil {
		return plan, err
	}
	plan.before = charge.RefundedAmount
	keys := make([]string, len(ev.Refunds))
	for i, r := range ev.Refunds {
		keys[i] = r.Key
	}
	// The charge's refunds, and any row of another charge under one of
	// the event's keys: a key names one refund, of one charge.
	var known []models.Refund
	q := tx.Where("provider = ? AND payment_id = ?", provider, charge.ID)
	if len(keys) > 0 {
		q = tx.Where("provider = ? AND (payment_id = ? OR refund_key IN ?)", provider, charge.ID, keys)
	}
	if err := q.Order("id").Find(&known).Error; err != nil {
		return plan, err
	}
	byKey := map[string]models.Refund{}
	var placeholders []models.Refund
	var failed int64 // what refunds that did not go through asked, of this charge
	for _, r := range known {
		byKey[r.RefundKey] = r
		if r.PaymentID != charge.ID {
			continue
		}
		if r.Status == models.RefundFailed || r.Status == models.RefundCanceled {
			failed += r.Amount
		}
		if placeholder(r.RefundKey) && r.Status.Counts() {
			placeholders = append(placeholders, r)
		}
	}

	counted := plan.before
	var named int64 // what the new named refunds take of the placeholders
	for _, r := range ev.Refunds {
		to := r.state()
		row, seen := byKey[r.Key]
		switch {
		case seen && row.PaymentID != charge.ID:
			plan.otherCharge = r.Key
			return plan, nil
		case seen && models.RefundMoves(row.Status, to):
			plan.moves = append(plan.moves, refundMove{row: row, to: to, reason: r.Reason})
			if row.Status.Counts() && !to.Counts() {
				counted -= row.Amount
				failed += row.Amount
			}
		case seen:
		case r.Amount > 0:
			plan.rows = append(plan.rows, models.Refund{RefundKey: r.Key, Amount: r.Amount, Status: to, FailureReason: r.Reason})
			named += r.Amount
			if to.Counts() {
				counted += r.Amount
			} else {
				failed += r.Amount
			}
		}
		byKey[r.Key] = models.Refund{RefundKey: r.Key, PaymentID: charge.ID, Status: to} // a key twice in one event counts once
	}
	for _, p := range placeholders {
		if named == 0 {
			break
		}
		by := min(p.Amount, named)
		plan.shrink = append(plan.shrink, refundShrink{row: p, by: by})
		counted -= by
		named -= by
	}
	if rest := ev.Amount - counted - failed; rest > 0 {
		key := ev.TransactionID + placeholderInfix + strconv.FormatInt(ev.Amount, 10)
		if _, seen := byKey[key]; !seen {
			plan.rows = append(plan.rows, models.Refund{RefundKey: key, Amount: rest, Status: models.RefundSucceeded})
			counted += rest
		}
	}
	plan.after = counted
	return plan, nil
}

// decideRefund decides refund news: stale when it changes nothing or
// names a charge that was not taken; rejected when its currency is not
// the charge's, or when the refunds would exceed the charge; else the
// action that moves the charge from what counted before to what counts
// after (models.DecideRefund), or ActionRefundUpdate when only refunds'
// states change.
func decideRefund(ev Event, o *models.Order, charge *models.Payment, plan refundPlan) (models.Action, string) {
	if charge != nil && plan.otherCharge != "" {
		// Counting it here, or moving its row, would change money of
		// another order on the word of an event about this one.
		return models.ActionStale, models.ReasonRefundOfOtherCharge
	}
	if charge == nil || !plan.changes() {
		return models.ActionStale, ""
	}
	taken := charge.Status == models.PaymentSucceeded || charge.Status == models.PaymentRefundRequired || charge.Status == models.PaymentRefunded
	action := models.DecideRefund(o.Status, charge.Status, charge.RefundedFrom, plan.before, plan.after, charge.Amount)
	if plan.after == plan.before && taken {
		action = models.ActionRefundUpdate
	}
	switch {
	case action == models.ActionStale:
		return action, ""
	case ev.Currency != charge.Currency:
		return action, models.ReasonCurrencyMismatch
	case plan.after > charge.Amount || plan.after < 0:
		return action, models.ReasonRefundExceedsPayment
	}
	return action, ""
}

// refund carries out refund news under the order's lock: the new refund
// rows, the known ones' new states, the placeholders they replace, the
// payment's refunded total and status, the order's status for its own
// charge, a Sekali refund the gateway failed after it accepted it, the
// email of each refund that succeeded and that of each refund that
// failed after it had succeeded. It returns the order's status
// afterwards, whether it wrote tasks to the outbox, and how many refunds
// now failed.
func (s *Service) refund(tx *gorm.DB, o *models.Order, charge *models.Payment, plan refundPlan, action models.Action, callbackID int64, requestID string) (models.OrderStatus, bool, int, error) {
	now := s.now().UTC()
	var succeeded []int64 // refunds that now succeeded: their customer hears of it
	var failed []string   // the keys of refunds that now failed
	var unsaid []int64    // refunds that had succeeded and now failed: their customer may have heard of them
	if len(plan.rows) > 0 {
		for i := range plan.rows {
			r := &plan.rows[i]
			r.Provider, r.PaymentID, r.OrderID, r.Currency, r.CallbackID, r.CreatedAt, r.UpdatedAt =
				charge.Provider, charge.ID, o.ID, charge.Currency, &callbackID, now, now
			r.FailureReason = models.Truncate(r.FailureReason, maxFailureReason)
		}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&plan.rows)
		if res.Error != nil {
			return "", false, 0, res.Error
		}
		if res.RowsAffected != int64(len(plan.rows)) { // the order lock makes this impossible; the unique key is the last guard
			return "", false, 0, fmt.Errorf("payments.refund: %d of %d refunds of %s were recorded before", int64(len(plan.rows))-res.RowsAffected, len(plan.rows), charge.ProviderReference)
		}
		for _, r := range plan.rows {
			switch {
			case placeholder(r.RefundKey): // no refund of its own: no email
			case r.Status == models.RefundSucceeded:
				succeeded = append(succeeded, r.ID)
			case !r.Status.Counts():
				failed = append(failed, r.RefundKey)
			}
		}
	}
	for _, m := range plan.moves {
		res := tx.Model(&models.Refund{}).Where("id = ? AND status = ?", m.row.ID, m.row.Status).
			Updates(map[string]any{"status": m.to, "failure_reason": models.Truncate(m.reason, maxFailureReason), "updated_at": now})
		if err := changedOne(res, "refund", m.row.RefundKey); err != nil {
			return "", false, 0, err
		}
		switch {
		case m.to == models.RefundSucceeded:
			succeeded = append(succeeded, m.row.ID)
		case !m.to.Counts():
			failed = append(failed, m.row.RefundKey)
			if m.row.Status == models.RefundSucceeded && !placeholder(m.row.RefundKey) {
				unsaid = append(unsaid, m.row.ID)
			}
		}
	}
	for _, sh := range plan.shrink {
		changes := map[string]any{"amount": sh.row.Amount - sh.by, "updated_at": now}
		if sh.by == sh.row.Amount { // all of it is named now
			changes = map[string]any{"status": models.RefundSuperseded, "updated_at": now}
		}
		res := tx.Model(&models.Refund{}).Where("id = ? AND status = ? AND amount = ?", sh.row.ID, sh.row.Status, sh.row.Amount).Updates(changes)
		if err := changedOne(res, "refund", sh.row.RefundKey); err != nil {
			return "", false, 0, err
		}
	}
	if err := s.refundTotal(tx, charge, plan, action, now); err != nil {
		return "", false, 0, err
	}
	if from, to := action.OrderFrom(), action.OrderStatusAfter(o.Status); from != nil && to != o.Status {
		cause := orders.Cause{What: models.CauseCallback, CallbackID: &callbackID}
		if err := orders.Transition(tx, o, to, now, cause, from...); err != nil {
			return "", false, 0, err
		}
	}
	if err := FailAfterAcceptance(tx, s.tasks, charge, failed, now); err != nil {
		return "", false, 0, err
	}
	var rows []models.OutboxMessage
	for _, id := range succeeded {
		rows = append(rows, s.tasks.RefundSucceeded(o.ID, id, requestID, now))
	}
	// A refund fails after it succeeded once (a failed refund never moves
	// again), so its failure's email task is written once; the email job
	// tells it only if the refund's first email went out.
	for _, id := range unsaid {
		rows = append(rows, s.tasks.RefundFailed(o.ID, id, requestID, now))
	}
	if err := outbox.Add(tx, rows...); err != nil {
		return "", false, 0, err
	}
	return o.Status, len(rows) > 0, len(failed), nil
}

// maxFailureReason bounds a refund's failure_reason.
const maxFailureReason = 500

// refundTotal writes the charge's new refunded total and status: refunded
// when the refunds reach its amount (remembering the status it had), and
// back to that status when a refund fails after that. The WHERE names the
// total and status the plan was made from.
func (s *Service) refundTotal(tx *gorm.DB, charge *models.Payment, plan refundPlan, action models.Action, now time.Time) error {
	if plan.after == plan.before {
		return nil
	}
	status, from := charge.Status, charge.RefundedFrom
	if to, ok := action.PaymentStatus(); ok && to != charge.Status {
		status = to
		if to == models.PaymentRefunded {
			from = charge.Status
		} else {
			from = ""
		}
	}
	res := tx.Model(&models.Payment{}).
		Where("id = ? AND status = ? AND refunded_amount = ?", charge.ID, charge.Status, plan.before).
		Updates(map[string]any{"refunded_amount": plan.after, "status": status, "refunded_from": from, "updated_at": now})
	return changedOne(res, "payment", charge.ProviderReference)
}

// changedOne checks that an update under the order's lock changed its row.
func changedOne(res *gorm.DB, what, key string) error {
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("payments.refund: %s %s changed under its order's lock", what, key)
	}
	return nil
}

// FailAfterAcceptance marks failed the done refunds Sekali asked for
// (console, admin API) of charge whose gateway refunds, named by keys
// (the gateway's id of the refund, or Sekali's key where the gateway
// names it so), failed after the gateway had accepted them: their record
// says why, and what they asked no longer counts as asked. Only the
// charge's own requests: news about one charge never fails a refund of
// another, whatever key it names. The news of the failure calls it; so
// does refunds.Service for a refund whose answer it records after that
// news was applied. Each request it fails raises refund.failed in tx,
// with tasks making its send task.
func FailAfterAcceptance(tx *gorm.DB, tasks alerts.Tasks, charge *models.Payment, keys []string, now time.Time) error {
	if len(keys) == 0 {
		return nil
	}
	var failed []models.GatewayRequest
	err := tx.Model(&failed).Clauses(clause.Returning{}).
		Where("kind = ? AND provider = ? AND payment_id = ? AND (provider_object_id IN ? OR idempotency_key IN ?) AND phase = ?",
			models.GatewayRefund, charge.Provider, charge.ID, keys, keys, models.GatewayDone).
		Updates(map[string]any{"phase": models.GatewayFailed, "last_error": FailedAfterAcceptance, "updated_at": now,
			"unknown_since": nil, "next_ask_at": nil}).Error // the outcome is known: the janitor asks no more
	if err != nil {
		return err
	}
	for _, r := range failed {
		if _, err := alerts.Raise(tx, tasks, alerts.RefundFailedEvent(r, now)); err != nil {
			return err
		}
	}
	return nil
}

// FailedAfterAcceptance is the last_error of a refund Sekali asked for
// that the gateway accepted and then failed; the refunds row keeps the
// gateway's reason.
const FailedAfterAcceptance = "the gateway accepted the refund, then failed it: nothing was refunded"
