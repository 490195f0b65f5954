package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// An operator may ask what a kept delivery would do now (DryRun), and
// apply again one refused for a reason that may since have changed
// (ApplyAgain) — both from its kept body and headers, through the same
// parse, keys and decisions as a delivery from the gateway, so that a
// payment applied again is still applied once. Neither checks the
// signature again: its row says it was valid when it arrived (an outcome
// after the signature), and its timestamp has since gone stale.

// AgainOutcomes are the outcomes of deliveries that may be applied again:
// refused for a business reason (422: an unknown order, a wrong amount or
// currency) or not recorded (503). Never a refusal before the event was
// known — a bad signature above all — nor one that changed something.
var AgainOutcomes = []string{models.OutcomeRejected, models.OutcomeError}

// CanApplyAgain says whether delivery d may be applied again: its outcome
// is one of AgainOutcomes and its body is kept.
func CanApplyAgain(d models.CallbackDelivery) bool {
	return d.Body != nil && slices.Contains(AgainOutcomes, d.Outcome)
}

// kept is delivery row, read with its kept body and headers, as a
// Delivery under requestID, and its provider.
func (s *Service) kept(row models.CallbackDelivery, requestID string) (Delivery, Provider, error) {
	if row.Body == nil {
		return Delivery{}, nil, models.Errorf(models.EInvalid, "delivery %d's body is not kept (DELIVERY_BODY_RETENTION)", row.ID)
	}

	p, ok := s.providers[row.Provider]
	if !ok {
		return Delivery{}, nil, models.Errorf(models.EInvalid, "delivery %d is of %s, which this server does not receive", row.ID, row.Provider)
	}
	header := http.Header{}
	var kept map[string][]string
	if err := json.Unmarshal(row.Headers, &kept); err == nil {
		for name, values := range kept {
			header[http.CanonicalHeaderKey(name)] = values
		}
	}
	d := Delivery{Provider: row.Provider, Header: header, ContentType: header.Get("Content-Type"), RemoteAddr: "console",
		RequestID: requestID, body: row.Body, again: true, verified: true}
	if !s.keptUnchanged(row, d) {
		return Delivery{}, nil, models.Errorf(models.EConflict,
			"delivery %d's kept body does not match the fingerprint written when it was kept: it was changed since (or kept before fingerprints were), and is not run again", row.ID)
	}
	return d, p, nil
}

// ApplyAgain runs kept delivery id through the pipeline again, after its
// signature, as a new delivery under requestID (the operator's), with a
// row of its own: it may apply the event now, or say what it did before.
// Only a kept delivery whose outcome is one of AgainOutcomes may be
// applied again (EInvalidTransition otherwise: the delivery's state does
// not allow it, whatever is asked).
func (s *Service) ApplyAgain(ctx context.Context, id int64, requestID string) (Outcome, error) {
	row, err := s.Delivery(ctx, id)
	if err != nil {
		return Outcome{}, err
	}
	switch {
	case row.Body == nil:
		return Outcome{}, models.Errorf(models.EInvalidTransition, "delivery %d's body is not kept (DELIVERY_BODY_RETENTION): it cannot be applied again", id)
	case !CanApplyAgain(row):
		return Outcome{}, models.Errorf(models.EInvalidTransition, "delivery %d was %s: only a delivery refused for a reason that may have changed (%v) is applied again",
			id, row.Outcome, AgainOutcomes)
	}
	d, p, err := s.kept(row, requestID)
	if err != nil {
		return Outcome{}, err
	}
	start := time.Now()
	out, ev := s.evaluate(ctx, p, &d)
	return s.finish(ctx, p, d, out, ev, start), nil
}

// Rehearsal is what a kept delivery would do now: its outcome, and the
// rows its transaction would write or change, read inside it before it
// is rolled back.
type Rehearsal struct {
	Outcome     Outcome
	Event       Event
	Transitions []models.OrderTransition
	Movements   []models.StockMovement
	Outbox      []models.OutboxMessage
	Payments    []models.Payment
}

// errRehearsed rolls a rehearsal's transaction back.
var errRehearsed = errors.New("rehearsed: rolled back")

// DryRun says what kept delivery id would do now, changing nothing: it
// parses the body, and runs the applying transaction — the key's
// reservation, the order's lock, the decision and the effect — then
// rolls it back. It does not ask the gateway's status API: the event is
// taken as the notification says it (ApplyAgain would confirm it).
func (s *Service) DryRun(ctx context.Context, id int64) (Rehearsal, error) {
	row, err := s.Delivery(ctx, id)
	if err != nil {
		return Rehearsal{}, err
	}
	d, p, err := s.kept(row, "dry-run")
	if err != nil {
		return Rehearsal{}, err
	}
	var r Rehearsal
	ev, done, err := s.event(ctx, p, &d)
	switch {
	case err != nil:
		return Rehearsal{}, fmt.Errorf("payments.DryRun: %w", store.Classify(err))
	case done != nil:
		r.Outcome = *done
		return r, nil
	}
	r.Event = ev
	err = store.Pipelined(ctx, s.db, func(ptx *store.Tx) error {
		out, _, done, err := s.applyTx(ctx, ptx, p.Name(), ev, d)
		if err == nil && done != nil {
			err = ptx.Send(done)
		}
		if err != nil {
			return err
		}
		r.Outcome = out
		tx := ptx.DB()
		// What this transaction wrote or changed: rows whose xmin is its
		// own id, found through the order's indexes (and the pending
		// outbox rows').
		const mine = "xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text"
		for _, q := range []*gorm.DB{
			tx.Where("order_id = ? AND "+mine, ev.OrderID).Order("id").Find(&r.Transitions),
			tx.Where("order_id = ? AND "+mine, ev.OrderID).Order("id").Find(&r.Movements),
			tx.Where("status = ? AND "+mine, models.OutboxPending).Order("id").Find(&r.Outbox),
			tx.Where("order_id = ? AND "+mine, ev.OrderID).Order("id").Find(&r.Payments),
		} {
			if q.Error != nil {
				return q.Error
			}
		}
		return errRehearsed
	})
	if !errors.Is(err, errRehearsed) {
		return Rehearsal{}, fmt.Errorf("payments.DryRun: %w", store.Classify(err))
	}
	return r, nil
}

// Delivery reads delivery id with what it kept; ENotFound if there is
// none.
func (s *Service) Delivery(ctx context.Context, id int64) (models.CallbackDelivery, error) {
	var d models.CallbackDelivery
	err := s.db.WithContext(ctx).Take(&d, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return d, models.Errorf(models.ENotFound, "no delivery %d", id)
	}
	if err != nil {
		return d, fmt.Errorf("payments.Delivery: %w", store.Classify(err))
	}
	return d, nil
}

// MaxAgainAtOnce bounds one bulk apply again.
const MaxAgainAtOnce = 1000

// AgainCandidates lists, newest first, the deliveries matching f that may
// be applied again (AgainOutcomes, body kept): one per callback — the
// newest — since applying one applies its event, and at most
// MaxAgainAtOnce. f's outcome, when set, must be one of AgainOutcomes.
func (s *Service) AgainCandidates(ctx context.Context, f DeliveryFilter) ([]int64, error) {
	outcomes := AgainOutcomes
	if f.Outcome != "" {
		if !slices.Contains(AgainOutcomes, f.Outcome) {
			return nil, models.Errorf(models.EInvalid, "outcome must be one of %v to apply again", AgainOutcomes)
		}
		outcomes = []string{f.Outcome}
	}
	f.Outcome, f.Before, f.Limit = "", 0, 0
	q := s.db.WithContext(ctx).Model(&models.CallbackDelivery{}).Where("outcome IN ? AND body IS NOT NULL", outcomes)
	q = deliveryWhere(q, f)
	if !f.From.IsZero() {
		q = q.Where("received_at >= ?", f.From)
	}
	if !f.To.IsZero() {
		q = q.Where("received_at < ?", f.To)
	}
	var rows []struct {
		ID         int64
		CallbackID *int64
	}
	// Deliveries of one callback repeat its event: scan a few times the
	// bound, keep the newest of each.
	if err := q.Select("id", "callback_id").Order("id DESC").Limit(4 * MaxAgainAtOnce).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("payments.AgainCandidates: %w", store.Classify(err))
	}
	seen := map[int64]bool{}
	var ids []int64
	for _, r := range rows {
		if r.CallbackID != nil {
			if seen[*r.CallbackID] {
				continue
			}
			seen[*r.CallbackID] = true
		}
		ids = append(ids, r.ID)
		if len(ids) == MaxAgainAtOnce {
			break
		}
	}
	return ids, nil
}
