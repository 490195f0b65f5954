// Package refunds refunds charges at their gateway, once: an admin asks
// (the console or the admin API), the refund record is written with its
// provider idempotency key and its job in one transaction, and the job
// asks the gateway — repeating the call with the same key after a
// timeout or a crash until the gateway answers definitely. What the
// refund does to the money is applied by the gateway's answer or its
// notification, whichever comes first: both name the refund the same way.
package refunds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// MaxReason bounds a refund's reason, in bytes.
const MaxReason = 500

// Tasks is what the service needs of the job system: the outbox row of
// the job that sends refund record refundRequestID of order orderID,
// asked for by the admin's HTTP request requestID.
type Tasks interface {
	Refund(refundRequestID int64, orderID, requestID string, now time.Time) models.OutboxMessage
	alerts.Tasks // refund.failed, when the gateway refuses a refund
}

// answerApplier applies a gateway's answer as its notification would be
// applied (payments.Service).
type answerApplier interface {
	ApplyAnswer(ctx context.Context, provider, requestID string, ev payments.Event) (payments.Outcome, error)
}

// Service asks gateways for refunds.
type Service struct {
	db        *gorm.DB
	ledger    *gatewaycalls.Ledger
	payments  answerApplier
	refunders map[string]gatewaycalls.Refunder
	tasks     Tasks
	log       *slog.Logger
	now       func() time.Time

	// CallTimeout bounds one call to a gateway
	// (gatewaycalls.DefaultCallTimeout); the lease of a claim is twice it.
	CallTimeout time.Duration
	// ApprovalAbove (REFUND_APPROVAL_ABOVE) is, per currency, the amount
	// in minor units above which a refund waits for another owner's
	// approval before it is sent; a currency not named needs none. The
	// amount is what the order asked within ApprovalWindow, this refund
	// included: three refunds of a third each are one large refund.
	ApprovalAbove map[string]int64
	// ApprovalWindow (REFUND_APPROVAL_WINDOW) is how far back the
	// refunds an order asked count towards ApprovalAbove.
	ApprovalWindow time.Duration
}

// NewService returns the refunds of the charges of refunders' gateways,
// counting the gateways' answers in m.
func NewService(db *gorm.DB, log *slog.Logger, now func() time.Time, m *metrics.Set, applier answerApplier, tasks Tasks, refunders ...gatewaycalls.Refunder) *Service {
	s := &Service{db: db, ledger: gatewaycalls.NewLedger(db, now, m), payments: applier, refunders: map[string]gatewaycalls.Refunder{},
		tasks: tasks, log: log, now: now, CallTimeout: gatewaycalls.DefaultCallTimeout, ApprovalWindow: DefaultApprovalWindow}
	for _, r := range refunders {
		s.refunders[r.Provider()] = r
	}
	return s
}

// DefaultApprovalWindow is REFUND_APPROVAL_WINDOW's default.
const DefaultApprovalWindow = 24 * time.Hour

// Request is an admin's refund of an order.
type Request struct {
	OrderID string
	// Payment names the charge refunded by its provider reference; ""
	// is the order's own (chargeOf). Another charge of the order can be
	// refunded when it had to be: a second charge of a paid order.
	Payment string
	// Amount is in the charge's major units, as a decimal ("75000",
	// "12.50"); "" refunds everything that is left.
	Amount string
	Reason string
	Admin  string // who asks: an admin's email, or "api"
	// RequestID is the id of the HTTP request that asks: its job and
	// their log lines carry it, so that one search follows the refund
	// from the admin's button to the gateway.
	RequestID string
}

// Validate checks what does not need the database.
func (r Request) Validate() error {
	if err := CheckAmount(r.Amount); err != nil {
		return err
	}
	return CheckReason(r.Reason)
}

// CheckAmount checks that an amount is written as one, before its
// currency is known ("" is all that is left): the form
// payments.ParseAmount reads.
func CheckAmount(amount string) error {
	if amount == "" {
		return nil
	}
	if err := payments.CheckAmountText(amount); err != nil {
		return models.Errorf(models.EInvalid, "amount must be a positive number in major units, such as 75000 or 12.50 (%v)", err)
	}
	return nil
}

// CheckReason checks that a refund says why, within MaxReason bytes.
func CheckReason(reason string) error {
	switch {
	case !models.CleanText(reason) || len(reason) > MaxReason:
		return models.Errorf(models.EInvalid, "reason must be at most %d bytes of text", MaxReason)
	case strings.TrimSpace(reason) == "":
		return models.Errorf(models.EInvalid, "say why the order is refunded (reason)")
	}
	return nil
}

// RequestOnce is RequestTx under an Idempotency-Key: the refund record,
// its job and the answer commit together, so the same request again gets
// the same refund, never a second one.
func (s *Service) RequestOnce(ctx context.Context, once idempotency.Once, r Request, answer idempotency.Answer[*models.GatewayRequest]) (idempotency.Response, error) {
	var queued bool
	res, err := once.Do(ctx, func(tx *gorm.DB) (idempotency.Response, error) {
		refund, err := s.RequestTx(tx, r)
		queued = err == nil
		return answer(refund, err)
	})
	if err == nil && queued && !res.Replayed {
		// After the commit: the relay sends the job now, not at its poll.
		if nerr := outbox.Notify(ctx, s.db); nerr != nil {
			s.log.WarnContext(ctx, "could not wake the outbox relay", "error", nerr)
		}
	}
	return res, err
}

// RequestTx writes the refund record of r and the job that sends it, in
// the caller's transaction, under the order's lock: two admins refunding
// at once are one after the other, and the second sees what the first
// took. The charge refunded is the order's own (paid or partly refunded)
// or, for a refund_required order, the charge that has no stock. Above
// what is left — the charge less what is refunded and what refunds not
// yet answered ask — is refused (422): nothing is written, nothing sent.
func (s *Service) RequestTx(tx *gorm.DB, r Request) (*models.GatewayRequest, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if !models.ValidOrderID(r.OrderID) {
		return nil, models.Errorf(models.ENotFound, "no order %q", r.OrderID)
	}
	o, err := orders.Lock(tx, r.OrderID)
	if err != nil {
		return nil, err
	}
	a, err := s.assess(tx, o, r.Payment)
	if err != nil {
		return nil, err
	}
	charge := a.charge
	left := a.refundable(o.ID)
	amount, err := left.Amount(r.Amount)
	if err != nil {
		return nil, err
	}
	req := models.GatewayRequest{
		Kind: models.GatewayRefund, OrderID: o.ID, Provider: charge.Provider, PaymentID: &charge.ID,
		// {order}-R{n}: readable, unique per provider (the order id is),
		// and within every gateway's alphabet for its key.
		IdempotencyKey: fmt.Sprintf("%s-R%d", o.ID, a.asked+1),
		Amount:         amount, Currency: charge.Currency, Phase: models.GatewayPlanned,
		Reason: strings.TrimSpace(r.Reason), RequestedBy: r.Admin,
	}
	if s.NeedsApproval(left, amount) {
		// Written with no job: nothing is sent until another owner
		// approves it (Approve), and its amount is held back meanwhile.
		req.Phase = models.GatewayAwaitingApproval
	}
	// The record and its job, in a savepoint: when either fails, neither
	// remains in the caller's transaction (which may store an answer).
	err = tx.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&req).Error; err != nil {
			return store.Classify(err)
		}
		if req.Phase == models.GatewayAwaitingApproval {
			return nil
		}
		return outbox.Add(tx, s.tasks.Refund(req.ID, o.ID, r.RequestID, s.now()))
	})
	if err != nil {
		return nil, fmt.Errorf("refunds.Request: %w", err)
	}
	return &req, nil
}

// assessment is what a refund of an order may take.
type assessment struct {
	charge *models.Payment
	left   int64 // minor units: the charge less what is refunded and what open refunds ask
	open   int64 // minor units that held refunds (awaiting approval, planned, sent, in conflict and not counted) ask
	asked  int64 // how many refunds were asked of the order before
	recent int64 // minor units the order's refunds asked within the approval window, but those that came to nothing
}

// assess finds the charge a refund of o refunds (payment names it by its
// reference, or "": chargeOf) and what is left of it.
func (s *Service) assess(tx *gorm.DB, o *models.Order, payment string) (assessment, error) {
	charge, err := chargeOf(tx, o, payment)
	if err != nil {
		return assessment{}, err
	}
	return s.assessCharge(tx, o, charge)
}

// assessCharge is what is left of o's charge.
func (s *Service) assessCharge(tx *gorm.DB, o *models.Order, charge *models.Payment) (assessment, error) {
	if _, ok := s.refunders[charge.Provider]; !ok {
		return assessment{}, models.Errorf(models.EInvalidTransition, "order %s was paid through %s, which Sekali cannot ask for refunds: refund it in the gateway's dashboard", o.ID, charge.Provider)
	}
	if charge.Dispute.Blocks() {
		// The bank holds the money (open) or took it back (lost): a
		// refund now would pay the customer twice.
		return assessment{}, models.Errorf(models.EChargeDisputed, "payment %s of order %s has a dispute that is %s (%s): it cannot be refunded; answer the dispute in the gateway's dashboard",
			charge.ProviderReference, o.ID, charge.Dispute, money(charge.DisputedAmount, charge.Currency))
	}
	var asked struct{ Open, Count, Recent int64 }
	// Open refunds hold back money of their own charge, and so does one
	// the gateway answered in conflict until the gateway's notification
	// of its refund is counted (then that counts instead); the count,
	// which numbers the keys, and what was asked recently, which the
	// approval threshold weighs, are of the whole order.
	err := tx.Raw(`SELECT coalesce(sum(amount) FILTER (WHERE payment_id = ? AND (phase IN ? OR phase = ? AND NOT `+conflictCounted+`)), 0) AS open,
		count(*) AS count, coalesce(sum(amount) FILTER (WHERE phase NOT IN ? AND currency = ? AND created_at > ?), 0) AS recent
		FROM gateway_requests g WHERE order_id = ? AND kind = ?`,
		charge.ID, models.HeldPhases, models.GatewayConflict, models.CameToNothing, charge.Currency, s.now().Add(-s.ApprovalWindow),
		o.ID, models.GatewayRefund).Scan(&asked).Error
	if err != nil {
		return assessment{}, err
	}
	left := charge.Amount - charge.RefundedAmount - asked.Open - charge.DisputedAmount
	return assessment{charge: charge, left: left, open: asked.Open, asked: asked.Count, recent: asked.Recent}, nil
}

// conflictCounted says of refund request g, answered in conflict, that
// the gateway's notification of its refund is counted: a pending or
// succeeded refund of its charge named by its key or the gateway's id.
const conflictCounted = `EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = g.payment_id AND r.status IN ('pending', 'succeeded')
	AND r.refund_key IN (g.idempotency_key, g.provider_object_id))`

// Refundable is what is left to refund of an order, and through whom;
// Why says, when nothing can be refunded, why not.
type Refundable struct {
	OrderID  string
	Payment  string // the charge's provider reference
	Provider string
	Currency string
	Left     int64 // minor units
	// Open is what refunds the gateway has not answered ask, and those
	// it answered with another amount or currency whose refund is not
	// counted yet, in minor units: held back from Left.
	Open int64
	// Recent is what the order's refunds asked within the approval
	// window (minor units), those that came to nothing left out: a
	// refund needs approval when Recent and its amount are together
	// above the threshold (NeedsApproval).
	Recent int64
	Why    string
	// Disputed: the charge's dispute is open or lost, and Why says so.
	Disputed bool
}

// refundable is what a says of the order's refunds.
func (a assessment) refundable(orderID string) Refundable {
	return Refundable{OrderID: orderID, Payment: a.charge.ProviderReference, Provider: a.charge.Provider, Currency: a.charge.Currency,
		Left: a.left, Open: a.open, Recent: a.recent}
}

// Amount reads text, an amount in major units ("" is all that is left),
// as minor units, and checks that it is no more than what is left: the
// one check of an amount, for the confirm page and the refund alike.
func (r Refundable) Amount(text string) (int64, error) {
	if err := CheckAmount(text); err != nil {
		return 0, err
	}
	amount := r.Left
	if text != "" {
		var err error
		if amount, err = payments.ParseAmount(text, r.Currency); err != nil {
			return 0, models.Errorf(models.EInvalid, "amount %s is not a positive amount of %s: %v", text, r.Currency, err)
		}
		if amount == 0 {
			return 0, models.Errorf(models.EInvalid, "amount %s is not a positive amount of %s", text, r.Currency)
		}
	}
	if r.Left <= 0 || amount > r.Left {
		msg := fmt.Sprintf("at most %s is left to refund of order %s", money(max(r.Left, 0), r.Currency), r.OrderID)
		if r.Open > 0 {
			// What an unanswered refund asks is held back until the
			// gateway answers it, even if its notification came first;
			// what one answered in conflict asks, until the gateway's
			// notification of its refund is counted.
			msg += fmt.Sprintf("; %s is held back by refunds the gateway has not answered yet, or answered with another amount or currency, until what it refunded is counted", money(r.Open, r.Currency))
		}
		return 0, models.Errorf(models.EInvalid, "%s", msg)
	}
	return amount, nil
}

// Refundable says what is left to refund of order id's charge named by
// payment, its provider reference ("": the order's own, chargeOf).
func (s *Service) Refundable(ctx context.Context, id, payment string) (Refundable, error) {
	o, err := s.order(ctx, id)
	if err != nil {
		return Refundable{}, err
	}
	// One snapshot: read apart, a refund done between the payment's read
	// and the open refunds' would be neither refunded nor held back, and
	// the whole charge would look left.
	var r Refundable
	err = store.Snapshot(ctx, s.db, func(tx *gorm.DB) error {
		r, err = s.refundable(tx, o, payment)
		return err
	})
	return r, err
}

// Owed are the charges of order id, besides its own, that must go back to
// the customer — a second charge of a paid order (refund_required) — and
// that Sekali can still ask a refund of.
func (s *Service) Owed(ctx context.Context, id string) ([]Refundable, error) {
	o, err := s.order(ctx, id)
	if err != nil {
		return nil, err
	}
	var owed []Refundable
	err = store.Snapshot(ctx, s.db, func(db *gorm.DB) error { // one snapshot, as Refundable's
		own, err := refundableCharge(db, o)
		switch {
		case models.ErrorCode(err) == models.EInvalidTransition: // no charge of its own to leave out
			own = &models.Payment{}
		case err != nil:
			return fmt.Errorf("refunds.Owed: %w", store.Classify(err))
		}
		var charges []models.Payment
		if err := db.Where("order_id = ? AND status = ? AND id <> ?", o.ID, models.PaymentRefundRequired, own.ID).Order("id").Find(&charges).Error; err != nil {
			return fmt.Errorf("refunds.Owed: %w", store.Classify(err))
		}
		for i := range charges {
			a, err := s.assessCharge(db, o, &charges[i])
			r, err := describe(o, charges[i].ProviderReference, a, err)
			if err != nil {
				return err
			}
			if r.Left > 0 {
				owed = append(owed, r)
			}
		}
		return nil
	})
	return owed, err
}

// order reads order id, outside a transaction.
func (s *Service) order(ctx context.Context, id string) (*models.Order, error) {
	if !models.ValidOrderID(id) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	var o models.Order
	if err := s.db.WithContext(ctx).Take(&o, "id = ?", id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, models.Errorf(models.ENotFound, "no order %q", id)
		}
		return nil, fmt.Errorf("refunds: order %s: %w", id, store.Classify(err))
	}
	return &o, nil
}

// refundable is what is left of o's charge named by payment; Why says
// why nothing is.
func (s *Service) refundable(db *gorm.DB, o *models.Order, payment string) (Refundable, error) {
	a, err := s.assess(db, o, payment)
	return describe(o, payment, a, err)
}

// describe is what assessing o's charge named by payment found: what is
// left of it, or why nothing is.
func describe(o *models.Order, payment string, a assessment, err error) (Refundable, error) {
	switch code := models.ErrorCode(err); {
	case code == models.EInvalidTransition, code == models.EChargeDisputed:
		return Refundable{OrderID: o.ID, Payment: payment, Why: models.ErrorMessage(err), Disputed: code == models.EChargeDisputed}, nil
	case err != nil:
		return Refundable{}, fmt.Errorf("refunds.Refundable: %w", store.Classify(err))
	}
	r := a.refundable(o.ID)
	if r.Left <= 0 {
		r.Left = 0
		r.Why = "nothing is left to refund: the refunds asked add up to the payment"
	}
	return r, nil
}

// chargeOf is the charge a refund of o refunds: the payment of o whose
// provider reference is payment — one that had to be refunded, or the
// charge that paid a refundable order — or, for "", refundableCharge's.
func chargeOf(tx *gorm.DB, o *models.Order, payment string) (*models.Payment, error) {
	if payment == "" {
		return refundableCharge(tx, o)
	}
	var charge models.Payment
	err := tx.Where("order_id = ? AND provider_reference = ?", o.ID, payment).Order("id").Take(&charge).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, models.Errorf(models.EInvalid, "order %s has no payment %q", o.ID, payment)
	case err != nil:
		return nil, err
	case charge.Status == models.PaymentRefundRequired, charge.Status == models.PaymentSucceeded && o.Status.Refundable():
		return &charge, nil
	}
	return nil, models.Errorf(models.EInvalidTransition, "payment %s of order %s is %s: there is nothing to refund", payment, o.ID, charge.Status)
}

// refundableCharge is the charge a refund of o refunds.
func refundableCharge(tx *gorm.DB, o *models.Order) (*models.Payment, error) {
	var status models.PaymentStatus
	switch {
	case o.Status.Refundable():
		status = models.PaymentSucceeded
	case o.Status == models.OrderRefundRequired:
		status = models.PaymentRefundRequired
	default:
		return nil, models.Errorf(models.EInvalidTransition, "order %s is %s: there is no payment to refund", o.ID, o.Status)
	}
	var charge models.Payment
	err := tx.Where("order_id = ? AND status = ?", o.ID, status).Order("id").Take(&charge).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.EInvalidTransition, "order %s has no %s payment to refund", o.ID, status)
	}
	if err != nil {
		return nil, err
	}
	return &charge, nil
}

// money is amount in major units with its currency, for a message.
func money(amount int64, currency string) string {
	return payments.MajorText(amount, currency, models.CurrencyExponent(currency)) + " " + currency
}
