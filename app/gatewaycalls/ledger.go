package gatewaycalls

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Ledger is the gateway_requests table as a caller of a gateway uses it:
// claim a row, call, record the answer — each write only while the
// caller still holds the row. Pages (hosted payment pages) and refunds
// call through it, so every kind of call has the same phases, and each
// answer it records is counted once, in sekali_gateway_calls_total.
type Ledger struct {
	db      *gorm.DB
	now     func() time.Time
	metrics *metrics.Set
}

// NewLedger returns the ledger of db, counting the answers it records in m.
func NewLedger(db *gorm.DB, now func() time.Time, m *metrics.Set) *Ledger {
	return &Ledger{db: db, now: now, metrics: m}
}

// Gateway answers, the result label of sekali_gateway_calls_total.
const (
	answerDone       = "done"
	answerRefused    = "refused"
	answerUnanswered = "unanswered"
	answerConflict   = "conflict"
)

// count counts one answer of the gateway to the call of r.
func (l *Ledger) count(r *models.GatewayRequest, answer string) {
	l.metrics.GatewayCalls.WithLabelValues(r.Provider, string(r.Kind), answer).Inc()
}

// Lease is how long a claim holds a row for a call bounded by
// callTimeout: the call's own time and as much again, so that a gateway
// still working on a call whose answer was lost (a timeout) has finished
// before the call is repeated.
func Lease(callTimeout time.Duration) time.Duration { return 2 * callTimeout }

// Claim makes the caller the one that calls the gateway for r: the row
// is planned, or sent by a caller whose lease has passed (it died, or its
// answer was lost), for lease. Each claim counts an attempt, and r becomes the row
// as claimed: its key and attempt are the caller's. Times are the
// database's, one clock for every instance.
//
// From its first claim until its answer is final the call's outcome is
// unknown: the claim starts the janitor's schedule (unknown_since, and
// the first ask FirstAsk later), which the final answer ends.
func (l *Ledger) Claim(ctx context.Context, r *models.GatewayRequest, lease time.Duration) (bool, error) {
	var rows []models.GatewayRequest
	err := l.db.WithContext(ctx).Raw(`UPDATE gateway_requests
		SET phase = ?, attempts = attempts + 1, locked_until = now() + make_interval(secs => ?), updated_at = now(),
			unknown_since = coalesce(unknown_since, now()), next_ask_at = coalesce(next_ask_at, now() + make_interval(secs => ?))
		WHERE id = ? AND (phase = ? OR (phase = ? AND (locked_until IS NULL OR locked_until < now())))
		RETURNING *`, models.GatewaySent, lease.Seconds(), FirstAsk.Seconds(), r.ID, models.GatewayPlanned, models.GatewaySent).Scan(&rows).Error
	if err != nil {
		return false, fmt.Errorf("gatewaycalls: claim request %d: %w", r.ID, store.Classify(err))
	}
	if len(rows) == 0 {
		return false, nil
	}
	*r = rows[0]
	return true, nil
}

// Held is r's row while the caller still holds it: sent, at the attempt
// it claimed. An update through it that changes no row means another
// caller took the row over.
func (l *Ledger) Held(ctx context.Context, r *models.GatewayRequest) *gorm.DB {
	return held(l.db.WithContext(ctx), r)
}

func held(db *gorm.DB, r *models.GatewayRequest) *gorm.DB {
	return db.Model(&models.GatewayRequest{}).
		Where("id = ? AND phase = ? AND attempts = ?", r.ID, models.GatewaySent, r.Attempts)
}

// Done records the gateway's object on r while the caller holds it,
// with what its answer stated of the object's money: the outcome is
// known, and the janitor's schedule of it ends. It reports false when
// another caller had taken the row over.
func (l *Ledger) Done(ctx context.Context, r *models.GatewayRequest, objectID, redirectURL string, said Stated) (bool, error) {
	return l.done(ctx, r, objectID, redirectURL, said, known)
}

// Accepted is Done for a refund the gateway accepted without making it
// yet (pending): the row is done — the gateway's refund exists — but
// what becomes of it is not known, so the janitor's schedule goes on
// until the gateway says (app/janitor).
func (l *Ledger) Accepted(ctx context.Context, r *models.GatewayRequest, objectID string, said Stated) (bool, error) {
	return l.done(ctx, r, objectID, "", said, nil)
}

// known are the columns that end the janitor's schedule of a row: its
// outcome is known.
var known = map[string]any{"unknown_since": nil, "next_ask_at": nil}

func (l *Ledger) done(ctx context.Context, r *models.GatewayRequest, objectID, redirectURL string, said Stated, ends map[string]any) (bool, error) {
	l.count(r, answerDone)
	now := l.now().UTC()
	change := said.columns()
	maps.Copy(change, map[string]any{"phase": models.GatewayDone, "provider_object_id": objectID,
		"redirect_url": redirectURL, "last_error": "", "locked_until": nil, "done_at": now, "updated_at": now})
	maps.Copy(change, ends)
	res := l.Held(ctx, r).Updates(change)
	if res.Error != nil {
		return false, fmt.Errorf("gatewaycalls: record request %d done: %w", r.ID, store.Classify(res.Error))
	}
	return res.RowsAffected == 1, nil
}

// ConflictIn records, in tx, the gateway's answer to r — its object, and
// what it stated of the object's money, which is not what r asked (why
// says how, with both values) — while the caller holds r: phase
// conflict, never sent again. It reports false when another caller had
// taken the row over.
func (l *Ledger) ConflictIn(tx *gorm.DB, r *models.GatewayRequest, objectID, redirectURL string, said Stated, why string) (bool, error) {
	l.count(r, answerConflict)
	now := l.now().UTC()
	changes := said.columns()
	maps.Copy(changes, map[string]any{"phase": models.GatewayConflict, "provider_object_id": objectID,
		"redirect_url": redirectURL, "last_error": truncate(why), "locked_until": nil, "done_at": now, "updated_at": now})
	maps.Copy(changes, known) // answered: nothing left to ask the gateway
	res := held(tx, r).Updates(changes)
	if res.Error != nil {
		return false, fmt.Errorf("gatewaycalls: record request %d in conflict: %w", r.ID, store.Classify(res.Error))
	}
	return res.RowsAffected == 1, nil
}

// Failed records the gateway's "no" on r while the caller holds it.
func (l *Ledger) Failed(ctx context.Context, r *models.GatewayRequest, cause error) error {
	return l.FailedIn(l.db.WithContext(ctx), r, cause)
}

// FailedIn is Failed in tx, for a caller that records more with it.
func (l *Ledger) FailedIn(tx *gorm.DB, r *models.GatewayRequest, cause error) error {
	l.count(r, answerRefused)
	err := held(tx, r).Updates(map[string]any{"phase": models.GatewayFailed, "last_error": truncate(cause.Error()),
		"locked_until": nil, "updated_at": l.now().UTC(), "unknown_since": nil, "next_ask_at": nil}).Error
	if err != nil {
		return fmt.Errorf("gatewaycalls: record request %d failed: %w", r.ID, store.Classify(err))
	}
	return nil
}

// Unknown records an error that says nothing about whether the gateway
// acted (a timeout, a 5xx): the row stays sent and keeps its lease, so
// the call is repeated with the same key once the lease has passed.
func (l *Ledger) Unknown(ctx context.Context, r *models.GatewayRequest, cause error) error {
	l.count(r, answerUnanswered)
	err := l.Held(ctx, r).Updates(map[string]any{"last_error": truncate(cause.Error()), "updated_at": l.now().UTC()}).Error
	if err != nil {
		return fmt.Errorf("gatewaycalls: record request %d's error: %w", r.ID, store.Classify(err))
	}
	return nil
}

// truncate bounds s to the 1,000 bytes last_error holds, on a character
// boundary.
func truncate(s string) string {
	if len(s) > 1000 {
		return strings.ToValidUTF8(s[:1000], "")
	}
	return s
}

// DiscardIn ends refund request id for good, in tx: an operator
// discarded the job that sends it, and why says who and why. A
// discarded request is never claimed again, so never sent, and holds
// nothing back from what is left to refund. A request being sent — its
// lease has not passed, so a call may be under way — is refused
// (EInvalidTransition): whatever that call does would land on a request
// that says it was given up. One that is over (done, failed, declined)
// is left as it is: there is nothing left to give up.
func DiscardIn(tx *gorm.DB, id int64, why string) error {
	res := tx.Exec(`UPDATE gateway_requests
		SET phase = ?, locked_until = NULL, last_error = ?, updated_at = now(), unknown_since = NULL, next_ask_at = NULL
		WHERE id = ? AND kind = ? AND (phase = ? OR (phase = ? AND (locked_until IS NULL OR locked_until < now())))`,
		models.GatewayDiscarded, truncate(why), id, models.GatewayRefund, models.GatewayPlanned, models.GatewaySent)
	if res.Error != nil || res.RowsAffected == 1 {
		return store.Classify(res.Error)
	}
	var r models.GatewayRequest
	if err := tx.Take(&r, "id = ?", id).Error; err != nil {
		return store.Classify(err)
	}
	if r.Phase == models.GatewaySent && r.LockedUntil != nil {
		return models.Errorf(models.EInvalidTransition, "refund %d of order %s is being sent right now (its call's lease runs until %s): discard it once that has passed, or once the gateway answered",
			r.ID, r.OrderID, r.LockedUntil.UTC().Format(time.RFC3339))
	}
	return nil
}
