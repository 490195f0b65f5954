package refunds

import (
	"context"
	"fmt"
	"strconv"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// APIActor is who asks through the admin API: its token, not a person.
// It may ask for refunds, never approve or decline one.
const APIActor = "api"

// NeedsApproval: a refund of amount (minor units) of r's charge takes
// what its order asked within the approval window above its currency's
// REFUND_APPROVAL_ABOVE, so it waits for another owner. Counting what
// was asked before, not this refund alone, is what makes the rule bind:
// ten refunds of a tenth each would otherwise need no one.
func (s *Service) NeedsApproval(r Refundable, amount int64) bool {
	above, ok := s.ApprovalAbove[r.Currency]
	return ok && r.Recent+amount > above
}

// Decision is an owner's answer to a refund awaiting approval.
type Decision struct {
	ID    int64  // the refund record (gateway_requests.id)
	Admin string // the owner's email
	// RequestID is the id of the HTTP request that decides: an approved
	// refund's job and log lines carry it.
	RequestID  string
	RemoteAddr string // for the admin action log
}

// Approve sends a refund that awaits approval: in one transaction, the
// record leaves awaiting_approval for planned with who approved it, its
// job is written and the action logged. Only a person may approve, and
// not the one who asked (EForbidden); a refund no longer awaiting is a
// conflict (EInvalidTransition) — of two owners approving at once, one
// approves and the other is told so, and one job is written.
func (s *Service) Approve(ctx context.Context, d Decision) (*models.GatewayRequest, error) {
	r, err := s.decide(ctx, d, "approve refund", false, func(tx *gorm.DB, r *models.GatewayRequest, o *models.Order) error {
		var charge models.Payment
		if err := tx.Take(&charge, *r.PaymentID).Error; err != nil {
			return store.Classify(err)
		}
		if charge.Dispute.Blocks() {
			// A dispute opened while it waited: sending it now could pay
			// the customer twice. It stays awaiting; an owner declines it.
			return models.Errorf(models.EChargeDisputed, "payment %s of order %s has a dispute that is %s: refund %d cannot be sent; decline it and answer the dispute in the gateway's dashboard",
				charge.ProviderReference, o.ID, charge.Dispute, r.ID)
		}
		if err := s.stillFits(tx, o, &charge, r); err != nil {
			return err // it stays awaiting; an owner declines it
		}
		now := s.now().UTC()
		if err := s.leave(tx, r, map[string]any{"phase": models.GatewayPlanned, "approved_by": d.Admin, "approved_at": now, "updated_at": now}); err != nil {
			return err
		}
		return outbox.Add(tx, s.tasks.Refund(r.ID, r.OrderID, d.RequestID, now))
	})
	if err == nil {
		// After the commit: the relay sends the job now, not at its poll.
		if nerr := outbox.Notify(ctx, s.db); nerr != nil {
			s.log.WarnContext(ctx, "could not wake the outbox relay", "error", nerr)
		}
	}
	return r, err
}

// stillFits checks, under o's lock, that refund r — asked, not sent —
// still fits in what is left of its charge: a refund made since in the
// gateway's dashboard, or a dispute opened meanwhile, may have taken the
// money it was asked of (EInvalidTransition, EChargeDisputed). r holds
// its own amount back, so what is left for it is the charge's left and
// its own amount.
func (s *Service) stillFits(tx *gorm.DB, o *models.Order, charge *models.Payment, r *models.GatewayRequest) error {
	a, err := s.assessCharge(tx, o, charge)
	if err != nil {
		return err
	}
	if left := a.left + r.Amount; r.Amount > left {
		return models.Errorf(models.EInvalidTransition, "only %s is left to refund of payment %s of order %s, less than refund %d asks (%s): it cannot be sent",
			money(max(left, 0), charge.Currency), charge.ProviderReference, o.ID, r.ID, money(r.Amount, r.Currency))
	}
	return nil
}

// Decline ends a refund that awaits approval unsent: declined, with who
// declined it; its amount is no longer held back. Any owner may, the one
// who asked too (withdrawing it sends nothing); not the API token.
func (s *Service) Decline(ctx context.Context, d Decision) (*models.GatewayRequest, error) {
	return s.decide(ctx, d, "decline refund", true, func(tx *gorm.DB, r *models.GatewayRequest, _ *models.Order) error {
		now := s.now().UTC()
		return s.leave(tx, r, map[string]any{"phase": models.GatewayDeclined, "declined_by": d.Admin, "declined_at": now, "updated_at": now})
	})
}

// decide runs change on refund d.ID, awaiting approval, under its
// order's lock, and logs action with it, in one transaction; own: the
// admin who asked for it may.
func (s *Service) decide(ctx context.Context, d Decision, action string, own bool, change func(tx *gorm.DB, r *models.GatewayRequest, o *models.Order) error) (*models.GatewayRequest, error) {
	if d.Admin == "" || d.Admin == APIActor {
		return nil, models.Errorf(models.EForbidden, "a refund is approved or declined by an owner in the console, not through the API token: the token is no person, and approval means a second person")
	}
	r, err := s.get(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		o, err := orders.Lock(tx, r.OrderID)
		if err != nil {
			return err
		}
		// Read again under the order's lock: what another owner decided
		// meanwhile is seen here.
		if err := tx.Take(r, d.ID).Error; err != nil {
			return store.Classify(err)
		}
		if err := mayDecide(r, d.Admin, own); err != nil {
			return err
		}
		if err := change(tx, r, o); err != nil {
			return err
		}
		return admins.RecordTx(tx, models.AdminAction{AdminEmail: d.Admin, Action: action, Target: "refund " + strconv.FormatInt(r.ID, 10),
			Result: models.ActionOK, Detail: fmt.Sprintf("order %s: %s asked by %s", r.OrderID, money(r.Amount, r.Currency), r.RequestedBy),
			RemoteAddr: d.RemoteAddr, CreatedAt: s.now().UTC()})
	})
	if err != nil {
		return nil, fmt.Errorf("refunds.%s: %w", action, err)
	}
	return r, nil
}

// mayDecide: refund r awaits approval and admin is not who asked for it
// (unless own).
func mayDecide(r *models.GatewayRequest, admin string, own bool) error {
	switch {
	case r.Phase != models.GatewayAwaitingApproval:
		who := ""
		switch {
		case r.ApprovedBy != "":
			who = " (approved by " + r.ApprovedBy + ")"
		case r.DeclinedBy != "":
			who = " (declined by " + r.DeclinedBy + ")"
		}
		return models.Errorf(models.EInvalidTransition, "refund %d of order %s is %s%s: it no longer awaits approval", r.ID, r.OrderID, r.Phase, who)
	case r.RequestedBy == admin && !own:
		return models.Errorf(models.EForbidden, "you asked for refund %d of order %s: another owner must approve it", r.ID, r.OrderID)
	}
	return nil
}

// leave moves r out of awaiting_approval with changes; the update says
// which phase it leaves from, so that it happens once.
func (s *Service) leave(tx *gorm.DB, r *models.GatewayRequest, changes map[string]any) error {
	res := tx.Model(&models.GatewayRequest{}).Where("id = ? AND phase = ?", r.ID, models.GatewayAwaitingApproval).Updates(changes)
	if res.Error != nil {
		return store.Classify(res.Error)
	}
	if res.RowsAffected == 0 {
		return models.Errorf(models.EInvalidTransition, "refund %d of order %s no longer awaits approval", r.ID, r.OrderID)
	}
	return tx.Take(r, r.ID).Error
}
