package views

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// The view structs: what each console page shows, as plain values.
// Handlers in web/ fill them, and one value is both what the page draws
// and what the admin JSON answers (docs/api.md): the json tags are the
// documented names, and what only the page needs (its links, forms,
// labels) is tagged "-". So the JSON is plain typed data: counts and
// amounts are numbers (amounts in minor units, beside their currency),
// times are in UTC, statuses are their codes, and what is absent is null
// (NullText, NullID); the page formats them for people.

// Meta is what the frame of every console page needs.
type Meta struct {
	Title   string
	Section string // the navigation entry to mark as current
	Admin   string // the logged-in admin's email; "" on the log-in page
	Role    string // the logged-in admin's role: viewer, operator or owner
	Flash   *Flash
}

// Flash is a one-time message shown at the top of the next page.
type Flash struct {
	Tone string // ok, bad, warn
	Text string
}

// Problem is an error shown to a person.
type Problem struct {
	Status int
	Title  string
	Detail string
	Code   string
	InShop bool // the page is the shop's: link back to it, not to the console
}

// Login is the log-in form.
type Login struct {
	Email string
	Error string
	Next  string // where to go after logging in
	// NoAdmin: no admin exists yet, so the page says how the first is made.
	NoAdmin bool
}

// List is one page of a console list — callbacks, deliveries, orders,
// jobs, outbox, products, actions, a product's ledger: the same shape for
// each. Its filter, where it has one, is the page's form and goes beside
// it.
//
// Its JSON is the rows and the next page's URL, or null on the last page.
type List[R any] struct {
	Now   time.Time `json:"-"`
	Rows  []R       `json:"rows"` // newest first
	Self  string    `json:"-"`    // this page's URL, for refreshing it
	First string    `json:"-"`    // the first page with the same filter; "" when this is it
	// Next is the next page, with the same filters, on the URL that was
	// asked (an API client's stays on /api/admin); "" on the last.
	Next NullText `json:"next"`
}

// StatusCount is how many of something have one status.
type StatusCount struct {
	Status string
	N      int64
}

// Counts are counts by status, every status present, in the order the
// page shows them; the JSON is an object of them by status.
type Counts []StatusCount

// DeliveryWindow is the deliveries of one window (the last hour, the
// last 24 hours) by result.
type DeliveryWindow struct {
	Label  string    `json:"-"`
	Window string    `json:"window"` // last_hour or last_24h
	Since  time.Time `json:"since"`
	Total  int64     `json:"total"`
	// Duplicates and DuplicateShare: duplicates/total, from 0 to 1; nil
	// when total is 0.
	Duplicates     int64    `json:"duplicates"`
	DuplicateShare *float64 `json:"duplicate_share"`
	// ByResult counts by outcome, every refusal as "refused"; every
	// result present, in the chart's order.
	ByResult Counts `json:"by_result"`
}

// Dashboard is the console's front page.
type Dashboard struct {
	Now        time.Time        `json:"now"`
	Deliveries []DeliveryWindow `json:"deliveries"`
	// NotRecorded: deliveries this process answered since it started
	// whose row was dropped (queue full: payments.Service.DroppedDeliveryRows).
	NotRecorded       int64         `json:"deliveries_not_recorded"`
	Chart             Chart         `json:"-"`
	ConflictsDay      int64         `json:"conflicts_last_24h"`
	Conflicts         []CallbackRow `json:"conflicts"`
	OrdersHour        Counts        `json:"orders_last_hour"` // by status, every status present
	OrdersDay         Counts        `json:"orders_last_24h"`
	JobsProcessing    int64         `json:"jobs_processing"`
	JobsFailed        int64         `json:"jobs_failed"`
	JobsStuck         int64         `json:"jobs_stuck"`
	JobsSucceededHour int64         `json:"jobs_succeeded_last_hour"`
	JobsSucceededDay  int64         `json:"jobs_succeeded_last_24h"`
	Archived          *int          `json:"archived_tasks"` // nil: the queue did not answer
	OutboxPending     int64         `json:"outbox_pending"`
	OutboxOldest      time.Duration `json:"outbox_oldest_age_ns"`
	LastAudit         *AuditVerdict `json:"last_audit"` // nil: the audit never ran
	Alerts            []AlertRow    `json:"alerts"`     // the newest operational webhooks, newest first
}

// AlertRow is one operational webhook: its event, when it was raised and
// where its delivery stands (pending, sent, failed, unsent).
type AlertRow struct {
	ID int64 `json:"id"`
	// Link is the console page of what raised it (the audit, a job, the
	// conflicting deliveries, the outbox, an order); "" for none.
	Link      string     `json:"link"`
	Event     string     `json:"event"`
	WebhookID string     `json:"webhook_id"`
	At        time.Time  `json:"at"`
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	SentAt    *time.Time `json:"sent_at"`
	LastError string     `json:"last_error,omitempty"`
}

// AuditVerdict is one past audit run.
type AuditVerdict struct {
	OK         bool      `json:"ok"`
	Violations int       `json:"violations"`
	Summary    string    `json:"summary"`
	At         time.Time `json:"at"`
}

// CallbackFilter is the callbacks list's filter as the form holds it.
type CallbackFilter struct {
	Provider    string
	Result      string
	Order       string
	Key         string
	Transaction string
	Email       string
	Search      string // q: a transaction id, a reference or an email
	Body        string // a kept body's path = value
	From        string
	To          string
}

// CallbackRow is one payment callback (provider event).
type CallbackRow struct {
	ID            int64      `json:"id"`
	Provider      string     `json:"provider"`
	Key           string     `json:"idempotency_key"`
	OrderID       string     `json:"order_id"`
	Event         string     `json:"event"`
	TransactionID string     `json:"transaction_id"`
	Amount        int64      `json:"amount"`
	Currency      string     `json:"currency"`
	Status        string     `json:"status"`
	Result        string     `json:"result"`
	ResponseCode  int        `json:"response_code"`
	Attempts      int        `json:"attempts"` // deliveries
	Conflicts     int        `json:"conflict_count"`
	FirstReceived time.Time  `json:"first_received_at"`
	LastReceived  time.Time  `json:"last_received_at"`
	Processed     *time.Time `json:"processed_at"`
	Fingerprint   string     `json:"payload_hash"`
	// OwnRefund: a refunded event found stale because it tells of a
	// refund Sekali itself asked and had recorded already (story's
	// OwnRefund). The page says so, where "stale" would read like a
	// fault; the JSON keeps the result.
	OwnRefund bool `json:"-"`
	// SecondCharge: it recorded a second charge of an order that had
	// had its own (story's SecondCharge): processed, and the customer's
	// money to give back. The page marks it where "processed" would read
	// like the order's payment.
	SecondCharge bool `json:"second_charge"`
}

// ownRefundWhy is why a callback of Sekali's own refund changed nothing.
const ownRefundWhy = "the gateway told of a refund Sekali asked and had already recorded from its answer"

// DeliveryRow is one HTTP delivery of a callback.
type DeliveryRow struct {
	ID           int64     `json:"id"`
	CallbackID   NullID    `json:"callback_id"` // none: refused before its key was known
	Provider     string    `json:"provider"`
	ReceivedAt   time.Time `json:"received_at"`
	Outcome      string    `json:"outcome"`
	ResponseCode int       `json:"response_code"`
	DurationMS   int       `json:"duration_ms"`
	RemoteAddr   string    `json:"remote_addr"`
	RequestID    string    `json:"request_id"`
	TraceID      string    `json:"trace_id,omitempty"` // none with tracing off
	Note         string    `json:"note"`               // why an unconfirmed delivery changed nothing
	// Reason is why it had its outcome, in words: its note, else the
	// rejection its callback recorded, else what the outcome means; ""
	// for a delivery that was processed.
	Reason string `json:"reason"`
	// OrderID is its callback's order; none when it was refused before
	// its key was known (or where its callback was not read).
	OrderID NullText `json:"order_id"`
}

// TransitionRow is one change of an order's status.
type TransitionRow struct {
	OrderID    string    `json:"order_id"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	Cause      string    `json:"cause"`
	CallbackID NullID    `json:"callback_id"` // none: not caused by a callback
	At         time.Time `json:"at"`
}

// MovementRow is one stock movement.
type MovementRow struct {
	ID      int64     `json:"id"`
	SKU     string    `json:"sku"`
	OrderID NullText  `json:"order_id"` // none for an adjust
	Kind    string    `json:"kind"`
	Qty     int64     `json:"qty"` // signed: + adds to stock, - takes from it
	At      time.Time `json:"at"`
}

// PaymentRow is one charge: the order API's payment and what became of
// its money.
type PaymentRow struct {
	Provider  string    `json:"provider"`
	Reference string    `json:"provider_reference"`
	OrderID   string    `json:"order_id"`
	Amount    int64     `json:"amount"`
	Refunded  int64     `json:"refunded_amount"` // what its refunds add up to
	Currency  string    `json:"currency"`
	Status    string    `json:"status"`
	Dispute   NullText  `json:"dispute"` // a chargeback: open, won, lost; none
	Created   time.Time `json:"created_at"`
	Updated   time.Time `json:"updated_at"`
}

// OutboxRow is one outbox row.
type OutboxRow struct {
	ID         int64      `json:"id"`
	TaskID     string     `json:"task_id"`
	Type       string     `json:"task_type"`
	Queue      string     `json:"queue"`
	Status     string     `json:"status"`
	ProcessAt  time.Time  `json:"process_at"`
	Attempts   int        `json:"attempts"`
	LastError  string     `json:"last_error"`
	Created    time.Time  `json:"created_at"`
	Dispatched *time.Time `json:"dispatched_at"`
}

// JobRow is one job execution row.
type JobRow struct {
	Key         string     `json:"idempotency_key"`
	Type        string     `json:"type"`
	BusinessKey string     `json:"business_key"`
	Queue       string     `json:"queue"`
	Status      string     `json:"status"`
	Stuck       bool       `json:"stuck"` // processing past its lease
	Attempts    int        `json:"attempts"`
	Fence       int64      `json:"fence"`
	Worker      string     `json:"worker_id"`
	LockedUntil *time.Time `json:"locked_until"`
	Started     time.Time  `json:"started_at"`
	Finished    *time.Time `json:"finished_at"`
	LastError   string     `json:"last_error"`
	// QueueState is the queue's state of the task (an order's jobs that
	// have not succeeded); none where it was not asked.
	QueueState NullText `json:"queue_state"`
}

// CallbackDetail is one callback and what it caused.
type CallbackDetail struct {
	Now         time.Time       `json:"-"`
	Callback    CallbackRow     `json:"callback"`
	Deliveries  []DeliveryRow   `json:"deliveries"`
	Transitions []TransitionRow `json:"transitions"`
	Movements   []MovementRow   `json:"movements"`
	Payment     *PaymentRow     `json:"payment"`
	Outbox      []OutboxRow     `json:"outbox"`
	Jobs        []JobRow        `json:"jobs"`
	// Sent is what the accepted delivery carried, while it is kept
	// (DELIVERY_BODY_RETENTION); nil when it is not.
	Sent *KeptDelivery `json:"sent"`
	// Conflicts are the latest conflicting deliveries beside it, each
	// with what differed.
	Conflicts []Conflict `json:"conflicts"`
}

// DeliveryDetail is one delivery's page.
type DeliveryDetail struct {
	Now           time.Time     `json:"-"`
	Delivery      DeliveryRow   `json:"delivery"`
	Sent          *KeptDelivery `json:"sent"` // nil when not kept
	CanApplyAgain bool          `json:"can_apply_again"`
}

// ApplyMatching asks before applying again every kept delivery a filter
// matches that was refused for a reason that may have changed.
type ApplyMatching struct {
	Query string  // the filter, as a query
	IDs   []int64 // the deliveries, one per callback, newest first
	Max   int     // at most this many at once
}

// DryRun is what a kept delivery would do now (a rolled-back run).
type DryRun struct {
	DeliveryID   int64           `json:"delivery_id"`
	Result       string          `json:"result"`
	Status       int             `json:"response_code"`
	Detail       string          `json:"detail"`
	OrderID      string          `json:"order_id"`
	StatusBefore string          `json:"order_status_before"`
	StatusAfter  string          `json:"order_status_after"`
	Transitions  []TransitionRow `json:"transitions"`
	Movements    []MovementRow   `json:"movements"`
	Outbox       []string        `json:"outbox"` // task ids
	Payments     int             `json:"payments"`
	// CanApplyAgain: the delivery may be applied again (its outcome
	// allows it and its body is kept); the page offers it to an operator.
	CanApplyAgain bool `json:"can_apply_again"`
}

// KeptDelivery is one delivery's kept body and headers.
type KeptDelivery struct {
	DeliveryID int64               `json:"delivery_id"`
	ReceivedAt time.Time           `json:"received_at"`
	Outcome    string              `json:"outcome"`
	Headers    map[string][]string `json:"headers"` // secrets redacted
	Body       string              `json:"body"`    // as received; indented when JSON that indents within bounds
}

// Conflict is a conflicting delivery's body beside the accepted one, and
// the paths where they differ (none listed when either is not JSON: Why
// says so).
type Conflict struct {
	Refused KeptDelivery `json:"refused"`
	Changes []Change     `json:"changes"`
	More    bool         `json:"more_changes"` // more than are listed
	// TooLarge: the bodies are past a bound of the diff (app/jsondiff:
	// size, depth, values, output); no change is listed and Why says
	// which bound.
	TooLarge bool   `json:"too_large_to_diff"`
	Why      string `json:"why,omitempty"`
}

// Change is one path where two bodies differ: added, removed or changed.
type Change struct {
	Path   string `json:"path"` // a JSON Pointer
	Kind   string `json:"kind"`
	Before string `json:"before"` // compact JSON; "" when absent
	After  string `json:"after"`
}

// DeliveryFilter is the deliveries list's filter as the form holds it.
type DeliveryFilter struct {
	Provider    string
	Outcome     string
	Callback    string
	Addr        string
	Request     string
	Transaction string
	Body        string // a kept body's path = value
	From        string
	To          string
}

// OrderFilter is the orders list's filter as the form holds it.
type OrderFilter struct {
	Status      string
	Email       string
	ID          string
	Transaction string
	From        string
	To          string
}

// OrderRow is one order.
type OrderRow struct {
	ID       string     `json:"id"`
	Email    string     `json:"customer_email"`
	Status   string     `json:"status"`
	Total    int64      `json:"total_amount"`
	Currency string     `json:"currency"`
	Created  time.Time  `json:"created_at"`
	Expires  time.Time  `json:"expires_at"`
	Paid     *time.Time `json:"paid_at"`
}

// ItemRow is one line of an order.
type ItemRow struct {
	SKU       string `json:"sku"`
	Name      string `json:"name"` // the product's name when the order was made
	Qty       int64  `json:"qty"`
	UnitPrice int64  `json:"unit_price"`
}

// InvoiceRow is an order's invoice.
type InvoiceRow struct {
	Number   string    `json:"number"`
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	IssuedAt time.Time `json:"issued_at"`
}

// GatewayRequestRow is one call Sekali made to a gateway for an order.
type GatewayRequestRow struct {
	ID          int64      `json:"id"`
	OrderID     string     `json:"order_id"`
	Kind        string     `json:"kind"`
	Provider    string     `json:"provider"`
	Key         string     `json:"idempotency_key"`
	Amount      int64      `json:"amount"` // minor units
	Currency    string     `json:"currency"`
	Phase       string     `json:"phase"` // awaiting_approval, planned, sent, done, failed, declined, discarded or conflict (PhaseText shows it)
	Attempts    int        `json:"attempts"`
	Object      string     `json:"provider_object_id"`
	RedirectURL string     `json:"redirect_url"`
	LastError   string     `json:"last_error"`
	Created     time.Time  `json:"created_at"`
	Updated     time.Time  `json:"updated_at"`
	Done        *time.Time `json:"done_at"`
	// AnsweredAmount (minor units) and AnsweredCurrency are what the
	// gateway's answer stated of its object's money; null and "" where it
	// states none ("": in Currency).
	AnsweredAmount   *int64 `json:"answered_amount"`
	AnsweredCurrency string `json:"answered_currency"`
	// Answer, for a call in phase conflict, is what was asked and what
	// the gateway answered, both, as the page shows them.
	Answer AnswerConflict `json:"-"`
	// UnknownSince, Asks and NextAsk: a call whose outcome is unknown
	// (sent, its answer lost; a refund pending at the gateway) is asked
	// about again on its gateway's schedule — since when, how often so
	// far, and when next (nil: its outcome is known).
	UnknownSince *time.Time `json:"unknown_since"`
	Asks         int        `json:"asks"`
	NextAsk      *time.Time `json:"next_ask_at"`
	// Retry: a refund not over, which an admin may send again now rather
	// than wait for its job's next try.
	Retry bool `json:"-"`
	// From is what the form of its button names as the page to come
	// back to: "order" for the order's page, "" for the list of calls.
	From string `json:"-"`
}

// Asked says how often an unknown outcome was asked about:
// "asked 2 times" ("asked once", "not asked yet").
func (r GatewayRequestRow) Asked() string {
	switch r.Asks {
	case 0:
		return "not asked yet"
	case 1:
		return "asked once"
	}
	return "asked " + strconv.Itoa(r.Asks) + " times"
}

// AnswerConflict is a gateway's answer that states another amount or
// currency than was asked: both, written as money. Zero: no conflict.
type AnswerConflict struct {
	Asked, Answered string
}

// PhaseSentUnknown is how a request in phase sent is shown: sent, and
// whether the gateway acted is not known yet.
const PhaseSentUnknown = "sent, answer unknown"

// PhaseText is a gateway request's phase as the page shows it.
func PhaseText(phase string) string {
	switch phase {
	case "sent":
		return PhaseSentUnknown
	case "awaiting_approval":
		return "awaiting approval"
	}
	return phase
}

// EmailRow is one outbound email.
type EmailRow struct {
	Key       string     `json:"key"`
	MessageID string     `json:"message_id"`
	To        string     `json:"to"`
	Subject   string     `json:"subject"`
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	LastError string     `json:"last_error"`
	SentAt    *time.Time `json:"sent_at"`
	// Logged: SMTP_URL was unset; the email "sent" went to the log and
	// reached no one.
	Logged bool `json:"logged"`
}

// Event is one line of an order's timeline.
type Event struct {
	At     time.Time `json:"at"`
	What   string    `json:"what"`
	Detail string    `json:"detail"`
	Tone   string    `json:"-"`
	// Ref names the row the line is about: callback:ID, job:KEY,
	// outbox:TASK_ID, product:SKU; none: none (RefURL links it).
	Ref NullText `json:"ref"`
}

// OrderDetail is an order's whole story.
type OrderDetail struct {
	Now         time.Time           `json:"-"`
	Order       OrderRow            `json:"order"`
	Items       []ItemRow           `json:"items"`
	Payments    []PaymentRow        `json:"payments"`
	Invoice     *InvoiceRow         `json:"invoice"`
	Callbacks   []CallbackRow       `json:"callbacks"`
	Transitions []TransitionRow     `json:"transitions"`
	Movements   []MovementRow       `json:"movements"`
	Outbox      []OutboxRow         `json:"outbox"`
	Jobs        []JobRow            `json:"jobs"`
	Emails      []EmailRow          `json:"emails"`
	Gateway     []GatewayRequestRow `json:"gateway_requests"`
	// Refunds are the refunds asked of the order's gateway (from the
	// console or the admin API), with their phase and amounts.
	Refunds []RefundRow `json:"refunds"`
	// GatewayRefunds are the refunds of its charges at their gateways,
	// whoever asked for them, in the gateway's states.
	GatewayRefunds []GatewayRefundRow `json:"gateway_refunds"`
	RefundLeft     int64              `json:"refund_left"` // minor units that can still be refunded: Refund.Left
	Timeline       []Event            `json:"timeline"`
	// Traces are the ids of the traces of its applied callbacks (none
	// with tracing off): the paid one's runs on into its jobs.
	Traces    []string     `json:"traces,omitempty"`
	CanCancel bool         `json:"can_cancel"` // the order is pending
	Refund    RefundForm   `json:"-"`
	Owed      []RefundForm `json:"-"` // the order's other charges that must go back (a second charge)
	// CorrectTotal is the form that corrects the total, while a payment
	// of the order stands rejected for its amount; nil otherwise.
	CorrectTotal *TotalCorrection `json:"-"`
}

// TotalCorrection is the order page's form that corrects the total of an
// order not yet paid whose payment was rejected for its amount: for an
// owner, before that payment is applied again.
type TotalCorrection struct {
	Amount   string // the rejected payment's amount, in the major unit: the likely total
	Callback int64  // the rejected payment's callback, whose deliveries may be applied again
}

// RefundRow is one refund asked of an order's gateway: the call to the
// gateway, as every gateway request shows it, why, and who asked. It is
// also the admin API's answer to a refund asked.
type RefundRow struct {
	GatewayRequestRow
	Reason string `json:"reason"`
	By     string `json:"requested_by"`
	// A refund above REFUND_APPROVAL_ABOVE waits (phase
	// awaiting_approval) until another owner approves it (then it is
	// sent) or an owner declines it (phase declined: never sent).
	ApprovedBy string     `json:"approved_by"`
	ApprovedAt *time.Time `json:"approved_at"`
	DeclinedBy string     `json:"declined_by"`
	DeclinedAt *time.Time `json:"declined_at"`
	// CanApprove and CanDecline: the admin looking is an owner who may
	// answer this refund awaiting approval (not the one who asked, to
	// approve it).
	CanApprove bool `json:"-"`
	CanDecline bool `json:"-"`
	// AtGateway is the state of the gateway's refund (pending, succeeded,
	// failed, canceled), once it is known; GatewaySays is the gateway's
	// reason for a refund that failed.
	AtGateway   string `json:"-"`
	GatewaySays string `json:"-"`
	// AgainURL, for a refund the gateway failed after accepting it, asks
	// for the same refund again: a new refund, under a new key.
	AgainURL string `json:"-"`
}

// GatewayRefundRow is one refund at a gateway: by the gateway's id of it
// (or, for a charge total not yet named refund by refund,
// {reference}:refunded:{total}), its state there and, for one that
// failed, the gateway's reason.
type GatewayRefundRow struct {
	Provider      string    `json:"provider"`
	RefundKey     string    `json:"refund_key"`
	Amount        int64     `json:"amount"` // minor units
	Currency      string    `json:"currency"`
	Status        string    `json:"status"` // pending, succeeded, failed, canceled, superseded
	FailureReason string    `json:"failure_reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// RefundForm is the order page's refund form: what is left, and what was
// typed.
type RefundForm struct {
	OrderID  string
	Payment  string // the charge's provider reference when it is not the order's own
	Provider string
	Currency string
	Left     int64  // minor units; 0: nothing to refund (Why says why)
	LeftText string // Left in major units, for the amount field
	Why      string
	// Disputed: nothing can be refunded because the charge's dispute is
	// open or lost; the page says so where the form would be.
	Disputed bool
	// Owed: the charge must go back — the order is refund_required
	// (paid, with no stock), or the charge is a second one — and gets a
	// one-click "Refund in full" (Key is that form's key).
	Owed        bool
	Key         string
	Amount      string
	Reason      string
	Error       string // of the amount
	ReasonError string
}

// RefundConfirm is the page that asks before a refund is sent.
type RefundConfirm struct {
	Order    OrderRow
	Payment  string // the charge's provider reference when it is not the order's own
	Provider string
	Amount   int64 // minor units
	Currency string
	Left     int64
	// AmountText and Reason are posted again as they were typed.
	AmountText string
	Reason     string
	Key        string
	// NeedsApproval: the amount is above REFUND_APPROVAL_ABOVE, so the
	// refund waits for another owner's approval before it is sent.
	NeedsApproval bool
}

// JobFilter is the jobs list's filter as the form holds it.
type JobFilter struct {
	Status string
	Type   string
	Key    string
}

// TaskRow is a task as the queue holds it.
type TaskRow struct {
	ID           string    `json:"id"`
	Queue        string    `json:"queue"`
	Type         string    `json:"type"`
	State        string    `json:"state"`
	Payload      string    `json:"payload"`
	Retried      int       `json:"retried"`
	MaxRetry     int       `json:"max_retry"`
	LastError    string    `json:"last_error"`
	LastFailedAt time.Time `json:"last_failed_at"`
}

// Jobs is the jobs page: job executions (the list) and the queue's
// archived tasks that match the filter.
type Jobs struct {
	List[JobRow]
	Filter   JobFilter `json:"-"`
	Archived []TaskRow `json:"archived"`
	// ArchivedError says why the queue could not be asked, if it could not.
	ArchivedError NullText `json:"archived_error"`
	Query         string   `json:"-"` // the filter as a query string, for the bulk re-run link
	// CanRerunMatching: a failed job or an archived task matches the
	// filter, so the bulk re-run has something to do.
	CanRerunMatching bool `json:"-"`
}

// CancelConfirm asks before cancelling an order.
type CancelConfirm struct {
	Order     OrderRow
	Items     []ItemRow
	CanCancel bool // the order is pending
}

// RerunConfirm asks before re-running every failed or archived job that
// matches a filter.
type RerunConfirm struct {
	Filter JobFilter
	Keys   []string
}

// OutboxFilter is the outbox list's filter as the form holds it.
type OutboxFilter struct {
	Status string
	Type   string
	TaskID string
}

// ProductRow is one product.
//
// It is also the admin API's product: the body of POST /api/products and
// the answer to it and to a restock.
type ProductRow struct {
	SKU      string `json:"sku"`
	Name     string `json:"name"`
	Price    int64  `json:"price"`
	Currency string `json:"currency"`
	Stock    int64  `json:"stock"`
	// MaxPerOrder caps the units of the product one order may hold; nil:
	// no cap of its own.
	MaxPerOrder *int64 `json:"max_per_order"`
}

// ProductForm is the new-product form, with what was typed and what was
// wrong with it.
type ProductForm struct {
	Key      string            // the form's Idempotency-Key
	Values   map[string]string // sku, name, price, currency, stock
	Errors   map[string]string // by field; "" for the form as a whole
	Accepted bool
}

// Products is the products page: every product, on one page, and the
// form for a new one.
type Products struct {
	List[ProductRow]
	Form ProductForm `json:"-"`
}

// RestockForm is a product's restock form.
type RestockForm struct {
	Key   string
	Qty   string
	Error string
}

// ProductDetail is one product and its stock ledger. Its JSON is the
// product, a page of its ledger and the next page (MarshalJSON).
type ProductDetail struct {
	Product ProductRow
	Ledger  List[MovementRow]
	Restock RestockForm
	Limit   LimitForm
}

// MarshalJSON is the product, a page of its ledger and the next page's
// URL: the ledger's page flattened beside the product, as documented.
func (v ProductDetail) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Product ProductRow    `json:"product"`
		Ledger  []MovementRow `json:"ledger"`
		Next    NullText      `json:"next"`
	}{v.Product, v.Ledger.Rows, v.Ledger.Next})
}

// LimitForm is the form of a product's cap on units per order: what was
// typed (empty: no cap) and what was wrong with it.
type LimitForm struct {
	Value string
	Error string
}

// AuditViolation is one broken invariant, linked to the row at fault.
type AuditViolation struct {
	Detail string
	URL    string
}

// AuditCheck is one invariant and its verdict.
type AuditCheck struct {
	ID          int
	Name        string
	Description string
	OK          bool
	Violations  []AuditViolation
}

// Audit is the audit page: the form and, once run, the verdict.
type Audit struct {
	Ran          bool
	OK           bool
	DrainTimeout string
	Drained      bool
	DrainFailure string
	Settling     int
	Took         string
	Checks       []AuditCheck
}

// ActionFilter is the action log's filter as the form holds it.
type ActionFilter struct {
	Admin  string
	Action string
}

// ActionRow is one entry of the admin action log.
type ActionRow struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Admin      string    `json:"admin"`
	Action     string    `json:"action"`
	Target     string    `json:"target"`
	Result     string    `json:"result"`
	Detail     string    `json:"detail"`
	RemoteAddr string    `json:"remote_addr"`
	// Count is how many refused log-ins of one address the row stands
	// for, since Since (the start of its window; nil for any other row).
	Count int        `json:"count"`
	Since *time.Time `json:"since"`
}

// NullText is a string that the JSON shows as null when it is empty.
type NullText string

// MarshalJSON is null for "", else the string.
func (s NullText) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// NullID is a row's id, 0 for none, which the JSON shows as null.
type NullID int64

// MarshalJSON is null for 0, else the number.
func (n NullID) MarshalJSON() ([]byte, error) {
	if n == 0 {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(n), 10), nil
}

// MarshalJSON is the counts as an object by status, in their order.
func (cs Counts) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(c.Status)
		if err != nil {
			return nil, err
		}
		b = append(append(b, k...), ':')
		b = strconv.AppendInt(b, c.N, 10)
	}
	return append(b, '}'), nil
}

// SortedKeys are m's keys in order, for a page that lists a map.
func SortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// JobDetail is one job's page (GET /admin/jobs/{key}) and its JSON: the
// job row, every attempt, a timeline from its outbox row to its end, the
// task as the queue holds it, and its discard.
type JobDetail struct {
	Now      time.Time    `json:"-"`
	Job      JobRow       `json:"job"`
	Attempts []AttemptRow `json:"attempts"` // newest first, at most 50
	Timeline []Event      `json:"timeline"`
	Outbox   *OutboxRow   `json:"outbox"` // none when pruned
	// Task is the task as the queue holds it now; none when the queue has
	// none (it ran and its retention ended, or Redis lost it), and
	// TaskError when the queue could not be asked.
	Task      *TaskRow    `json:"task"`
	TaskError NullText    `json:"task_error"`
	Discarded *DiscardRow `json:"discarded"` // who gave it up and why; none unless discarded
	// CanDiscard and CanRerun say whether the actions may do something:
	// a failed or stuck job.
	CanDiscard bool `json:"can_discard"`
	CanRerun   bool `json:"can_rerun"`
}

// AttemptRow is one run of a job: one claim, with its fence.
type AttemptRow struct {
	Fence      int64      `json:"fence"`
	Worker     string     `json:"worker_id"`
	Started    time.Time  `json:"started_at"`
	Finished   *time.Time `json:"finished_at"` // none while it runs (or its worker died)
	DurationMS *int64     `json:"duration_ms"` // none until it ended
	Outcome    string     `json:"outcome"`     // succeeded, failed, fenced, lock_lost, discarded; "" while it runs
	Error      string     `json:"error"`
}

// DiscardRow says who discarded a job, when and why.
type DiscardRow struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// DiscardConfirm asks before discarding every failed or stuck job that
// matches a filter.
type DiscardConfirm struct {
	Filter JobFilter
	Keys   []string
}

// QueryPairs are query q's names and values, in name order, for a form
// that carries a filter on as hidden fields.
func QueryPairs(q string) [][2]string {
	v, _ := url.ParseQuery(q)
	var out [][2]string
	for _, k := range slices.Sorted(maps.Keys(v)) {
		out = append(out, [2]string{k, v.Get(k)})
	}
	return out
}

// AdminRow is one admin on the admins page.
type AdminRow struct {
	ID       int64     `json:"id"`
	Email    string    `json:"email"`
	Role     string    `json:"role"`
	MFA      bool      `json:"mfa"`
	Disabled bool      `json:"disabled"`
	Created  time.Time `json:"created_at"`
	Self     bool      `json:"self"` // the admin looking
}

// InvitationRow is an invitation not yet used.
type InvitationRow struct {
	ID        int64     `json:"id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	InvitedBy string    `json:"invited_by"`
	Expires   time.Time `json:"expires_at"`
}

// Admins is the owners' page of admins and open invitations; Link is an
// invitation link just made, shown once.
type Admins struct {
	Admins      []AdminRow      `json:"admins"`
	Invitations []InvitationRow `json:"invitations"`
	Roles       []string        `json:"roles"`
	Link        string          `json:"link,omitempty"`
	LinkEmail   string          `json:"-"`
}

// Account is an admin's own page: their role, password and second factor.
type Account struct {
	Email       string
	Role        string
	MFA         bool
	MFARequired bool // ADMIN_MFA=required and an owner
	// The second factor being set up: its secret and QR code.
	NewSecret string
	NewQR     string
	Error     string
}

// CodeForm asks for the second factor at log-in.
type CodeForm struct {
	Next  string
	Error string
}

// InviteForm is an invitation's page: choose a password.
type InviteForm struct {
	Token string
	Email string
	Role  string
	Error string
}

// CatchUp is the catch-up page: the newest runs, each with what each
// gateway answered.
type CatchUp struct {
	Now   time.Time    `json:"-"`
	Every string       `json:"every"` // CATCH_UP_EVERY, "" when unset: no run is scheduled
	Runs  []CatchUpRun `json:"runs"`  // newest first
}

// CatchUpRun is one catch-up run.
type CatchUpRun struct {
	ID         int64            `json:"id"`
	StartedAt  time.Time        `json:"started_at"`
	FinishedAt *time.Time       `json:"finished_at"` // null while it runs (or if it died)
	Since      time.Time        `json:"since"`
	Trigger    string           `json:"trigger"`  // command or job
	AskedBy    string           `json:"asked_by"` // the admin who asked on the console; "" for the schedule and the command
	Found      int              `json:"found"`
	Applied    int              `json:"applied"`
	Gateways   []CatchUpGateway `json:"gateways"`
	Error      string           `json:"error"`
}

// CatchUpGateway is what one gateway answered in a run.
type CatchUpGateway struct {
	Provider string `json:"provider"`
	Asked    int    `json:"asked"`
	Found    int    `json:"found"`
	Applied  int    `json:"applied"`
	Error    string `json:"error"`
}
