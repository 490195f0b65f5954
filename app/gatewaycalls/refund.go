package gatewaycalls

import (
	"context"

	"github.com/sekali/sekali/models"
)

// RefundRequest is what a gateway needs to refund part or all of a
// charge.
type RefundRequest struct {
	OrderID string
	// Key is the provider idempotency key, chosen before the first call
	// and sent with every repeat of it: an Idempotency-Key header or a
	// refund key or reference in the body, the sandbox's refund_id.
	Key string
	// Charge is the gateway's reference of the charge, as Sekali recorded
	// it from the gateway's notification (payments.provider_reference):
	// a payment's, a transaction's or an invoice's id, a sandbox
	// transaction id.
	Charge   string
	Amount   int64 // minor units
	Currency string
	Reason   string
	// Attempt is 1 for the first call; a repeat may look for the refund
	// first, where the gateway keeps a key for a limited time.
	Attempt int
}

// Refunded is a gateway's answer that it refunded: what its
// notification of the same refund would say, so that the answer and the
// notification converge on one refund (payments.ApplyAnswer).
type Refunded struct {
	// ObjectID is the gateway's id of the refund (its id or key
	// for it).
	ObjectID string
	// Amount (minor units of Currency) and Currency are what the
	// gateway's answer states it refunded; Currency is "" where the
	// answer states none (the amount is then read in the currency
	// asked). An answer of another amount or currency than asked is not
	// applied (refunds.Service: the request ends in conflict).
	Amount   int64
	Currency string
	// RefundKey is the id the gateway's notifications name this refund
	// by; "" where they state only the charge's refunded total.
	RefundKey string
	// Total is the charge's refunded total after this refund, where the
	// gateway states one (an amount refunded); 0 where it does not.
	Total int64
	// Pending is true when the gateway accepted the refund without
	// making it yet (answered pending): it may still
	// fail, and its notification says so. False: the refund is made.
	Pending bool
}

// Stated is what the answer states of the refund's money.
func (a Refunded) Stated() Stated { return Stated{Amount: a.Amount, Currency: a.Currency} }

// Refunder refunds charges at one gateway. Refund returns a *Refused
// error when the gateway answered and said no (that refund will never be
// made); any other error — a timeout, a 5xx, a connection that broke —
// says nothing about whether the gateway acted, and the call is repeated
// with the same key.
type Refunder interface {
	Provider() string
	Refund(ctx context.Context, r RefundRequest) (Refunded, error)
}

// RefundLooker is implemented by a Refunder whose gateway can be asked
// what became of a refund it accepted without making it (pending):
// the gateway lists a charge's refunds with Sekali's key in their
// metadata or as their reference. found is
// false when the gateway lists no refund under the request's key; an
// error says nothing either way. A gateway that never answers pending
// (the sandbox, among others) needs none: its refunds are made when answered.
type RefundLooker interface {
	LookUpRefund(ctx context.Context, r RefundRequest) (state RefundState, found bool, err error)
}

// RefundState is a refund as its gateway holds it now: the refund (its
// id and amount; Pending unused) and its state — pending, succeeded,
// failed or canceled — with the gateway's reason for one that failed.
type RefundState struct {
	Refunded
	Status models.RefundStatus
	Reason string
}
