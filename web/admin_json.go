package web

import (
	"time"

	"github.com/sekali/sekali/app/story"
	"github.com/sekali/sekali/models"
)

// The admin JSON: what the console's reads answer on /api/admin/... (and
// on /admin/... to a client that asks for application/json). These are
// its own types, not the view structs, so that what a page shows can
// change without changing the API. Plain typed fields: counts and amounts
// are numbers (amounts in minor units, beside their currency), times are
// RFC 3339 in UTC, statuses and outcomes are their codes, and what is
// absent is null. Nothing is formatted for people. docs/api.md documents
// every shape.

// listJSON is one page of a console list: its rows, newest first, and the
// URL of the next page — the same filters, on the URL that was asked —
// or null on the last page.
type listJSON[R any] struct {
	Rows []R     `json:"rows"`
	Next *string `json:"next"`
}

// dashboardJSON is GET /api/admin.
type dashboardJSON struct {
	Now               time.Time            `json:"now"`
	Deliveries        []deliveryWindowJSON `json:"deliveries"`
	ConflictsDay      int64                `json:"conflicts_last_24h"`
	Conflicts         []callbackRowJSON    `json:"conflicts"`
	OrdersHour        map[string]int64     `json:"orders_last_hour"` // by status, every status present
	OrdersDay         map[string]int64     `json:"orders_last_24h"`
	JobsProcessing    int64                `json:"jobs_processing"`
	JobsFailed        int64                `json:"jobs_failed"`
	JobsStuck         int64                `json:"jobs_stuck"`
	JobsSucceededHour int64                `json:"jobs_succeeded_last_hour"`
	JobsSucceededDay  int64                `json:"jobs_succeeded_last_24h"`
	ArchivedTasks     *int                 `json:"archived_tasks"` // null: the queue did not answer
	OutboxPending     int64                `json:"outbox_pending"`
	OutboxOldestAge   time.Duration        `json:"outbox_oldest_age_ns"`
	LastAudit         *auditVerdictJSON    `json:"last_audit"` // null: the audit never ran
}

// deliveryWindowJSON is the deliveries of one window by result.
type deliveryWindowJSON struct {
	Window     string    `json:"window"` // last_hour or last_24h
	Since      time.Time `json:"since"`
	Total      int64     `json:"total"`
	Duplicates int64     `json:"duplicates"`
	// DuplicateShare is duplicates/total, from 0 to 1; null when total is 0.
	DuplicateShare *float64 `json:"duplicate_share"`
	// ByResult counts by outcome, every refusal as "refused"; every
	// result present.
	ByResult map[string]int64 `json:"by_result"`
}

type auditVerdictJSON struct {
	OK         bool      `json:"ok"`
	Violations int       `json:"violations"`
	Summary    string    `json:"summary"`
	At         time.Time `json:"at"`
}

// callbackDetailJSON is GET /api/admin/callbacks/{id}.
type callbackDetailJSON struct {
	Callback    callbackRowJSON  `json:"callback"`
	Deliveries  []deliveryJSON   `json:"deliveries"`
	Transitions []transitionJSON `json:"transitions"`
	Movements   []movementJSON   `json:"movements"`
	Payment     *paymentRowJSON  `json:"payment"`
	Outbox      []outboxJSON     `json:"outbox"`
	Jobs        []jobJSON        `json:"jobs"`
}

func newCallbackDetailJSON(st *story.Callback, now time.Time, taskTypes []string) callbackDetailJSON {
	v := callbackDetailJSON{
		Callback: newCallbackRowJSON(st.Callback), Deliveries: rows(st.Deliveries, newDeliveryJSON),
		Transitions: rows(st.Transitions, newTransitionJSON), Movements: rows(st.Movements, newMovementJSON),
		Outbox: rows(st.Outbox, newOutboxJSON),
		Jobs:   rows(st.Jobs, func(j models.JobExecution) jobJSON { return newJobJSON(j, now, "", taskTypes) }),
	}
	if st.Payment != nil {
		p := newPaymentRowJSON(*st.Payment)
		v.Payment = &p
	}
	return v
}

// orderDetailJSON is GET /api/admin/orders/{id}.
type orderDetailJSON struct {
	Order       orderRowJSON      `json:"order"`
	Items       []itemJSON        `json:"items"`
	Payments    []paymentRowJSON  `json:"payments"`
	Invoice     *invoiceJSON      `json:"invoice"`
	Callbacks   []callbackRowJSON `json:"callbacks"`
	Transitions []transitionJSON  `json:"transitions"`
	Movements   []movementJSON    `json:"movements"`
	Outbox      []outboxJSON      `json:"outbox"`
	Jobs        []jobJSON         `json:"jobs"`
	Emails      []emailJSON       `json:"emails"`
	Gateway     []gatewayJSON     `json:"gateway_requests"`
	// Refunds are the refunds asked of the order's gateway (from the
	// console or the admin API), with their phase and amounts.
	Refunds []refundJSON `json:"refunds"`
	// GatewayRefunds are the refunds of its charges at their gateways,
	// whoever asked for them, in the gateway's states.
	GatewayRefunds []gatewayRefundJSON `json:"gateway_refunds"`
	RefundLeft     int64               `json:"refund_left"` // minor units that can still be refunded
	Timeline       []eventJSON         `json:"timeline"`
	CanCancel      bool                `json:"can_cancel"` // the order is pending
}

// gatewayRefundJSON is one refund at a gateway: by the gateway's id of it
// (or, for a charge total not yet named refund by refund,
// {reference}:refunded:{total}), its state there and, for one that
// failed, the gateway's reason.
type gatewayRefundJSON struct {
	Provider      string    `json:"provider"`
	RefundKey     string    `json:"refund_key"`
	Amount        int64     `json:"amount"` // minor units
	Currency      string    `json:"currency"`
	Status        string    `json:"status"` // pending, succeeded, failed, canceled, superseded
	FailureReason string    `json:"failure_reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func newGatewayRefundJSON(r models.Refund) gatewayRefundJSON {
	return gatewayRefundJSON{Provider: r.Provider, RefundKey: r.RefundKey, Amount: r.Amount, Currency: r.Currency, Status: string(r.Status),
		FailureReason: r.FailureReason, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// newOrderDetailJSON is an order's story; queueStates are the queue's
// states of its jobs, by key, where they were asked; taskTypes the
// business task types.
func newOrderDetailJSON(st *story.Order, now time.Time, queueStates map[string]string, taskTypes []string) orderDetailJSON {
	o := st.Order
	v := orderDetailJSON{
		Order: newOrderRowJSON(o), Items: rows(o.Items, newItemJSON), Payments: rows(o.Payments, newPaymentRowJSON),
		Callbacks: rows(st.Callbacks, newCallbackRowJSON), Transitions: rows(st.Transitions, newTransitionJSON),
		Movements: rows(st.Movements, newMovementJSON), Outbox: rows(st.Outbox, newOutboxJSON),
		Jobs: rows(st.Jobs, func(j models.JobExecution) jobJSON {
			return newJobJSON(j, now, queueStates[j.IdempotencyKey], taskTypes)
		}),
		Emails: rows(st.Emails, newEmailJSON), Gateway: rows(st.GatewayRequests, newGatewayJSON), Timeline: rows(st.Timeline, newEventJSON),
		Refunds:        rows(refundsOf(st.GatewayRequests), func(r models.GatewayRequest) refundJSON { return newRefundJSON(&r) }),
		GatewayRefunds: rows(st.Refunds, newGatewayRefundJSON),
		CanCancel:      o.Status == models.OrderPending,
	}
	if inv := o.Invoice; inv != nil {
		v.Invoice = &invoiceJSON{Number: inv.Number, Amount: inv.Amount, Currency: inv.Currency, IssuedAt: inv.IssuedAt.UTC()}
	}
	return v
}

// jobsJSON is GET /api/admin/jobs: a page of job executions, and the
// queue's archived tasks that match the filter.
type jobsJSON struct {
	listJSON[jobJSON]
	Archived []taskJSON `json:"archived"`
	// ArchivedError says why the queue could not be asked; null when it
	// answered.
	ArchivedError *string `json:"archived_error"`
}

// taskJSON is a task as the queue holds it.
type taskJSON struct {
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

// productDetailJSON is GET /api/admin/products/{sku}: the product and a
// page of its stock ledger.
type productDetailJSON struct {
	Product productJSON    `json:"product"`
	Ledger  []movementJSON `json:"ledger"`
	Next    *string        `json:"next"`
}

// The rows.

type callbackRowJSON struct {
	ID             int64      `json:"id"`
	Provider       string     `json:"provider"`
	IdempotencyKey string     `json:"idempotency_key"`
	OrderID        string     `json:"order_id"`
	Event          string     `json:"event"`
	TransactionID  string     `json:"transaction_id"`
	Amount         int64      `json:"amount"`
	Currency       string     `json:"currency"`
	Status         string     `json:"status"`
	Result         string     `json:"result"`
	ResponseCode   int        `json:"response_code"`
	Attempts       int        `json:"attempts"` // deliveries
	ConflictCount  int        `json:"conflict_count"`
	FirstReceived  time.Time  `json:"first_received_at"`
	LastReceived   time.Time  `json:"last_received_at"`
	Processed      *time.Time `json:"processed_at"`
	PayloadHash    string     `json:"payload_hash"`
}

func newCallbackRowJSON(c models.PaymentCallback) callbackRowJSON {
	return callbackRowJSON{
		ID: c.ID, Provider: c.Provider, IdempotencyKey: c.IdempotencyKey, OrderID: c.OrderID, Event: string(c.EventStatus),
		TransactionID: c.TransactionID, Amount: c.Amount, Currency: c.Currency, Status: string(c.Status), Result: c.Result,
		ResponseCode: c.ResponseCode, Attempts: c.Attempts, ConflictCount: c.ConflictCount,
		FirstReceived: c.FirstReceivedAt.UTC(), LastReceived: c.LastReceivedAt.UTC(), Processed: utc(c.ProcessedAt),
		PayloadHash: c.PayloadHash,
	}
}

type deliveryJSON struct {
	ID           int64     `json:"id"`
	CallbackID   *int64    `json:"callback_id"` // null: refused before its key was known
	Provider     string    `json:"provider"`
	ReceivedAt   time.Time `json:"received_at"`
	Outcome      string    `json:"outcome"`
	ResponseCode int       `json:"response_code"`
	DurationMS   int       `json:"duration_ms"`
	RemoteAddr   string    `json:"remote_addr"`
	RequestID    string    `json:"request_id"`
	Note         string    `json:"note"` // why an unconfirmed delivery changed nothing
}

func newDeliveryJSON(d models.CallbackDelivery) deliveryJSON {
	return deliveryJSON{
		ID: d.ID, CallbackID: d.CallbackID, Provider: d.Provider, ReceivedAt: d.ReceivedAt.UTC(), Outcome: d.Outcome,
		ResponseCode: d.ResponseCode, DurationMS: d.DurationMS, RemoteAddr: d.RemoteAddr, RequestID: d.RequestID, Note: d.Note,
	}
}

type transitionJSON struct {
	OrderID    string    `json:"order_id"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	Cause      string    `json:"cause"`
	CallbackID *int64    `json:"callback_id"` // null: not caused by a callback
	At         time.Time `json:"at"`
}

func newTransitionJSON(t models.OrderTransition) transitionJSON {
	return transitionJSON{
		OrderID: t.OrderID, From: string(t.FromStatus), To: string(t.ToStatus), Cause: t.Cause,
		CallbackID: t.CallbackID, At: t.CreatedAt.UTC(),
	}
}

type movementJSON struct {
	ID      int64     `json:"id"`
	SKU     string    `json:"sku"`
	OrderID *string   `json:"order_id"` // null for an adjust
	Kind    string    `json:"kind"`
	Qty     int64     `json:"qty"` // signed: + adds to stock, - takes from it
	At      time.Time `json:"at"`
}

func newMovementJSON(m models.StockMovement) movementJSON {
	return movementJSON{ID: m.ID, SKU: m.SKU, OrderID: m.OrderID, Kind: string(m.Kind), Qty: m.Kind.Sign() * m.Qty, At: m.CreatedAt.UTC()}
}

// paymentRowJSON is a charge as the console shows it: the order API's
// paymentJSON and what became of its money.
type paymentRowJSON struct {
	Provider          string    `json:"provider"`
	ProviderReference string    `json:"provider_reference"`
	OrderID           string    `json:"order_id"`
	Amount            int64     `json:"amount"`
	RefundedAmount    int64     `json:"refunded_amount"` // what its refunds add up to
	Currency          string    `json:"currency"`
	Status            string    `json:"status"`
	Dispute           *string   `json:"dispute"` // a chargeback: open, won, lost; null: none
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

func newPaymentRowJSON(p models.Payment) paymentRowJSON {
	return paymentRowJSON{
		Provider: p.Provider, ProviderReference: p.ProviderReference, OrderID: p.OrderID, Amount: p.Amount,
		RefundedAmount: p.RefundedAmount, Currency: p.Currency, Status: string(p.Status), Dispute: optional(string(p.Dispute)),
		CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(),
	}
}

type outboxJSON struct {
	ID           int64      `json:"id"`
	TaskID       string     `json:"task_id"`
	TaskType     string     `json:"task_type"`
	Queue        string     `json:"queue"`
	Status       string     `json:"status"`
	ProcessAt    time.Time  `json:"process_at"`
	Attempts     int        `json:"attempts"`
	LastError    string     `json:"last_error"`
	CreatedAt    time.Time  `json:"created_at"`
	DispatchedAt *time.Time `json:"dispatched_at"`
}

func newOutboxJSON(m models.OutboxMessage) outboxJSON {
	return outboxJSON{
		ID: m.ID, TaskID: m.TaskID, TaskType: m.TaskType, Queue: m.Queue, Status: string(m.Status), ProcessAt: m.ProcessAt.UTC(),
		Attempts: m.Attempts, LastError: m.LastError, CreatedAt: m.CreatedAt.UTC(), DispatchedAt: utc(m.DispatchedAt),
	}
}

type jobJSON struct {
	IdempotencyKey string     `json:"idempotency_key"`
	Type           string     `json:"type"`
	BusinessKey    string     `json:"business_key"`
	Queue          string     `json:"queue"`
	Status         string     `json:"status"`
	Stuck          bool       `json:"stuck"` // processing past its lease
	Attempts       int        `json:"attempts"`
	Fence          int64      `json:"fence"`
	WorkerID       string     `json:"worker_id"`
	LockedUntil    *time.Time `json:"locked_until"`
	StartedAt      time.Time  `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	LastError      string     `json:"last_error"`
	// QueueState is the queue's state of the task (an order's jobs that
	// have not succeeded); null where it was not asked.
	QueueState *string `json:"queue_state"`
}

func newJobJSON(j models.JobExecution, now time.Time, queueState string, taskTypes []string) jobJSON {
	return jobJSON{
		IdempotencyKey: j.IdempotencyKey, Type: taskType(j.IdempotencyKey, taskTypes), BusinessKey: j.BusinessKey, Queue: j.QueueName,
		Status: string(j.Status), Stuck: isStuck(j, now), Attempts: j.Attempts, Fence: j.Fence, WorkerID: j.WorkerID,
		LockedUntil: utc(j.LockedUntil), StartedAt: j.StartedAt.UTC(), FinishedAt: utc(j.FinishedAt), LastError: j.LastError,
		QueueState: optional(queueState),
	}
}

// orderRowJSON is an order as the console lists it.
type orderRowJSON struct {
	ID            string     `json:"id"`
	CustomerEmail string     `json:"customer_email"`
	Status        string     `json:"status"`
	TotalAmount   int64      `json:"total_amount"`
	Currency      string     `json:"currency"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	PaidAt        *time.Time `json:"paid_at"`
}

func newOrderRowJSON(o models.Order) orderRowJSON {
	return orderRowJSON{
		ID: o.ID, CustomerEmail: o.CustomerEmail, Status: string(o.Status), TotalAmount: o.TotalAmount, Currency: o.Currency,
		CreatedAt: o.CreatedAt.UTC(), ExpiresAt: o.ExpiresAt.UTC(), PaidAt: utc(o.PaidAt),
	}
}

func newItemJSON(i models.OrderItem) itemJSON {
	return itemJSON{SKU: i.SKU, Name: i.Name, Qty: i.Qty, UnitPrice: i.UnitPrice}
}

// gatewayJSON is one call Sekali made to a gateway for an order.
type gatewayJSON struct {
	ID               int64      `json:"id"`
	OrderID          string     `json:"order_id"`
	Kind             string     `json:"kind"`
	Provider         string     `json:"provider"`
	IdempotencyKey   string     `json:"idempotency_key"`
	Amount           int64      `json:"amount"`
	Currency         string     `json:"currency"`
	Phase            string     `json:"phase"`
	Attempts         int        `json:"attempts"`
	ProviderObjectID string     `json:"provider_object_id"`
	RedirectURL      string     `json:"redirect_url"`
	LastError        string     `json:"last_error"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
	DoneAt           *time.Time `json:"done_at"`
}

func newGatewayJSON(r models.GatewayRequest) gatewayJSON {
	return gatewayJSON{ID: r.ID, OrderID: r.OrderID, Kind: string(r.Kind), Provider: r.Provider, IdempotencyKey: r.IdempotencyKey, Amount: r.Amount,
		Currency: r.Currency, Phase: string(r.Phase), Attempts: r.Attempts, ProviderObjectID: r.ProviderObjectID,
		RedirectURL: r.RedirectURL, LastError: r.LastError, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), DoneAt: utc(r.DoneAt)}
}

type emailJSON struct {
	Key       string     `json:"key"`
	MessageID string     `json:"message_id"`
	To        string     `json:"to"`
	Subject   string     `json:"subject"`
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	LastError string     `json:"last_error"`
	SentAt    *time.Time `json:"sent_at"`
}

func newEmailJSON(e models.OutboundEmail) emailJSON {
	return emailJSON{
		Key: e.Key, MessageID: e.MessageID, To: e.To, Subject: e.Subject, Status: string(e.Status),
		Attempts: e.Attempts, LastError: e.LastError, SentAt: utc(e.SentAt),
	}
}

// eventJSON is one line of an order's timeline.
type eventJSON struct {
	At     time.Time `json:"at"`
	What   string    `json:"what"`
	Detail string    `json:"detail"`
	// Ref names the row the line is about: callback:ID, job:KEY,
	// outbox:TASK_ID, product:SKU; null: none.
	Ref *string `json:"ref"`
}

func newEventJSON(e story.Event) eventJSON {
	return eventJSON{At: e.At.UTC(), What: e.What, Detail: e.Detail, Ref: optional(e.Ref)}
}

type actionJSON struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Admin      string    `json:"admin"`
	Action     string    `json:"action"`
	Target     string    `json:"target"`
	Result     string    `json:"result"`
	Detail     string    `json:"detail"`
	RemoteAddr string    `json:"remote_addr"`
	// Count is how many refused log-ins of one address the row stands
	// for, since Since (the start of its window; null for any other row).
	Count int        `json:"count"`
	Since *time.Time `json:"since"`
}

func newActionJSON(a models.AdminAction) actionJSON {
	return actionJSON{
		ID: a.ID, At: a.CreatedAt.UTC(), Admin: a.AdminEmail, Action: a.Action, Target: a.Target, Result: a.Result,
		Detail: a.Detail, RemoteAddr: a.RemoteAddr, Count: a.Count, Since: utc(a.WindowStart),
	}
}

// optional is s, or nil (null) when s is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
