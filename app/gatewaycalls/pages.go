package gatewaycalls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// DefaultCallTimeout bounds one call to a gateway; it is also the lease
// of the request making it.
const DefaultCallTimeout = 10 * time.Second

// Pages opens hosted payment pages at the configured gateway
// (PAYMENT_GATEWAY), once per order: the gateway_requests row is written
// first, with its key, and every press of Pay — twice, in two tabs, after
// a crash — finds it and ends on the same page.
type Pages struct {
	db     *gorm.DB
	ledger *Ledger
	opener PageOpener
	log    *slog.Logger
	now    func() time.Time

	// CallTimeout bounds one call to the gateway (DefaultCallTimeout).
	CallTimeout time.Duration
	// PollEvery is how often a press waits for another press's call to
	// end (tests shorten it).
	PollEvery time.Duration
}

// NewPages returns the payment pages of the gateway opener speaks to,
// counting the gateway's answers in m.
func NewPages(db *gorm.DB, opener PageOpener, log *slog.Logger, now func() time.Time, m *metrics.Set) *Pages {
	return &Pages{db: db, ledger: NewLedger(db, now, m), opener: opener, log: log, now: now,
		CallTimeout: DefaultCallTimeout, PollEvery: 50 * time.Millisecond}
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
// and the row stays sent: the first press after its lease sends the same
// request with the same key, and a gateway that honours it
// answers with the page it made the first time. A gateway's "no" fails
// the row for good.
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
			return storedPage(r), nil
		case models.GatewayFailed:
			return Page{}, errRefused
		case models.GatewayConflict:
			return Page{}, errAnswerConflict
		}
		claimed, err := p.ledger.Claim(ctx, r, Lease(p.CallTimeout))
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
			return Page{}, fmt.Errorf("gatewaycalls.Open: %w", store.Classify(err))
		}
	}
}

// storedPage is the page a done row records.
func storedPage(r *models.GatewayRequest) Page {
	return Page{ObjectID: r.ProviderObjectID, RedirectURL: r.RedirectURL}
}

// errRefused is what the customer hears when the gateway said no: its
// own words (they may name Sekali's key) stay in last_error and the log.
var errRefused = models.Errorf(models.EConflict, "the payment gateway would not open a payment page for this order")

// errAnswerConflict is what the customer hears when the gateway's page
// is for another amount or currency than the order's: both values stay
// in last_error, for the console, and the page is never offered.
var errAnswerConflict = models.Errorf(models.EConflict,
	"the payment gateway answered with a page for another amount or currency than this order's, so it is not offered; the shop has been told")

// plan finds or writes the order's create_payment row. Its key is the
// order id: the one id of the order every gateway can carry back in its
// notifications (as its order id, external id or metadata).
func (p *Pages) plan(ctx context.Context, o *models.Order) (*models.GatewayRequest, error) {
	db := p.db.WithContext(ctx)
	r := models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: o.ID, Provider: p.opener.Provider(),
		IdempotencyKey: o.ID, Amount: o.TotalAmount, Currency: o.Currency, Phase: models.GatewayPlanned}
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&r).Error; err != nil {
		return nil, fmt.Errorf("gatewaycalls.Open: plan: %w", store.Classify(err))
	}
	var found models.GatewayRequest
	err := db.Take(&found, "order_id = ? AND provider = ? AND kind = ?", o.ID, r.Provider, models.GatewayCreatePayment).Error
	if err != nil {
		return nil, fmt.Errorf("gatewaycalls.Open: plan: %w", store.Classify(err))
	}
	return &found, nil
}

// call asks the gateway and records its answer on the row — only while
// this press still holds it (sent, at the attempt it claimed).
func (p *Pages) call(ctx context.Context, r *models.GatewayRequest, o *models.Order, items []PageItem, returnURL string) (Page, error) {
	callCtx, cancel := context.WithTimeout(ctx, p.CallTimeout)
	defer cancel()
	req := PageRequest{OrderID: o.ID, Key: r.IdempotencyKey, Amount: o.TotalAmount,
		Currency: o.Currency, CustomerEmail: o.CustomerEmail, Items: items, ReturnURL: returnURL,
		ExpiresAt: o.ExpiresAt, AskedAt: p.now()}
	page, err := p.opener.OpenPage(callCtx, req)
	if IsKeySpent(err) {
		// The gateway will not take this key again (an earlier attempt
		// whose answer was lost may have spent it): ask once more under
		// a new one, {order}~{attempt}, recorded on the row first.
		if req.Key, err = p.rotateKey(ctx, r, o.ID); err == nil {
			page, err = p.opener.OpenPage(callCtx, req)
		}
	}
	// The answer is written whatever happens to the request meanwhile: a
	// page the gateway made must not be forgotten.
	wctx := context.WithoutCancel(ctx)
	log := p.log.With("provider", r.Provider, "order_id", o.ID, "idempotency_key", r.IdempotencyKey, "attempt", r.Attempts)
	switch {
	case err == nil && page.ObjectID != "" && page.RedirectURL != "":
		if why := page.Stated().Disagreement(o.TotalAmount, o.Currency); why != "" {
			return p.conflict(wctx, r, page, why, log)
		}
		recorded, err := p.ledger.Done(wctx, r, page.ObjectID, WithoutToken(page.RedirectURL), page.Stated())
		switch {
		case err != nil:
			// The page exists: the customer gets it. The row stays sent
			// until a later press records it again.
			log.ErrorContext(ctx, "could not record the payment page", "provider_object_id", page.ObjectID, "error", err)
		case !recorded:
			// Another press took the row over (this one outlived its
			// lease): the page it recorded is the order's.
			var current models.GatewayRequest
			if p.db.WithContext(wctx).Take(&current, r.ID).Error == nil && current.Phase == models.GatewayDone {
				return storedPage(&current), nil
			}
			log.WarnContext(ctx, "payment page opened by a press that lost its lease", "provider_object_id", page.ObjectID)
		default:
			log.InfoContext(ctx, "payment page opened", "provider_object_id", page.ObjectID)
		}
		return page, nil
	case err == nil:
		err = errors.New("the gateway's answer has no object id or no redirect URL")
	case IsRefused(err):
		if uerr := p.ledger.Failed(wctx, r, err); uerr != nil {
			return Page{}, fmt.Errorf("gatewaycalls.Open: %w", uerr)
		}
		log.WarnContext(ctx, "payment page refused", "error", err)
		return Page{}, errRefused
	}
	// Unknown: the gateway may have acted, or still be acting. The row
	// stays sent and keeps its lease: the next press repeats the call
	// with the same key once the lease has passed.
	if uerr := p.ledger.Unknown(wctx, r, err); uerr != nil {
		log.ErrorContext(ctx, "could not record a gateway error", "error", uerr)
	}
	log.WarnContext(ctx, "payment page not opened yet", "error", err)
	return Page{}, models.Errorf(models.EUnavailable, "the payment gateway did not answer; try again in a moment")
}

// conflict records the gateway's page for another amount or currency
// than the order's (why says both) on r, which this press holds: the
// page is not offered — a customer who paid it would pay what the order
// does not say, and the payment would be rejected — and never asked
// for again under its key; alerts:watch raises gateway.conflict of it.
func (p *Pages) conflict(ctx context.Context, r *models.GatewayRequest, page Page, why string, log *slog.Logger) (Page, error) {
	recorded, err := p.ledger.ConflictIn(p.db.WithContext(ctx), r, page.ObjectID, WithoutToken(page.RedirectURL), page.Stated(), "not offered: "+why)
	if err != nil {
		return Page{}, fmt.Errorf("gatewaycalls.Open: %w", err)
	}
	if !recorded {
		// Another press took the row over (this one outlived its lease):
		// its outcome is the order's.
		var current models.GatewayRequest
		if err := p.db.WithContext(ctx).Take(&current, r.ID).Error; err == nil && current.Phase == models.GatewayDone {
			return storedPage(&current), nil
		}
	}
	log.ErrorContext(ctx, "payment page not offered: the gateway's answer is for another amount or currency",
		"provider_object_id", page.ObjectID, "error", why)
	return Page{}, errAnswerConflict
}

// rotateKey gives the row a new key, {order}~{n} for its nth attempt,
// while this press holds it (phase sent, the key unchanged).
func (p *Pages) rotateKey(ctx context.Context, r *models.GatewayRequest, orderID string) (string, error) {
	key := fmt.Sprintf("%s%s%d", orderID, KeySeparator, r.Attempts)
	res := p.db.WithContext(ctx).Model(&models.GatewayRequest{}).
		Where("id = ? AND phase = ? AND attempts = ? AND idempotency_key = ?", r.ID, models.GatewaySent, r.Attempts, r.IdempotencyKey).
		Updates(map[string]any{"idempotency_key": key, "updated_at": p.now().UTC()})
	if res.Error != nil {
		return "", fmt.Errorf("gatewaycalls.Open: a new key: %w", store.Classify(res.Error))
	}
	if res.RowsAffected != 1 {
		return "", errors.New("gatewaycalls.Open: the request changed hands before its new key was written")
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

// WithoutToken is rawURL without its t query parameter. The sandbox's
// pages (its own, and those of the gateways it emulates) carry the
// order's access token, which Sekali keeps only as a hash: the stored
// page leaves it out, and the web layer puts the customer's back.
func WithoutToken(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || !u.Query().Has("t") {
		return rawURL
	}
	q := u.Query()
	q.Del("t")
	u.RawQuery = q.Encode()
	return u.String()
}

// PageFinder is implemented by a PageOpener whose gateway can be asked
// what a call to open a page made: the page it holds for the request's
// order under the request's key (by external id, or by the order
// they name). found is false when
// the gateway answers that it holds none. An error says nothing either
// way. A gateway whose API returns no page cannot be asked, so its
// opener is no PageFinder.
type PageFinder interface {
	FindPage(ctx context.Context, r PageRequest) (page Page, found bool, err error)
}

// PageLook is what looking up a page whose answer was lost found.
type PageLook string

const (
	// PageBusy: another caller holds the request (a press is calling
	// the gateway right now); nothing was asked.
	PageBusy PageLook = "busy"
	// PageFound: the gateway holds the page; the request is done.
	PageFound PageLook = "found"
	// PageNotMade: the gateway holds none; the request is planned
	// again, and the customer's next Pay sends it.
	PageNotMade PageLook = "not made"
	// PageUnknown: the gateway could not be asked; still unknown.
	PageUnknown PageLook = "unknown"
	// PageConflict: the gateway holds a page of another amount or
	// currency than the order's; it is not offered (phase conflict).
	PageConflict PageLook = "conflict"
)

// LookUpPage asks finder's gateway what became of create_payment request
// r, sent and its answer lost, once it can claim r (as a press would),
// and records the answer. It does not send the request again: a repeat
// must carry the customer's access token in its return URL, which only
// the customer's own press has, and a gateway may refuse a repeat with
// other parameters for good. o is r's order.
func (l *Ledger) LookUpPage(ctx context.Context, finder PageFinder, r *models.GatewayRequest, o *models.Order, callTimeout time.Duration) (PageLook, error) {
	claimed, err := l.Claim(ctx, r, Lease(callTimeout))
	if err != nil || !claimed {
		return PageBusy, err
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	page, found, err := finder.FindPage(callCtx, PageRequest{OrderID: o.ID, Key: r.IdempotencyKey, Amount: r.Amount,
		Currency: r.Currency, CustomerEmail: o.CustomerEmail, ExpiresAt: o.ExpiresAt, AskedAt: l.now()})
	wctx := context.WithoutCancel(ctx) // what the gateway said is written whatever happens to ctx now
	switch {
	case err == nil && found && page.ObjectID != "" && page.RedirectURL != "":
		// Checked as an answer to the press is (Pages.Open): a page of
		// another amount or currency is never offered.
		if why := page.Stated().Disagreement(o.TotalAmount, o.Currency); why != "" {
			if _, err := l.ConflictIn(l.db.WithContext(wctx), r, page.ObjectID, WithoutToken(page.RedirectURL), page.Stated(), "not offered: "+why); err != nil {
				return PageUnknown, err
			}
			return PageConflict, nil
		}
		if _, err := l.Done(wctx, r, page.ObjectID, WithoutToken(page.RedirectURL), page.Stated()); err != nil {
			return PageUnknown, err
		}
		return PageFound, nil
	case err == nil && !found:
		_, err := l.NotMade(wctx, r, "asked again: the gateway holds no page under this key; the next press of Pay asks for one")
		return PageNotMade, err
	case err == nil:
		err = errors.New("the gateway's page has no object id or no redirect URL")
	}
	if uerr := l.Unknown(wctx, r, fmt.Errorf("asked again: %w", err)); uerr != nil {
		return PageUnknown, uerr
	}
	return PageUnknown, nil
}
