package views

import "time"

// The view structs: what each page shows, as plain values. Handlers in
// web/ fill them. They are not the admin JSON: that has its own types in
// web/admin_json.go, so what a page shows can change without changing
// the API.

// Meta is what the frame of every console page needs.
type Meta struct {
	Title   string
	Section string // the navigation entry to mark as current
	Admin   string // the logged-in admin's email; "" on the log-in page
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
}

// List is one page of a console list — callbacks, deliveries, orders,
// jobs, outbox, products, actions, a product's ledger: the same shape for
// each. Its filter, where it has one, is the page's form and goes beside
// it.
type List[R any] struct {
	Now   time.Time
	Rows  []R    // newest first
	Self  string // this page's URL, for refreshing it
	First string // the first page with the same filter; "" when this is it
	Next  string // the next page; "" on the last
}

// StatusCount is how many of something have one status.
type StatusCount struct {
	Status string
	N      int64
}

// DeliveryWindow is the deliveries of one window (the last hour, the
// last 24 hours) by result.
type DeliveryWindow struct {
	Label          string
	Total          int64
	Duplicates     int64
	DuplicateShare string
	ByResult       []StatusCount
}

// Dashboard is the console's front page.
type Dashboard struct {
	Now               time.Time
	Deliveries        []DeliveryWindow
	Chart             Chart
	ConflictsDay      int64
	Conflicts         []CallbackRow
	OrdersHour        []StatusCount
	OrdersDay         []StatusCount
	JobsProcessing    int64
	JobsFailed        int64
	JobsStuck         int64
	JobsSucceededHour int64
	JobsSucceededDay  int64
	Archived          int // -1: the queue did not answer
	OutboxPending     int64
	OutboxOldest      time.Duration
	LastAudit         *AuditVerdict
}

// AuditVerdict is one past audit run.
type AuditVerdict struct {
	OK         bool
	Violations int
	Summary    string
	At         time.Time
}

// CallbackFilter is the callbacks list's filter as the form holds it.
type CallbackFilter struct {
	Provider string
	Result   string
	Order    string
	Key      string
	From     string
	To       string
}

// CallbackRow is one payment callback (provider event).
type CallbackRow struct {
	ID            int64
	Provider      string
	Key           string
	OrderID       string
	Event         string
	TransactionID string
	Amount        int64
	Currency      string
	Status        string
	Result        string
	ResponseCode  int
	Attempts      int
	Conflicts     int
	FirstReceived time.Time
	LastReceived  time.Time
	Processed     *time.Time
	Fingerprint   string
}

// DeliveryRow is one HTTP delivery of a callback.
type DeliveryRow struct {
	ID           int64
	CallbackID   int64
	Provider     string
	ReceivedAt   time.Time
	Outcome      string
	ResponseCode int
	DurationMS   int
	RemoteAddr   string
	RequestID    string
	Note         string // why an unconfirmed delivery changed nothing
}

// TransitionRow is one change of an order's status.
type TransitionRow struct {
	OrderID    string
	From       string
	To         string
	Cause      string
	CallbackID int64
	At         time.Time
}

// MovementRow is one stock movement.
type MovementRow struct {
	ID      int64
	SKU     string
	OrderID string
	Kind    string
	Qty     int64 // signed: + adds to stock, - takes from it
	At      time.Time
}

// PaymentRow is one charge.
type PaymentRow struct {
	Provider  string
	Reference string
	OrderID   string
	Amount    int64
	Refunded  int64  // what its refunds add up to
	Dispute   string // a chargeback: open, won, lost
	Currency  string
	Status    string
	Created   time.Time
	Updated   time.Time
}

// OutboxRow is one outbox row.
type OutboxRow struct {
	ID         int64
	TaskID     string
	Type       string
	Queue      string
	Status     string
	ProcessAt  time.Time
	Attempts   int
	LastError  string
	Created    time.Time
	Dispatched *time.Time
}

// JobRow is one job execution row.
type JobRow struct {
	Key         string
	Type        string
	BusinessKey string
	Queue       string
	Status      string
	Stuck       bool
	Attempts    int
	Fence       int64
	Worker      string
	LockedUntil *time.Time
	Started     time.Time
	Finished    *time.Time
	LastError   string
	QueueState  string // the queue's view, where asked
}

// CallbackDetail is one callback and what it caused.
type CallbackDetail struct {
	Now         time.Time
	Callback    CallbackRow
	Deliveries  []DeliveryRow
	Transitions []TransitionRow
	Movements   []MovementRow
	Payment     *PaymentRow
	Outbox      []OutboxRow
	Jobs        []JobRow
}

// DeliveryFilter is the deliveries list's filter as the form holds it.
type DeliveryFilter struct {
	Provider string
	Outcome  string
	Callback string
	Addr     string
	From     string
	To       string
}

// OrderFilter is the orders list's filter as the form holds it.
type OrderFilter struct {
	Status string
	Email  string
	ID     string
	From   string
	To     string
}

// OrderRow is one order.
type OrderRow struct {
	ID       string
	Email    string
	Status   string
	Total    int64
	Currency string
	Created  time.Time
	Expires  time.Time
	Paid     *time.Time
}

// ItemRow is one line of an order.
type ItemRow struct {
	SKU       string
	Name      string // the product's name, for the customer's page
	Qty       int64
	UnitPrice int64
}

// InvoiceRow is an order's invoice.
type InvoiceRow struct {
	Number   string
	Amount   int64
	Currency string
	IssuedAt time.Time
}

// EmailRow is one outbound email.
// GatewayRequestRow is one call Sekali made to a gateway for an order.
type GatewayRequestRow struct {
	ID        int64
	OrderID   string
	Kind      string
	Provider  string
	Key       string
	Phase     string // planned, PhaseSentUnknown, done or failed
	Attempts  int
	Object    string
	LastError string
	Updated   time.Time
	// Retry: a refund not over, which an admin may send again now rather
	// than wait for its job's next try.
	Retry bool
}

// PhaseSentUnknown is how a request in phase sent is shown: sent, and
// whether the gateway acted is not known yet.
const PhaseSentUnknown = "sent, answer unknown"

type EmailRow struct {
	Key       string
	MessageID string
	To        string
	Subject   string
	Status    string
	Attempts  int
	LastError string
	SentAt    *time.Time
}

// Event is one line of an order's timeline.
type Event struct {
	At     time.Time
	What   string
	Detail string
	Tone   string
	URL    string
}

// OrderDetail is an order's whole story.
type OrderDetail struct {
	Now         time.Time
	Order       OrderRow
	Items       []ItemRow
	Payments    []PaymentRow
	Invoice     *InvoiceRow
	Callbacks   []CallbackRow
	Transitions []TransitionRow
	Movements   []MovementRow
	Outbox      []OutboxRow
	Jobs        []JobRow
	Emails      []EmailRow
	Gateway     []GatewayRequestRow
	Timeline    []Event
	CanCancel   bool
	Refunds     []RefundRow
	Refund      RefundForm
	Owed        []RefundForm // the order's other charges that must go back (a second charge)
}

// RefundRow is one refund asked of an order's gateway.
type RefundRow struct {
	ID        int64
	Amount    int64 // minor units
	Currency  string
	Reason    string
	By        string
	Provider  string
	Key       string
	Phase     string // planned, PhaseSentUnknown, done or failed
	Attempts  int
	Object    string // the gateway's refund
	LastError string
	Asked     time.Time
	// AtGateway is the state of the gateway's refund (pending, succeeded,
	// failed, canceled), once it is known; GatewaySays is the gateway's
	// reason for a refund that failed.
	AtGateway   string
	GatewaySays string
	// AgainURL, for a refund the gateway failed after accepting it, asks
	// for the same refund again: a new refund, under a new key.
	AgainURL string
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
}

// JobFilter is the jobs list's filter as the form holds it.
type JobFilter struct {
	Status string
	Type   string
	Key    string
}

// TaskRow is a task as the queue holds it.
type TaskRow struct {
	ID           string
	Queue        string
	Type         string
	State        string
	Payload      string
	Retried      int
	MaxRetry     int
	LastError    string
	LastFailedAt time.Time
}

// Jobs is the jobs page: job executions (the list) and the queue's
// archived tasks.
type Jobs struct {
	List[JobRow]
	Filter   JobFilter
	Archived []TaskRow
	// ArchivedError says why the queue could not be asked, if it could not.
	ArchivedError string
	Query         string // the filter as a query string, for the bulk re-run link
	// CanRerunMatching: a failed job or an archived task matches the
	// filter, so the bulk re-run has something to do.
	CanRerunMatching bool
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
type ProductRow struct {
	SKU         string
	Name        string
	Price       int64
	Currency    string
	Stock       int64
	MaxPerOrder *int64 // units one order may hold; nil: no cap of its own
}

// ProductForm is the new-product form, with what was typed and what was
// wrong with it.
type ProductForm struct {
	Key      string            // the form's Idempotency-Key
	Values   map[string]string // sku, name, price, currency, stock
	Errors   map[string]string // by field; "" for the form as a whole
	Accepted bool
}

// Products is the products page.
type Products struct {
	Rows []ProductRow
	Form ProductForm
}

// RestockForm is a product's restock form.
type RestockForm struct {
	Key   string
	Qty   string
	Error string
}

// ProductDetail is one product and its stock ledger.
type ProductDetail struct {
	Product ProductRow
	Ledger  List[MovementRow]
	Restock RestockForm
	Limit   LimitForm
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
	ID         int64
	At         time.Time
	Admin      string
	Action     string
	Target     string
	Result     string
	Detail     string
	RemoteAddr string
	// Count is how many refused log-ins of one address the row stands
	// for, since Since (the start of its window); 1 for any other row.
	Count int
	Since *time.Time
}
