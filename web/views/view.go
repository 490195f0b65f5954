package views

import "time"

// The view structs: what each page shows, as plain values. Handlers in
// web/ fill them; the same structs are the JSON of the /api/admin twin of
// each page, hence the json tags.

// Meta is what the frame of every console page needs.
type Meta struct {
	Title   string
	Section string // the navigation entry to mark as current
	Admin   string // the logged-in admin's email; "" on the log-in page
	Flash   *Flash
}

// Flash is a one-time message shown at the top of the next page.
type Flash struct {
	Tone string `json:"tone"` // ok, bad, warn
	Text string `json:"text"`
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

// StatusCount is how many of something have one status.
type StatusCount struct {
	Status string `json:"status"`
	N      int64  `json:"n"`
}

// DeliveryWindow is the deliveries of one window (the last hour, the
// last 24 hours) by result.
type DeliveryWindow struct {
	Label          string        `json:"label"`
	Total          int64         `json:"total"`
	Duplicates     int64         `json:"duplicates"`
	DuplicateShare string        `json:"duplicate_share"`
	ByResult       []StatusCount `json:"by_result"`
}

// Dashboard is the console's front page.
type Dashboard struct {
	Now               time.Time        `json:"now"`
	Deliveries        []DeliveryWindow `json:"deliveries"`
	Chart             Chart            `json:"-"`
	ConflictsDay      int64            `json:"conflicts_last_24h"`
	Conflicts         []CallbackRow    `json:"conflicts"`
	OrdersHour        []StatusCount    `json:"orders_last_hour"`
	OrdersDay         []StatusCount    `json:"orders_last_24h"`
	JobsProcessing    int64            `json:"jobs_processing"`
	JobsFailed        int64            `json:"jobs_failed"`
	JobsStuck         int64            `json:"jobs_stuck"`
	JobsSucceededHour int64            `json:"jobs_succeeded_last_hour"`
	JobsSucceededDay  int64            `json:"jobs_succeeded_last_24h"`
	Archived          int              `json:"archived_tasks"` // -1: the queue did not answer
	OutboxPending     int64            `json:"outbox_pending"`
	OutboxOldest      time.Duration    `json:"outbox_oldest_age_ns"`
	LastAudit         *AuditVerdict    `json:"last_audit"`
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
	Provider string `json:"provider,omitempty"`
	Result   string `json:"result,omitempty"`
	Order    string `json:"order,omitempty"`
	Key      string `json:"key,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
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
	Attempts      int        `json:"attempts"`
	Conflicts     int        `json:"conflict_count"`
	FirstReceived time.Time  `json:"first_received_at"`
	LastReceived  time.Time  `json:"last_received_at"`
	Processed     *time.Time `json:"processed_at"`
	Fingerprint   string     `json:"payload_hash"`
}

// Callbacks is the callbacks list.
type Callbacks struct {
	Now       time.Time      `json:"-"`
	Filter    CallbackFilter `json:"filter"`
	Providers []string       `json:"-"`
	Rows      []CallbackRow  `json:"rows"`
	Next      string         `json:"next"`
	Self      string         `json:"-"` // this page's URL, for refreshing it
}

// DeliveryRow is one HTTP delivery of a callback.
type DeliveryRow struct {
	ID           int64     `json:"id"`
	CallbackID   int64     `json:"callback_id,omitempty"`
	Provider     string    `json:"provider"`
	ReceivedAt   time.Time `json:"received_at"`
	Outcome      string    `json:"outcome"`
	ResponseCode int       `json:"response_code"`
	DurationMS   int       `json:"duration_ms"`
	RemoteAddr   string    `json:"remote_addr"`
	RequestID    string    `json:"request_id"`
	Note         string    `json:"note,omitempty"` // why an unconfirmed delivery changed nothing
}

// TransitionRow is one change of an order's status.
type TransitionRow struct {
	OrderID    string    `json:"order_id"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	Cause      string    `json:"cause"`
	CallbackID int64     `json:"callback_id,omitempty"`
	At         time.Time `json:"at"`
}

// MovementRow is one stock movement.
type MovementRow struct {
	ID      int64     `json:"id"`
	SKU     string    `json:"sku"`
	OrderID string    `json:"order_id,omitempty"`
	Kind    string    `json:"kind"`
	Qty     int64     `json:"qty"` // signed: + adds to stock, - takes from it
	At      time.Time `json:"at"`
}

// PaymentRow is one charge.
type PaymentRow struct {
	Provider  string    `json:"provider"`
	Reference string    `json:"provider_reference"`
	OrderID   string    `json:"order_id"`
	Amount    int64     `json:"amount"`
	Refunded  int64     `json:"refunded_amount"`   // what its refunds add up to
	Dispute   string    `json:"dispute,omitempty"` // a chargeback: open, won, lost
	Currency  string    `json:"currency"`
	Status    string    `json:"status"`
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
	Stuck       bool       `json:"stuck"`
	Attempts    int        `json:"attempts"`
	Fence       int64      `json:"fence"`
	Worker      string     `json:"worker_id"`
	LockedUntil *time.Time `json:"locked_until"`
	Started     time.Time  `json:"started_at"`
	Finished    *time.Time `json:"finished_at"`
	LastError   string     `json:"last_error"`
	QueueState  string     `json:"queue_state,omitempty"` // the queue's view, where asked
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
}

// DeliveryFilter is the deliveries list's filter as the form holds it.
type DeliveryFilter struct {
	Provider string `json:"provider,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Callback string `json:"callback,omitempty"`
	Addr     string `json:"addr,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
}

// Deliveries is the raw delivery log.
type Deliveries struct {
	Now       time.Time      `json:"-"`
	Filter    DeliveryFilter `json:"filter"`
	Providers []string       `json:"-"`
	Rows      []DeliveryRow  `json:"rows"`
	Next      string         `json:"next"`
	Self      string         `json:"-"`
}

// OrderFilter is the orders list's filter as the form holds it.
type OrderFilter struct {
	Status string `json:"status,omitempty"`
	Email  string `json:"email,omitempty"`
	ID     string `json:"id,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
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

// Orders is the orders list.
type Orders struct {
	Now    time.Time   `json:"-"`
	Filter OrderFilter `json:"filter"`
	Rows   []OrderRow  `json:"rows"`
	Next   string      `json:"next"`
	Self   string      `json:"-"`
}

// ItemRow is one line of an order.
type ItemRow struct {
	SKU       string `json:"sku"`
	Name      string `json:"name,omitempty"` // the product's name, for the customer's page
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
}

// Event is one line of an order's timeline.
type Event struct {
	At     time.Time `json:"at"`
	What   string    `json:"what"`
	Detail string    `json:"detail"`
	Tone   string    `json:"tone"`
	URL    string    `json:"url,omitempty"`
}

// OrderDetail is an order's whole story.
type OrderDetail struct {
	Now         time.Time       `json:"-"`
	Order       OrderRow        `json:"order"`
	Items       []ItemRow       `json:"items"`
	Payments    []PaymentRow    `json:"payments"`
	Invoice     *InvoiceRow     `json:"invoice"`
	Callbacks   []CallbackRow   `json:"callbacks"`
	Transitions []TransitionRow `json:"transitions"`
	Movements   []MovementRow   `json:"movements"`
	Outbox      []OutboxRow     `json:"outbox"`
	Jobs        []JobRow        `json:"jobs"`
	Emails      []EmailRow      `json:"emails"`
	Timeline    []Event         `json:"timeline"`
	CanCancel   bool            `json:"can_cancel"`
}

// JobFilter is the jobs list's filter as the form holds it.
type JobFilter struct {
	Status string `json:"status,omitempty"`
	Type   string `json:"type,omitempty"`
	Key    string `json:"key,omitempty"`
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

// Jobs is the jobs page: job executions and the queue's archived tasks.
type Jobs struct {
	Now      time.Time `json:"-"`
	Filter   JobFilter `json:"filter"`
	Rows     []JobRow  `json:"rows"`
	Next     string    `json:"next"`
	Archived []TaskRow `json:"archived"`
	// ArchivedError says why the queue could not be asked, if it could not.
	ArchivedError string `json:"archived_error,omitempty"`
	Self          string `json:"-"`
	Query         string `json:"-"` // the filter as a query string, for the bulk re-run link
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
	Filter JobFilter `json:"filter"`
	Keys   []string  `json:"keys"`
}

// OutboxFilter is the outbox list's filter as the form holds it.
type OutboxFilter struct {
	Status string `json:"status,omitempty"`
	Type   string `json:"type,omitempty"`
	TaskID string `json:"task_id,omitempty"`
}

// Outbox is the outbox list.
type Outbox struct {
	Now    time.Time    `json:"-"`
	Filter OutboxFilter `json:"filter"`
	Rows   []OutboxRow  `json:"rows"`
	Next   string       `json:"next"`
	Self   string       `json:"-"`
}

// ProductRow is one product.
type ProductRow struct {
	SKU         string `json:"sku"`
	Name        string `json:"name"`
	Price       int64  `json:"price"`
	Currency    string `json:"currency"`
	Stock       int64  `json:"stock"`
	MaxPerOrder *int64 `json:"max_per_order"` // units one order may hold; nil: no cap of its own
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
	Rows []ProductRow `json:"rows"`
	Form ProductForm  `json:"-"`
}

// RestockForm is a product's restock form.
type RestockForm struct {
	Key   string
	Qty   string
	Error string
}

// ProductDetail is one product and its stock ledger.
type ProductDetail struct {
	Product ProductRow    `json:"product"`
	Ledger  []MovementRow `json:"ledger"`
	Next    string        `json:"next"`
	Restock RestockForm   `json:"-"`
	Limit   LimitForm     `json:"-"`
}

// LimitForm is the form of a product's cap on units per order: what was
// typed (empty: no cap) and what was wrong with it.
type LimitForm struct {
	Value string
	Error string
}

// AuditViolation is one broken invariant, linked to the row at fault.
type AuditViolation struct {
	Detail string `json:"detail"`
	URL    string `json:"url,omitempty"`
}

// AuditCheck is one invariant and its verdict.
type AuditCheck struct {
	ID          int              `json:"id"`
	Name        string           `json:"name"`
	Description string           `json:"description"`
	OK          bool             `json:"ok"`
	Violations  []AuditViolation `json:"violations"`
}

// Audit is the audit page: the form and, once run, the verdict.
type Audit struct {
	Ran          bool         `json:"ran"`
	OK           bool         `json:"ok"`
	DrainTimeout string       `json:"drain_timeout"`
	Drained      bool         `json:"drained"`
	DrainFailure string       `json:"drain_failure,omitempty"`
	Settling     int          `json:"settling"`
	Took         string       `json:"took"`
	Checks       []AuditCheck `json:"checks"`
}

// ActionFilter is the action log's filter as the form holds it.
type ActionFilter struct {
	Admin  string `json:"admin,omitempty"`
	Action string `json:"action,omitempty"`
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
	// for, since Since (the start of its window); 1 for any other row.
	Count int        `json:"count"`
	Since *time.Time `json:"since,omitempty"`
}

// Actions is the admin action log.
type Actions struct {
	Now    time.Time    `json:"-"`
	Filter ActionFilter `json:"filter"`
	Rows   []ActionRow  `json:"rows"`
	Next   string       `json:"next"`
	Self   string       `json:"-"`
}
