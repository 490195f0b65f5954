package models

import "time"

// GatewayRequestKind is what a call to a gateway asks for.
type GatewayRequestKind string

// GatewayCreatePayment opens the gateway's hosted payment page for an
// order (a Snap transaction, a Checkout Session, an invoice).
const GatewayCreatePayment GatewayRequestKind = "create_payment"

// GatewayRefund refunds part or all of a charge (PaymentID) at its
// gateway. The row is the refund record: asked from the console or the
// admin API, with a reason and who asked.
const GatewayRefund GatewayRequestKind = "refund"

// GatewayPhase is where a call to a gateway stands.
type GatewayPhase string

const (
	// GatewayAwaitingApproval: a refund above REFUND_APPROVAL_ABOVE,
	// written with no job: it is sent only once another owner approves it
	// (→ planned). Its amount is held back from what is left to refund.
	GatewayAwaitingApproval GatewayPhase = "awaiting_approval"
	// GatewayPlanned: written, not sent yet.
	GatewayPlanned GatewayPhase = "planned"
	// GatewaySent: sent at least once; whether the gateway acted is not
	// known. It is sent again with the same key.
	GatewaySent GatewayPhase = "sent"
	// GatewayDone: the gateway answered with its object.
	GatewayDone GatewayPhase = "done"
	// GatewayFailed: the gateway answered no; the same request never
	// succeeds.
	GatewayFailed GatewayPhase = "failed"
	// GatewayDeclined: a refund awaiting approval that an owner declined;
	// it was never sent and holds nothing back.
	GatewayDeclined GatewayPhase = "declined"
	// GatewayDiscarded: a refund whose refund:send job an operator
	// discarded (say, refunded by hand in the gateway's dashboard). It is
	// never sent again and holds nothing back; if an earlier call did
	// refund, the gateway's notification of that refund counts it.
	GatewayDiscarded GatewayPhase = "discarded"
	// GatewayConflict: the gateway answered with an object whose amount
	// or currency is not what was asked (AnsweredAmount,
	// AnsweredCurrency): nothing of the answer is applied — a refund is
	// not counted, a page is not offered — and, as the gateway did make
	// something, it is never sent again under its key. A refund in
	// conflict holds its amount back from what is left to refund (what
	// the gateway refunded is not in Sekali's books) until the gateway's
	// notification of that refund, a signed fact, is counted: what it
	// says then takes the hold's place.
	GatewayConflict GatewayPhase = "conflict"
)

// Held: the phase of a refund that is asked and not over, whose amount
// is held back from what is left to refund of its charge. (One in
// conflict is held too, until its refund is counted: the query that
// sums what is held says so.)
func (p GatewayPhase) Held() bool {
	return p == GatewayAwaitingApproval || p == GatewayPlanned || p == GatewaySent
}

// WentOut: a call in phase p was made to its gateway at least once (one
// awaiting approval, planned or declined never was).
func (p GatewayPhase) WentOut() bool {
	return p == GatewaySent || p == GatewayDone || p == GatewayFailed || p == GatewayConflict
}

// HeldPhases are the phases for which Held is true, for queries.
var HeldPhases = []GatewayPhase{GatewayAwaitingApproval, GatewayPlanned, GatewaySent}

// CameToNothing are the phases of a refund that asked for money and
// will never move any: the gateway said no, an owner declined it, an
// operator discarded it.
var CameToNothing = []GatewayPhase{GatewayFailed, GatewayDeclined, GatewayDiscarded}

// GatewayRequest is one call Sekali means to make to a gateway, written
// before it is made, with the provider idempotency key every repeat of it
// carries.
type GatewayRequest struct {
	ID               int64
	Kind             GatewayRequestKind
	OrderID          string
	Provider         string
	IdempotencyKey   string
	Amount           int64
	Currency         string
	Phase            GatewayPhase
	Attempts         int
	LockedUntil      *time.Time
	ProviderObjectID string
	RedirectURL      string
	LastError        string
	// AnsweredAmount and AnsweredCurrency are what the gateway's answer
	// stated of its object's money (done or conflict): nil and "" where
	// it states none. The amount is in minor units of AnsweredCurrency,
	// or of Currency when the answer states no currency.
	AnsweredAmount   *int64
	AnsweredCurrency string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	DoneAt           *time.Time
	// PaymentID is the charge a refund refunds (nil for create_payment).
	PaymentID   *int64
	Reason      string // why, for a refund
	RequestedBy string // the admin who asked, for a refund
	// ApprovedBy and ApprovedAt: the owner who approved a refund that
	// awaited approval, and when ("" and nil: it did not need one).
	ApprovedBy string
	ApprovedAt *time.Time
	// DeclinedBy and DeclinedAt: the owner who declined it.
	DeclinedBy string
	DeclinedAt *time.Time
	// UnknownSince, Asks and NextAskAt are the janitor's schedule of a
	// call whose outcome is unknown (sent, its answer lost; or a refund
	// the gateway accepted and has not settled): since when, how often
	// it was asked about again, and when it is asked next. The times are
	// nil once the outcome is known.
	UnknownSince *time.Time
	Asks         int
	NextAskAt    *time.Time
}
