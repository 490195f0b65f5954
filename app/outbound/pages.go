package outbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// DefaultCallTimeout bounds one call to a gateway; it is also the lease
// of the request making it.
const DefaultCallTimeout = 15 * time.Second

// Pages opens hosted payment pages at the configured gateway
// (PAYMENT_GATEWAY), once per order: the gateway_requests row is written
// first, with its key, and every press of Pay — twice, in two tabs, after
// a crash — finds it and ends on the same page.
type Pages struct {
	db     *gorm.DB
	opener PageOpener
	log    *slog.Logger
	now    func() time.Time

	// CallTimeout bounds one call to the gateway (DefaultCallTimeout).
	CallTimeout time.Duration
	// PollEvery is how often a press waits for another press's call to
	// end (tests shorten it).
	PollEvery time.Duration
}

// NewPages returns the payment pages of the gateway opener speaks to.
func NewPages(db *gorm.DB, opener PageOpener, log *slog.Logger, now func() time.Time) *Pages {
	return &Pages{db: db, opener: opener, log: log, now: now, CallTimeout: DefaultCallTimeout, PollEvery: 50 * time.Millisecond}
}

// Provider is the gateway new payments go to.
func (p *Pages) Provider() string { return p.opener.Provider() }

// PageOrigins are where the gateway's hosted pages are served from.
func (p *Pages) PageOrigins() []string { return p.opener.PageOrigins() }

// Open returns the hosted payment page of order o, a pending order,
// asking the gateway for it the first time. returnURL is where the
// gateway sends the customer back.
//
// If the call times out or the gateway fails, the answer is EUnavailable
// and the row stays sent: the next press sends the same request with the
// same key, and a gateway that honours it (Stripe) answers with the page
// it made the first time. A gateway's "no" fails the row for good.
func (p *Pages) Open(ctx context.Context, o *models.Order, items []PageItem, returnURL string) (Page, error) {
	if o.Status != models.OrderPending {
		return Page{}, models.Errorf(models.EInvalidTransition, "order %s is %s: there is nothing to pay", o.ID, o.Status)
	}
	r, err := p.plan(ctx, o)
	if err != nil {
		return Page{}, err
	}
	for {
		switch r.Phase {
		case models.GatewayDone:
			return Page{ObjectID: r.ProviderObjectID, RedirectURL: r.RedirectURL}, nil
		case models.GatewayFailed:
			return Page{}, models.Errorf(models.EConflict, "the payment gateway would not open a payment page for this order: %s", r.LastError)
		}
		claimed, err := p.claim(ctx, r)
		if err != nil {
			return Page{}, err
		}
		if claimed {
			return p.call(ctx, r, o, items, returnURL)
		}
		// Another press is calling the gateway right now: wait for it.
		select {
		case <-ctx.Done():
			return Page{}, models.Errorf(models.EUnavailable, "the payment page is still being prepared; try again")
		case <-time.After(p.PollEvery):
		}
		if err := p.db.WithContext(ctx).Take(r, r.ID).Error; err != nil {
			return Page{}, fmt.Errorf("outbound.Open: %w", store.Classify(err))
		}
	}
}

// plan finds or writes the order's create_payment row. Its key is the
// order id: the one id of the order every gateway can carry back in its
// notifications (Midtrans's order_id, Stripe's Idempotency-Key beside
// metadata.order_id, Xendit's external_id).
func (p *Pages) plan(ctx context.Context, o *models.Order) (*models.GatewayRequest, error) {
	db := p.db.WithContext(ctx)
	r := models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: o.ID, Provider: p.opener.Provider(),
		IdempotencyKey: o.ID, Amount: o.TotalAmount, Currency: o.Currency, Phase: models.GatewayPlanned}
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&r).Error; err != nil {
		return nil, fmt.Errorf("outbound.Open: plan: %w", store.Classify(err))
	}
	var found models.GatewayRequest
	err := db.Take(&found, "order_id = ? AND provider = ? AND kind = ?", o.ID, r.Provider, models.GatewayCreatePayment).Error
	if err != nil {
		return nil, fmt.Errorf("outbound.Open: plan: %w", store.Classify(err))
	}
	return &found, nil
}

// claim makes this press the one that calls the gateway: the row is
// planned, or sent by a press whose lease has passed (it died, or gave
// up). Each claim counts an attempt.
func (p *Pages) claim(ctx context.Context, r *models.GatewayRequest) (bool, error) {
	now := p.now().UTC()
	res := p.db.WithContext(ctx).Model(&models.GatewayRequest{}).
		Where("id = ? AND (phase = ? OR (phase = ? AND (locked_until IS NULL OR locked_until < ?)))",
			r.ID, models.GatewayPlanned, models.GatewaySent, now).
		Updates(map[string]any{"phase": models.GatewaySent, "attempts": gorm.Expr("attempts + 1"),
			"locked_until": now.Add(p.CallTimeout), "updated_at": now})
	if res.Error != nil {
		return false, fmt.Errorf("outbound.Open: claim: %w", store.Classify(res.Error))
	}
	return res.RowsAffected == 1, nil
}

// call asks the gateway and records its answer on the row.
func (p *Pages) call(ctx context.Context, r *models.GatewayRequest, o *models.Order, items []PageItem, returnURL string) (Page, error) {
	callCtx, cancel := context.WithTimeout(ctx, p.CallTimeout)
	defer cancel()
	req := PageRequest{OrderID: o.ID, Key: r.IdempotencyKey, Amount: o.TotalAmount,
		Currency: o.Currency, CustomerEmail: o.CustomerEmail, Items: items, ReturnURL: returnURL}
	page, err := p.opener.OpenPage(callCtx, req)
	if IsKeySpent(err) {
		// The gateway will not take this key again (an earlier attempt
		// whose answer was lost may have spent it): ask once more under
		// a new one, {order}~{attempt}, recorded on the row first.
		if req.Key, err = p.rotateKey(ctx, r, o.ID); err == nil {
			page, err = p.opener.OpenPage(callCtx, req)
		}
	}
	now := p.now().UTC()
	// The answer is written whatever happens to the request meanwhile: a
	// page the gateway made must not be forgotten.
	db := p.db.WithContext(context.WithoutCancel(ctx)).Model(&models.GatewayRequest{}).Where("id = ? AND phase = ?", r.ID, models.GatewaySent)
	log := p.log.With("provider", r.Provider, "order_id", o.ID, "idempotency_key", r.IdempotencyKey, "attempt", r.Attempts+1)
	switch {
	case err == nil && page.ObjectID != "" && page.RedirectURL != "":
		if err := db.Updates(map[string]any{"phase": models.GatewayDone, "provider_object_id": page.ObjectID,
			"redirect_url": page.RedirectURL, "last_error": "", "locked_until": nil, "done_at": now, "updated_at": now}).Error; err != nil {
			return Page{}, fmt.Errorf("outbound.Open: record the page: %w", store.Classify(err))
		}
		log.InfoContext(ctx, "payment page opened", "provider_object_id", page.ObjectID)
		return page, nil
	case err == nil:
		err = errors.New("the gateway's answer has no object id or no redirect URL")
	case IsRefused(err):
		if uerr := db.Updates(map[string]any{"phase": models.GatewayFailed, "last_error": truncate(err.Error()),
			"locked_until": nil, "updated_at": now}).Error; uerr != nil {
			return Page{}, fmt.Errorf("outbound.Open: record the refusal: %w", store.Classify(uerr))
		}
		log.WarnContext(ctx, "payment page refused", "error", err)
		return Page{}, models.Errorf(models.EConflict, "the payment gateway would not open a payment page for this order: %s", err)
	}
	// Unknown: the gateway may have acted. The row stays sent, its lease
	// ends now, and the next press repeats the call with the same key.
	if uerr := db.Updates(map[string]any{"last_error": truncate(err.Error()), "locked_until": nil, "updated_at": now}).Error; uerr != nil {
		log.ErrorContext(ctx, "could not record a gateway error", "error", uerr)
	}
	log.WarnContext(ctx, "payment page not opened yet", "error", err)
	return Page{}, models.Errorf(models.EUnavailable, "the payment gateway did not answer; try again")
}

// rotateKey gives the row a new key, {order}~{n} for its nth attempt,
// while this press holds it (phase sent, the key unchanged).
func (p *Pages) rotateKey(ctx context.Context, r *models.GatewayRequest, orderID string) (string, error) {
	key := fmt.Sprintf("%s%s%d", orderID, KeySeparator, r.Attempts+1)
	res := p.db.WithContext(ctx).Model(&models.GatewayRequest{}).
		Where("id = ? AND phase = ? AND idempotency_key = ?", r.ID, models.GatewaySent, r.IdempotencyKey).
		Updates(map[string]any{"idempotency_key": key, "updated_at": p.now().UTC()})
	if res.Error != nil {
		return "", fmt.Errorf("outbound.Open: a new key: %w", store.Classify(res.Error))
	}
	if res.RowsAffected != 1 {
		return "", errors.New("outbound.Open: the request changed hands before its new key was written")
	}
	r.IdempotencyKey = key
	return key, nil
}

// KeySeparator separates an order id from the attempt number in a key
// that replaced a spent one: ORD-…~2. Order ids never contain it, so a
// gateway's notification of the new key names the order before it
// (OrderOfKey).
const KeySeparator = "~"

// OrderOfKey is the order id of a key: the key itself, or what precedes
// KeySeparator.
func OrderOfKey(key string) string {
	order, _, _ := strings.Cut(key, KeySeparator)
	return order
}

func truncate(s string) string {
	if len(s) > 1000 {
		return s[:1000]
	}
	return s
}
