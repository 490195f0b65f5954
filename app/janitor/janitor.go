// Package janitor leaves no unknown outcome alone: it asks the gateways
// again about each call Sekali made whose outcome is unknown — a payment
// page or a refund whose answer was lost, a refund the gateway accepted
// and has not settled (pending) — on each gateway's schedule
// (gatewaycalls.Schedule), until the gateway says final. It is Kill
// Bill's Janitor for Sekali's gateway_requests: a periodic task asks
// about the rows whose time has come, and an admin's "ask now" asks
// about one at once, through the same code.
//
// It asks as the call's own repeats do — a refund is sent again with its
// key by refunds.Service.Send, under the call's lease — or looks the
// outcome up where a repeat cannot be made (a page, whose repeat needs
// the customer's token; a pending refund, which was answered). Each ask
// is counted on the row (asks) and sets the next (next_ask_at) before it
// is made, in one conditional statement that names the row as it was
// read: two janitors, or a janitor and an admin, ask once.
package janitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// refundAsker is the part of the refunds service the janitor asks
// through (refunds.Service).
type refundAsker interface {
	Can(provider string) (send, lookUp bool)
	Send(ctx context.Context, id int64, requestID string) (*models.GatewayRequest, error)
	LookUp(ctx context.Context, id int64, requestID string) (*models.GatewayRequest, error)
	PendingAtGateway(ctx context.Context, r *models.GatewayRequest) (bool, error)
}

// Janitor asks about the unknown outcomes of the gateways it is given.
type Janitor struct {
	db        *gorm.DB
	ledger    *gatewaycalls.Ledger
	refunds   refundAsker
	finders   map[string]gatewaycalls.PageFinder
	schedules gatewaycalls.Schedules
	log       *slog.Logger

	// Batch bounds the rows one run asks about (DefaultBatch): a run
	// asks at most that many gateways' questions, each bounded by its
	// call's time-out, and the rest wait for the next run.
	Batch int
	// CallTimeout bounds one look-up of a page
	// (gatewaycalls.DefaultCallTimeout).
	CallTimeout time.Duration
}

// DefaultBatch is Janitor.Batch's default.
const DefaultBatch = 50

// New returns the janitor of the gateways whose refunds rs sends and
// whose pages openers open (those that can be asked about a page:
// gatewaycalls.PageFinder), on their schedules; its answers are counted
// in m.
func New(db *gorm.DB, log *slog.Logger, now func() time.Time, m *metrics.Set, rs refundAsker,
	schedules gatewaycalls.Schedules, openers ...gatewaycalls.PageOpener) *Janitor {
	j := &Janitor{db: db, ledger: gatewaycalls.NewLedger(db, now, m), refunds: rs, finders: map[string]gatewaycalls.PageFinder{},
		schedules: schedules, log: log, Batch: DefaultBatch, CallTimeout: gatewaycalls.DefaultCallTimeout}
	for _, o := range openers {
		if f, ok := o.(gatewaycalls.PageFinder); ok {
			j.finders[o.Provider()] = f
		}
	}
	return j
}

// Result is what one ask came to.
type Result string

const (
	// Final: the gateway said (done, failed, not made); the schedule
	// ended.
	Final Result = "final"
	// Unknown: asked, and still unknown — no answer, or the refund is
	// still pending; the next ask is scheduled.
	Unknown Result = "unknown"
	// Busy: another caller holds the call (it is asking the gateway right
	// now) or took this ask first; nothing was asked.
	Busy Result = "busy"
	// Known: the outcome was known without asking — told by a
	// notification, or no longer needed (the order of a page is over);
	// the schedule ended.
	Known Result = "known"
	// CannotAsk: the gateway cannot be asked about it (a hosted page
	// no API returns, a gateway no longer configured); the janitor looks again
	// later whether something else made it known.
	CannotAsk Result = "cannot ask"
)

// Asked is one ask's result and the row after it.
type Asked struct {
	Result  Result
	Request models.GatewayRequest
}

// Report is what a run did: how many due rows it read, and their
// results.
type Report struct {
	Due     int
	Results map[Result]int
	Failed  int // asks that ended in an error of Sekali's (logged)
}

// Run asks about the rows whose next ask is due, at most Batch of them,
// soonest first. A gateway that cannot be asked, or an ask that fails,
// is not an error of the run — it is logged, its next ask is scheduled,
// and the next run goes on — for the run is a look at every gateway,
// repeated every minute: a run that failed for one gateway would be
// retried, then archived, and raise an alert naming a task instead of
// the gateway. The error is only that the due rows could not be read. A
// run whose ctx ends stops and returns what it did.
func (j *Janitor) Run(ctx context.Context) (Report, error) {
	rep := Report{Results: map[Result]int{}}
	due, err := j.ledger.Due(ctx, j.Batch)
	if err != nil {
		return rep, fmt.Errorf("janitor.Run: %w", err)
	}
	rep.Due = len(due)
	for i := range due {
		if ctx.Err() != nil {
			break
		}
		a, err := j.ask(ctx, &due[i], false, "janitor")
		if err != nil {
			rep.Failed++
			j.log.ErrorContext(ctx, "janitor: could not ask about an unknown outcome", "gateway_request_id", due[i].ID,
				"provider", due[i].Provider, "order_id", due[i].OrderID, "error", err)
			continue
		}
		rep.Results[a.Result]++
	}
	return rep, nil
}

// AskNow asks about request id at once, whether or not its next ask is
// due: an admin's "ask now", by the same code as a run. requestID is the
// admin's request, which the log lines and a refund's effects carry. A
// request whose outcome is known is Known, and nothing is asked.
func (j *Janitor) AskNow(ctx context.Context, id int64, requestID string) (Asked, error) {
	var r models.GatewayRequest
	err := j.db.WithContext(ctx).Take(&r, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Asked{}, models.Errorf(models.ENotFound, "no gateway request %d", id)
	}
	if err != nil {
		return Asked{}, fmt.Errorf("janitor.AskNow: request %d: %w", id, store.Classify(err))
	}
	return j.ask(ctx, &r, true, requestID)
}

// ask asks about r, as read, once: what it does depends on what r is.
// now asks whether or not r's ask is due.
func (j *Janitor) ask(ctx context.Context, r *models.GatewayRequest, now bool, requestID string) (Asked, error) {
	if r.NextAskAt == nil {
		return j.after(ctx, r, Known)
	}
	p, err := j.plan(ctx, r)
	switch {
	case err != nil:
		return Asked{}, err
	case p.known:
		if _, err := j.ledger.Settle(ctx, r, p.note); err != nil {
			return Asked{}, err
		}
		return j.after(ctx, r, Known)
	case p.ask == nil:
		// It cannot be asked; look again after the schedule's wait
		// whether something else made it known.
		if err := j.ledger.Postpone(ctx, r, j.schedules.Of(r.Provider).Wait(r.Asks+1)); err != nil {
			return Asked{}, err
		}
		j.log.InfoContext(ctx, "janitor: an unknown outcome cannot be asked about", "gateway_request_id", r.ID,
			"provider", r.Provider, "order_id", r.OrderID, "why", p.note)
		return j.after(ctx, r, CannotAsk)
	}
	seen := *r
	taken, err := j.ledger.Turn(ctx, r, j.schedules.Of(r.Provider).Wait(r.Asks+1), now)
	if err != nil {
		return Asked{}, err
	}
	if !taken {
		return Asked{Result: Busy, Request: seen}, nil // another asker took this ask first
	}
	res, err := p.ask(ctx, r, requestID)
	if errors.Is(err, errBusy) {
		// Someone else is calling right now (the refund's job, a press
		// of Pay): its answer will tell. Ask again once its lease is over.
		if err := j.ledger.Untake(ctx, r); err != nil {
			return Asked{}, err
		}
		return j.after(ctx, r, Busy)
	}
	if err != nil {
		return Asked{}, err
	}
	return j.after(ctx, r, res)
}

// errBusy: another caller holds the call; nothing was asked.
var errBusy = errors.New("janitor: another caller holds the call")

// plan is what asking about a row means.
type plan struct {
	// ask asks the gateway once; the row's ask has been taken. nil:
	// nothing is asked.
	ask func(ctx context.Context, r *models.GatewayRequest, requestID string) (Result, error)
	// known: the outcome is known, or needs knowing no more; the
	// schedule ends.
	known bool
	// note says why it cannot be asked, or, for a known outcome, what
	// its last error becomes ("": it stays).
	note string
}

// plan is what asking about r means, from what r is.
func (j *Janitor) plan(ctx context.Context, r *models.GatewayRequest) (plan, error) {
	switch {
	case r.Kind == models.GatewayRefund && j.refunds == nil:
		return plan{note: "refunds are not sent from this process"}, nil
	case r.Kind == models.GatewayRefund && r.Phase == models.GatewaySent:
		if send, _ := j.refunds.Can(r.Provider); !send {
			return plan{note: "no refunder of " + r.Provider + " is configured"}, nil
		}
		return plan{ask: j.sendRefund}, nil
	case r.Kind == models.GatewayRefund && r.Phase == models.GatewayDone:
		pending, err := j.refunds.PendingAtGateway(ctx, r)
		switch _, lookUp := j.refunds.Can(r.Provider); {
		case err != nil:
			return plan{}, err
		case !pending: // a notification told what became of it
			return plan{known: true}, nil
		case !lookUp:
			return plan{note: r.Provider + " cannot be asked about its refunds: its notification tells"}, nil
		}
		return plan{ask: j.lookUpRefund}, nil
	case r.Kind == models.GatewayCreatePayment && r.Phase == models.GatewaySent:
		return j.planPage(ctx, r)
	}
	return plan{known: true}, nil // planned (not sent: nothing to ask), or over
}

// planPage is what asking about page request r, sent, means: nothing
// once its order is over — no page is needed, and a payment made on one
// comes as a notification, the status poll or catch-up — else a look-up
// where its gateway can be asked.
func (j *Janitor) planPage(ctx context.Context, r *models.GatewayRequest) (plan, error) {
	var o models.Order
	if err := j.db.WithContext(ctx).Take(&o, "id = ?", r.OrderID).Error; err != nil {
		return plan{}, fmt.Errorf("janitor: order %s: %w", r.OrderID, store.Classify(err))
	}
	if o.Status != models.OrderPending {
		return plan{known: true, note: fmt.Sprintf("not asked again: order %s is %s, and needs no page", o.ID, o.Status)}, nil
	}
	finder, ok := j.finders[r.Provider]
	if !ok {
		return plan{note: r.Provider + " cannot be asked for a page: the customer's next Pay asks for one"}, nil
	}
	return plan{ask: func(ctx context.Context, r *models.GatewayRequest, _ string) (Result, error) {
		look, err := j.ledger.LookUpPage(ctx, finder, r, &o, j.CallTimeout)
		switch {
		case err != nil:
			return "", err
		case look == gatewaycalls.PageBusy:
			return "", errBusy
		case look == gatewaycalls.PageUnknown:
			return Unknown, nil
		}
		return Final, nil
	}}, nil
}

// sendRefund sends refund request r, sent and its answer unknown, again
// with its key, as its job and "Send again now" do.
func (j *Janitor) sendRefund(ctx context.Context, r *models.GatewayRequest, requestID string) (Result, error) {
	after, err := j.refunds.Send(ctx, r.ID, requestID)
	switch {
	case errors.Is(err, refunds.ErrBusy):
		return "", errBusy
	case errors.Is(err, refunds.ErrUnanswered):
		return Unknown, nil
	case err != nil:
		return "", err
	}
	return j.outcome(ctx, after)
}

// lookUpRefund asks the gateway what became of refund request r, which
// it accepted and has not settled.
func (j *Janitor) lookUpRefund(ctx context.Context, r *models.GatewayRequest, requestID string) (Result, error) {
	after, err := j.refunds.LookUp(ctx, r.ID, requestID)
	switch {
	case errors.Is(err, refunds.ErrUnanswered):
		return Unknown, nil
	case err != nil:
		return "", err
	}
	return j.outcome(ctx, after)
}

// outcome is Final for a refund request whose outcome is known now, else
// Unknown: accepted, and still pending at the gateway.
func (j *Janitor) outcome(ctx context.Context, r *models.GatewayRequest) (Result, error) {
	pending, err := j.refunds.PendingAtGateway(ctx, r)
	switch {
	case err != nil:
		return "", err
	case pending || r.Phase == models.GatewaySent:
		return Unknown, nil
	}
	if r.NextAskAt != nil { // known — a notification said while it was asked — and still scheduled
		if _, err := j.ledger.Settle(ctx, r, ""); err != nil {
			return "", err
		}
	}
	return Final, nil
}

// after reads r again, logs what the ask came to, and returns it.
func (j *Janitor) after(ctx context.Context, r *models.GatewayRequest, res Result) (Asked, error) {
	cur, err := j.get(ctx, r.ID)
	if err != nil {
		return Asked{}, err
	}
	if res != Known && res != CannotAsk {
		j.log.InfoContext(ctx, "janitor: asked again about an unknown outcome", "gateway_request_id", cur.ID, "provider", cur.Provider,
			"kind", cur.Kind, "order_id", cur.OrderID, "idempotency_key", cur.IdempotencyKey, "result", res,
			"phase", cur.Phase, "asks", cur.Asks, "next_ask_at", cur.NextAskAt)
	}
	return Asked{Result: res, Request: cur}, nil
}

func (j *Janitor) get(ctx context.Context, id int64) (models.GatewayRequest, error) {
	var r models.GatewayRequest
	if err := j.db.WithContext(ctx).Take(&r, id).Error; err != nil {
		return r, fmt.Errorf("janitor: request %d: %w", id, store.Classify(err))
	}
	return r, nil
}
