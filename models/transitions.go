package models

// PaymentEvent is the payment_status a provider reports in a callback.
type PaymentEvent string

const (
	EventPaid PaymentEvent = "paid"
	// EventDeclined: one attempt to pay failed (a card declined, a fraud
	// check refused it) and the customer may try again on the same
	// payment: the order stays pending and keeps its stock.
	EventDeclined PaymentEvent = "declined"
	// EventFailed: the gateway ended the whole payment (cancelled it):
	// no attempt can follow, and the order fails.
	EventFailed  PaymentEvent = "failed"
	EventExpired PaymentEvent = "expired"
	EventPending PaymentEvent = "pending"
	// EventRefunded: the gateway refunded the charge. See DecideRefund.
	EventRefunded PaymentEvent = "refunded"
	// EventDisputed: the customer's bank opened a dispute of the charge
	// (a chargeback); EventDisputeWon and EventDisputeLost: it closed, in
	// the shop's favour or not. See DecideDispute.
	EventDisputed    PaymentEvent = "disputed"
	EventDisputeWon  PaymentEvent = "dispute_won"
	EventDisputeLost PaymentEvent = "dispute_lost"
)

// Dispute is the state of a dispute of a charge, as its payment row
// records it; "" for none. Each only moves forward: none, open, then won
// or lost.
type Dispute string

const (
	DisputeNone Dispute = ""
	DisputeOpen Dispute = "open"
	DisputeWon  Dispute = "won"
	DisputeLost Dispute = "lost"
)

// rank orders the dispute states: a dispute moves to a higher rank only.
func (d Dispute) rank() int {
	switch d {
	case DisputeOpen:
		return 1
	case DisputeWon, DisputeLost:
		return 2
	}
	return 0
}

// DisputeOf is the dispute state a dispute event records, and false for
// any other event.
func DisputeOf(ev PaymentEvent) (Dispute, bool) {
	switch ev {
	case EventDisputed:
		return DisputeOpen, true
	case EventDisputeWon:
		return DisputeWon, true
	case EventDisputeLost:
		return DisputeLost, true
	}
	return DisputeNone, false
}

// DecideDispute returns the action of dispute event ev, for amount, on a
// charge whose payment row has status charge ("" when unknown), dispute
// state current and disputed amount held: recorded on a charge that was
// taken when it moves the dispute forward, or when a lost dispute grows
// (a partial chargeback, then the whole); else stale. No
// order changes status: a dispute marks the payment, refunds of it are
// refused while it is open or lost, and an admin decides what follows.
func DecideDispute(ev PaymentEvent, charge PaymentStatus, current Dispute, held, amount int64) Action {
	to, ok := DisputeOf(ev)
	taken := charge == PaymentSucceeded || charge == PaymentRefundRequired || charge == PaymentRefunded
	grows := to == DisputeLost && current == DisputeLost && amount > held
	if !ok || !taken || (to.rank() <= current.rank() && !grows) {
		return ActionStale
	}
	return ActionDispute
}

// Blocks reports whether a dispute in this state refuses refunds of its
// charge: an open one (the bank holds the money) or a lost one (the bank
// took it back; a refund would pay the customer twice).
func (d Dispute) Blocks() bool { return d == DisputeOpen || d == DisputeLost }

// Valid reports whether e is one of the events.
func (e PaymentEvent) Valid() bool {
	switch e {
	case EventPaid, EventDeclined, EventFailed, EventExpired, EventPending, EventRefunded,
		EventDisputed, EventDisputeWon, EventDisputeLost:
		return true
	}
	return false
}

// Action is what a callback event does to an order; Decide chooses it.
type Action string

const (
	// ActionStale changes nothing: not the order, not stock, not payments.
	ActionStale Action = "stale"
	// ActionRecordPending keeps the order pending and records the payment as pending.
	ActionRecordPending Action = "record_pending"
	// ActionPay moves a pending order to paid; the payment succeeds.
	ActionPay Action = "pay"
	// ActionDecline records a failed attempt: the payment is failed, the
	// order stays pending with its stock, and may still be paid.
	ActionDecline Action = "decline"
	// ActionFail moves a pending order to failed and releases its stock.
	ActionFail Action = "fail"
	// ActionExpire moves a pending order to expired and releases its stock.
	ActionExpire Action = "expire"
	// ActionRereserve takes the stock of a failed, expired or cancelled
	// order back: the order is paid if every item is still in stock, and
	// refund_required if not.
	ActionRereserve Action = "rereserve"
	// ActionSecondCharge records a new charge for an order that is already
	// paid (or awaiting a refund, or refunded) as refund_required; the order
	// is unchanged.
	ActionSecondCharge Action = "second_charge"
	// ActionRefund: the order's own charge is now refunded in full. The
	// payment and the order become refunded; the stock stays with the
	// order.
	ActionRefund Action = "refund"
	// ActionPartialRefund: part of the order's own charge was refunded.
	// The order becomes (or stays) partially_refunded; the payment stays
	// succeeded, its refunded amount grows.
	ActionPartialRefund Action = "partial_refund"
	// ActionRefundCharge: a charge that had to be refunded (a second
	// charge, or a late payment without stock) is now refunded in full;
	// the payment becomes refunded, the order stays as it is (a
	// refund_required order holds no stock, and keeps saying what
	// happened to it).
	ActionRefundCharge Action = "refund_charge"
	// ActionPartialRefundCharge: part of such a charge was refunded: its
	// refunded amount grows, nothing else changes.
	ActionPartialRefundCharge Action = "partial_refund_charge"
	// ActionDispute records a dispute's new state on the charge's payment
	// row; nothing else changes.
	ActionDispute Action = "dispute"
	// ActionRefundFailed: every counted refund of the order's own charge
	// failed at the gateway after it was accepted: the money is the
	// charge's again. The payment returns to succeeded and the order to
	// paid; the stock is untouched (the order kept it).
	ActionRefundFailed Action = "refund_failed"
	// ActionPartialRefundFailed: some refunds of the order's own charge
	// failed, others still count: the order is (again)
	// partially_refunded, the payment succeeded.
	ActionPartialRefundFailed Action = "partial_refund_failed"
	// ActionRefundChargeFailed: a refund of a charge that had to go back
	// failed: the payment is refund_required again (it is still owed),
	// the order unchanged.
	ActionRefundChargeFailed Action = "refund_charge_failed"
	// ActionRefundUpdate: a refund's state changed (pending to succeeded,
	// or a refund first told as failed) and the money counted did not:
	// the refunds rows change, nothing else.
	ActionRefundUpdate Action = "refund_update"
)

// DecideRefund returns the action of refund news about a charge — new
// refunds, refunds that failed — that move what counts as refunded of it
// from before to after, for a charge of amount whose payment row has
// status charge ("" when the charge is unknown; refundedFrom its status
// before it was refunded in full) on an order in state s. Only a charge
// that was taken can be refunded; anything else is stale (recorded,
// nothing changes). News that changes no amount is decided by the
// caller (ActionRefundUpdate, or stale). The caller has found the
// refunds within the charge.
func DecideRefund(s OrderStatus, charge, refundedFrom PaymentStatus, before, after, amount int64) Action {
	own := charge == PaymentSucceeded && s.Refundable() ||
		charge == PaymentRefunded && refundedFrom == PaymentSucceeded && s == OrderRefunded
	owed := charge == PaymentRefundRequired || charge == PaymentRefunded && refundedFrom == PaymentRefundRequired
	switch {
	case after > before && charge == PaymentSucceeded && own:
		if after == amount {
			return ActionRefund
		}
		return ActionPartialRefund
	case after > before && charge == PaymentRefundRequired:
		if after == amount {
			return ActionRefundCharge
		}
		return ActionPartialRefundCharge
	case after < before && own && s != OrderPaid: // a paid order has nothing refunded to give back
		if after == 0 {
			return ActionRefundFailed
		}
		return ActionPartialRefundFailed
	case after < before && owed:
		return ActionRefundChargeFailed
	}
	return ActionStale
}

// Refunds reports whether the action records refund news.
func (a Action) Refunds() bool {
	switch a {
	case ActionRefund, ActionPartialRefund, ActionRefundCharge, ActionPartialRefundCharge,
		ActionRefundFailed, ActionPartialRefundFailed, ActionRefundChargeFailed, ActionRefundUpdate:
		return true
	}
	return false
}

// Decide returns the action of event ev on an order in state s
// (docs/state-machine.md#event--state).
// A refund is decided by DecideRefund: here it is stale.
// chargeKnown reports whether the event's provider reference already has a
// payment that counts as a charge (succeeded or refund_required): a paid
// event for such a reference has been applied before and is stale.
func Decide(s OrderStatus, ev PaymentEvent, chargeKnown bool) Action {
	if _, dispute := DisputeOf(ev); ev == EventRefunded || dispute {
		return ActionStale
	}
	if s == OrderPending {
		switch ev {
		case EventPaid:
			return ActionPay
		case EventDeclined:
			return ActionDecline
		case EventFailed:
			return ActionFail
		case EventExpired:
			return ActionExpire
		case EventPending:
			return ActionRecordPending
		}
		return ActionStale
	}
	if ev != EventPaid || chargeKnown {
		return ActionStale
	}
	switch s {
	case OrderPaid, OrderRefundRequired, OrderPartiallyRefunded, OrderRefunded: // the order has had its charge: this one is to be refunded
		return ActionSecondCharge
	case OrderFailed, OrderExpired, OrderCancelled:
		return ActionRereserve
	}
	return ActionStale
}

// ChecksAmount reports whether the event's amount and currency must match
// the order before the action may run: only paid events that change the
// order's state are compared.
func (a Action) ChecksAmount() bool { return a == ActionPay || a == ActionRereserve }

// PaymentStatus returns the status the event's payment row gets, and false
// for actions that leave payments alone. ActionRereserve's status depends on
// the stock (succeeded or refund_required) and is decided by the caller.
func (a Action) PaymentStatus() (PaymentStatus, bool) {
	switch a {
	case ActionPay:
		return PaymentSucceeded, true
	case ActionFail, ActionDecline:
		return PaymentFailed, true
	case ActionExpire:
		return PaymentExpired, true
	case ActionRecordPending:
		return PaymentPending, true
	case ActionSecondCharge:
		return PaymentRefundRequired, true
	case ActionRefund, ActionRefundCharge:
		return PaymentRefunded, true
	case ActionRefundFailed, ActionPartialRefundFailed:
		return PaymentSucceeded, true
	case ActionRefundChargeFailed:
		return PaymentRefundRequired, true
	}
	return "", false
}

// Releases reports whether the action ends the pending order and gives
// its stock back.
func (a Action) Releases() bool { return a == ActionFail || a == ActionExpire }

// OrderFrom returns the states the order may leave by the action — the
// WHERE status IN (…) of its conditional UPDATE — and nil for the actions
// that leave the order as it is.
func (a Action) OrderFrom() []OrderStatus {
	switch a {
	case ActionPay, ActionFail, ActionExpire:
		return []OrderStatus{OrderPending}
	case ActionRefund, ActionPartialRefund:
		return []OrderStatus{OrderPaid, OrderPartiallyRefunded}
	case ActionRefundFailed, ActionPartialRefundFailed:
		return []OrderStatus{OrderRefunded, OrderPartiallyRefunded}
	case ActionRereserve:
		return []OrderStatus{OrderFailed, OrderExpired, OrderCancelled}
	}
	return nil
}

// OrderStatusAfter returns the order's status after a non-rereserve action.
func (a Action) OrderStatusAfter(s OrderStatus) OrderStatus {
	switch a {
	case ActionPay:
		return OrderPaid
	case ActionFail:
		return OrderFailed
	case ActionExpire:
		return OrderExpired
	case ActionRefund:
		return OrderRefunded
	case ActionPartialRefund, ActionPartialRefundFailed:
		return OrderPartiallyRefunded
	case ActionRefundFailed:
		return OrderPaid
	}
	return s
}
