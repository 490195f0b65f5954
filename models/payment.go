package models

import (
	"encoding/json"
	"time"
)

// PaymentStatus is the state of one charge at the provider.
type PaymentStatus string

const (
	PaymentPending        PaymentStatus = "pending"
	PaymentSucceeded      PaymentStatus = "succeeded"
	PaymentFailed         PaymentStatus = "failed"
	PaymentExpired        PaymentStatus = "expired"
	PaymentRefundRequired PaymentStatus = "refund_required"
	PaymentRefunded       PaymentStatus = "refunded"
)

// PaymentFrom lists, for each target status, the statuses a payment row may
// leave to reach it. Only a refund leaves succeeded or refund_required;
// refunded is terminal; a row that already has the target status is left
// alone.
var PaymentFrom = map[PaymentStatus][]PaymentStatus{
	PaymentPending:        {},
	PaymentFailed:         {PaymentPending},
	PaymentExpired:        {PaymentPending},
	PaymentSucceeded:      {PaymentPending, PaymentFailed, PaymentExpired},
	PaymentRefundRequired: {PaymentPending, PaymentFailed, PaymentExpired},
	PaymentRefunded:       {PaymentSucceeded, PaymentRefundRequired},
}

// Payment is one charge, identified by (Provider, ProviderReference).
// RefundedAmount is what its counted refunds (pending and succeeded) add
// up to: at most Amount; the status turns refunded when it reaches
// Amount, and back to RefundedFrom when a refund fails after that.
type Payment struct {
	ID                int64         `json:"-"`
	Provider          string        `json:"provider"`
	ProviderReference string        `json:"provider_reference"`
	OrderID           string        `json:"-"`
	Amount            int64         `json:"amount"`
	RefundedAmount    int64         `json:"refunded_amount"`
	Currency          string        `json:"currency"`
	Status            PaymentStatus `json:"status"`
	// RefundedFrom is the status a refunded payment had before (succeeded
	// or refund_required); "" for one that is not refunded.
	RefundedFrom PaymentStatus `json:"-"`
	Dispute      Dispute       `json:"dispute,omitempty"` // a chargeback: open, won, lost
	// DisputedAmount is what a dispute holds (open) or took back (lost):
	// not refundable.
	DisputedAmount int64     `json:"disputed_amount,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// RefundStatus is the state of one refund at its gateway.
type RefundStatus string

const (
	// RefundPending: the gateway accepted the refund and may still fail
	// it (a gateway's pending refund). It counts.
	RefundPending RefundStatus = "pending"
	// RefundSucceeded: the money went back. It counts, and the customer
	// hears about it.
	RefundSucceeded RefundStatus = "succeeded"
	// RefundFailed and RefundCanceled are final: the money did not go
	// back, and the refund does not count.
	RefundFailed   RefundStatus = "failed"
	RefundCanceled RefundStatus = "canceled"
	// RefundSuperseded: a refund told only as a charge's total
	// ({reference}:refunded:{total}) whose money the gateway has since
	// named refund by refund. It does not count: the named ones do.
	RefundSuperseded RefundStatus = "superseded"
)

// Counts reports whether a refund in this state counts in its payment's
// refunded amount.
func (s RefundStatus) Counts() bool { return s == RefundPending || s == RefundSucceeded }

// Final reports whether a refund in this state never changes again.
func (s RefundStatus) Final() bool {
	return s == RefundFailed || s == RefundCanceled || s == RefundSuperseded
}

// Valid reports whether s is one of the states a gateway can tell.
func (s RefundStatus) Valid() bool {
	return s == RefundPending || s == RefundSucceeded || s == RefundFailed || s == RefundCanceled
}

// RefundMoves reports whether a refund in state from may move to to:
// pending to anything; succeeded to failed (a gateway may fail a refund
// it reported succeeded, some gateways say); nothing out of a final state.
func RefundMoves(from, to RefundStatus) bool {
	switch from {
	case RefundPending:
		return to != RefundPending && to.Valid()
	case RefundSucceeded:
		return to == RefundFailed || to == RefundCanceled
	}
	return false
}

// Refund is one refund of a payment at the gateway, keyed by the
// gateway's id of it (RefundKey), so that a refund told twice — by two
// notifications, by a notification and a poll — is one row.
type Refund struct {
	ID        int64        `json:"-"`
	Provider  string       `json:"provider"`
	RefundKey string       `json:"refund_key"`
	PaymentID int64        `json:"-"`
	OrderID   string       `json:"-"`
	Amount    int64        `json:"amount"`
	Currency  string       `json:"currency"`
	Status    RefundStatus `json:"status"`
	// FailureReason is the gateway's reason for a failed refund.
	FailureReason string    `json:"failure_reason,omitempty"`
	CallbackID    *int64    `json:"-"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// CallbackStatus is the state of a recorded provider event.
type CallbackStatus string

const (
	// CallbackProcessed is terminal: the event was applied or found stale.
	CallbackProcessed CallbackStatus = "processed"
	// CallbackRejected is not terminal: a later delivery is evaluated again.
	CallbackRejected CallbackStatus = "rejected"
)

// Callback results (the `result` member of a callback response) and
// rejection reasons stored in payment_callbacks.result.
const (
	ResultProcessed = "processed"
	ResultStale     = "stale"
	ResultDuplicate = "duplicate"
	ResultConflict  = "conflict"
	ResultRejected  = "rejected"
	ResultError     = "error"
	// ResultIgnored: a notification the shop does not handle (an event
	// type it has no use for, another application's event). Answered 200
	// so the gateway stops sending it; nothing is recorded but its
	// delivery.
	ResultIgnored = "ignored"
	// ResultUnconfirmed: a notification that the gateway's status API
	// does not confirm. It changes nothing of its own: what the API says
	// is applied instead, as a status poll's answer would be. Answered
	// 200 — the API's answer is the fact, and a retry would say the same.
	ResultUnconfirmed = "unconfirmed"

	ReasonUnknownOrder      = "unknown_order"
	ReasonAmountMismatch    = "amount_mismatch"
	ReasonCurrencyMismatch  = "currency_mismatch"
	ReasonReferenceMismatch = "reference_belongs_to_other_order"
	// ReasonRefundExceedsPayment: the refunds would add up to more than
	// the charge.
	ReasonRefundExceedsPayment = "refund_exceeds_payment"
	// ReasonRefundOfOtherCharge: the event names a refund that Sekali
	// knows as another charge's.
	ReasonRefundOfOtherCharge = "refund_of_other_charge"
)

// PaymentCallback is one provider event, keyed by (Provider,
// IdempotencyKey). The raw body is not kept: PayloadHash is the SHA-256 of
// its canonical form, and the business fields are stored parsed.
type PaymentCallback struct {
	ID              int64
	Provider        string
	IdempotencyKey  string
	PayloadHash     string
	OrderID         string
	TransactionID   string
	EventStatus     PaymentEvent
	Amount          int64
	Currency        string
	Status          CallbackStatus
	Result          string
	ConflictCount   int
	ResponseCode    int
	Attempts        int
	FirstReceivedAt time.Time
	LastReceivedAt  time.Time
	ProcessedAt     *time.Time
}

// Delivery outcomes: one per HTTP delivery of a callback.
const (
	OutcomeProcessed            = "processed"
	OutcomeStale                = "stale"
	OutcomeDuplicate            = "duplicate"
	OutcomeConflict             = "conflict"
	OutcomeRejected             = "rejected"
	OutcomeIgnored              = "ignored"
	OutcomeUnconfirmed          = "unconfirmed"
	OutcomeInvalidSignature     = "invalid_signature"
	OutcomeInvalidPayload       = "invalid_payload"
	OutcomeMissingField         = "missing_field"
	OutcomeInvalidRequest       = "invalid_request" // a malformed amount
	OutcomeTooLarge             = "too_large"
	OutcomeUnsupportedMediaType = "unsupported_media_type"
	OutcomeError                = "error"
)

// CallbackDelivery is one HTTP delivery of a callback: an append-only audit
// trail. CallbackID is nil when the delivery was refused before its key was
// known (bad size, type, signature or payload).
type CallbackDelivery struct {
	ID           int64
	CallbackID   *int64
	Provider     string
	ReceivedAt   time.Time
	Outcome      string
	ResponseCode int
	DurationMS   int `gorm:"column:duration_ms"`
	RemoteAddr   string
	RequestID    string
	// TraceID is the delivery's trace (32 hex digits), "" when tracing
	// is off.
	TraceID string
	// Note says why an unconfirmed delivery changed nothing: what it
	// said, and what the gateway's status API said.
	Note string
	// Headers and Body are what the delivery carried, while they are kept
	// (DELIVERY_BODY_RETENTION): the headers as a JSON object of name →
	// values with secrets redacted, the body as received. Nil once
	// pruned, or when bodies are not kept.
	Headers json.RawMessage `gorm:"type:jsonb"`
	Body    []byte
	// BodyJSON is Body again as jsonb, when it is a JSON object that
	// PostgreSQL can hold, for the search by path = value; nil otherwise,
	// and cleared with Body.
	BodyJSON json.RawMessage `gorm:"column:body_json;type:jsonb"`
	// BodyHash is the HMAC-SHA256 of Body as it was kept (payments'
	// kept-body key), nil with it: what tells a body changed in the
	// database since, which is not applied again.
	BodyHash []byte
}

// DeliveryCount is how many deliveries of one provider had one outcome in
// one minute: a rollup of callback_deliveries for the dashboard.
type DeliveryCount struct {
	Minute     time.Time `gorm:"primaryKey"`
	Provider   string    `gorm:"primaryKey"`
	Outcome    string    `gorm:"primaryKey"`
	Deliveries int64
}

// RollupMark says up to when (exclusive) a rollup has been computed.
type RollupMark struct {
	Name      string `gorm:"primaryKey"`
	DoneUntil time.Time
}
