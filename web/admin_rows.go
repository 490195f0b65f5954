package web

import (
	"cmp"
	"strings"
	"time"

	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/story"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// From models to the console's view rows: the views never see a model.
// A row is both what its page draws and its admin JSON (web/views), so
// times are put in UTC here, once.

func callbackRow(c models.PaymentCallback) views.CallbackRow {
	return views.CallbackRow{
		ID: c.ID, Provider: c.Provider, Key: c.IdempotencyKey, OrderID: c.OrderID, Event: string(c.EventStatus),
		TransactionID: c.TransactionID, Amount: c.Amount, Currency: c.Currency, Status: string(c.Status),
		Result: c.Result, ResponseCode: c.ResponseCode, Attempts: c.Attempts, Conflicts: c.ConflictCount,
		FirstReceived: c.FirstReceivedAt.UTC(), LastReceived: c.LastReceivedAt.UTC(), Processed: utc(c.ProcessedAt), Fingerprint: c.PayloadHash,
	}
}

func deliveryRow(d models.CallbackDelivery) views.DeliveryRow {
	return views.DeliveryRow{
		ID: d.ID, CallbackID: nullID(d.CallbackID), Provider: d.Provider, ReceivedAt: d.ReceivedAt.UTC(), Outcome: d.Outcome,
		ResponseCode: d.ResponseCode, DurationMS: d.DurationMS, RemoteAddr: d.RemoteAddr, RequestID: d.RequestID, TraceID: d.TraceID, Note: d.Note,
		Reason: deliveryReason(d, nil),
	}
}

// deliveryRowOf is d's row with what its callback cb (nil: none, or not
// read) adds: its order, and the reason it recorded.
func deliveryRowOf(d models.CallbackDelivery, cb *models.PaymentCallback) views.DeliveryRow {
	r := deliveryRow(d)
	r.Reason = deliveryReason(d, cb)
	if cb != nil {
		r.OrderID = views.NullText(cb.OrderID)
	}
	return r
}

// outcomeWhy says why a delivery had its outcome, where its row kept no
// note of its own. A processed delivery needs none.
var outcomeWhy = map[string]string{
	models.OutcomeDuplicate:            "the event was applied before: nothing changed",
	models.OutcomeStale:                "the order had already moved past what the event tells",
	models.OutcomeConflict:             "its key came before with another payload",
	models.OutcomeIgnored:              "an event the shop has no use for",
	models.OutcomeRejected:             "refused for a business reason (the dry run says which, now)",
	models.OutcomeInvalidSignature:     "its signature did not verify",
	models.OutcomeInvalidPayload:       "its body could not be read as the gateway's JSON",
	models.OutcomeMissingField:         "a field the pipeline needs is missing",
	models.OutcomeTooLarge:             "its body is larger than the callback endpoint takes",
	models.OutcomeUnsupportedMediaType: "it was not sent as application/json",
	models.OutcomeError:                "Sekali could not record it; the gateway sends it again",
}

// deliveryReason is why delivery d had its outcome, in words: the note
// the pipeline wrote on its row (a rejection's detail, with both values),
// else the rejection its callback cb recorded while that stands, else
// what its outcome means.
func deliveryReason(d models.CallbackDelivery, cb *models.PaymentCallback) string {
	if d.Note != "" {
		return strings.TrimPrefix(d.Note, d.Outcome+": ")
	}
	if d.Outcome == models.OutcomeRejected && cb != nil && cb.Status == models.CallbackRejected {
		if words := payments.ReasonWords(cb.Result); words != "" {
			return words
		}
	}
	return outcomeWhy[d.Outcome]
}

func transitionRow(t models.OrderTransition) views.TransitionRow {
	return views.TransitionRow{OrderID: t.OrderID, From: string(t.FromStatus), To: string(t.ToStatus), Cause: t.Cause,
		CallbackID: nullID(t.CallbackID), At: t.CreatedAt.UTC()}
}

func movementRow(m models.StockMovement) views.MovementRow {
	r := views.MovementRow{ID: m.ID, SKU: m.SKU, Kind: string(m.Kind), Qty: m.Kind.Sign() * m.Qty, At: m.CreatedAt.UTC()}
	if m.OrderID != nil {
		r.OrderID = views.NullText(*m.OrderID)
	}
	return r
}

func paymentRow(p models.Payment) views.PaymentRow {
	return views.PaymentRow{
		Provider: p.Provider, Reference: p.ProviderReference, OrderID: p.OrderID, Amount: p.Amount,
		Refunded: p.RefundedAmount, Dispute: views.NullText(p.Dispute), Currency: p.Currency, Status: string(p.Status),
		Created: p.CreatedAt.UTC(), Updated: p.UpdatedAt.UTC(),
	}
}

func outboxRow(m models.OutboxMessage) views.OutboxRow {
	return views.OutboxRow{
		ID: m.ID, TaskID: m.TaskID, Type: m.TaskType, Queue: m.Queue, Status: string(m.Status), ProcessAt: m.ProcessAt.UTC(),
		Attempts: m.Attempts, LastError: m.LastError, Created: m.CreatedAt.UTC(), Dispatched: utc(m.DispatchedAt),
	}
}

// jobRow is a job execution; queueState the queue's state of its task,
// where it was asked.
func jobRow(j models.JobExecution, now time.Time, taskTypes []string, queueState string) views.JobRow {
	return views.JobRow{
		Key: j.IdempotencyKey, Type: taskType(j.IdempotencyKey, taskTypes), BusinessKey: j.BusinessKey, Queue: j.QueueName,
		Status: string(j.Status), Stuck: isStuck(j, now),
		Attempts: j.Attempts, Fence: j.Fence, Worker: j.WorkerID, LockedUntil: utc(j.LockedUntil), Started: j.StartedAt.UTC(),
		Finished: utc(j.FinishedAt), LastError: j.LastError, QueueState: views.NullText(queueState),
	}
}

// isStuck reports whether a job is processing past its lease.
func isStuck(j models.JobExecution, now time.Time) bool {
	return j.Status == models.JobProcessing && j.LockedUntil != nil && j.LockedUntil.Before(now)
}

// taskType is the type part of a business task's key, one of types:
// "invoice:generate:ORD-…" → "invoice:generate".
func taskType(key string, types []string) string {
	for _, t := range types {
		if strings.HasPrefix(key, t+":") {
			return t
		}
	}
	return ""
}

func taskRow(t jobview.QueuedTask) views.TaskRow {
	return views.TaskRow{
		ID: t.ID, Queue: t.Queue, Type: t.Type, State: t.State, Payload: t.Payload, Retried: t.Retried,
		MaxRetry: t.MaxRetry, LastError: t.LastError, LastFailedAt: t.LastFailedAt.UTC(),
	}
}

func orderRow(o models.Order) views.OrderRow {
	return views.OrderRow{
		ID: o.ID, Email: o.CustomerEmail, Status: string(o.Status), Total: o.TotalAmount, Currency: o.Currency,
		Created: o.CreatedAt.UTC(), Expires: o.ExpiresAt.UTC(), Paid: utc(o.PaidAt),
	}
}

func itemRow(i models.OrderItem) views.ItemRow {
	return views.ItemRow{SKU: i.SKU, Name: i.Name, Qty: i.Qty, UnitPrice: i.UnitPrice}
}

func invoiceRow(inv *models.Invoice) *views.InvoiceRow {
	if inv == nil {
		return nil
	}
	return &views.InvoiceRow{Number: inv.Number, Amount: inv.Amount, Currency: inv.Currency, IssuedAt: inv.IssuedAt.UTC()}
}

func productRow(p models.Product) views.ProductRow {
	return views.ProductRow{SKU: p.SKU, Name: p.Name, Price: p.Price, Currency: p.Currency, Stock: p.Stock, MaxPerOrder: p.MaxPerOrder}
}

// productAnswer is the stored answer of a product created or restocked.
func productAnswer(p *models.Product) views.ProductRow { return productRow(*p) }

func gatewayRow(r models.GatewayRequest) views.GatewayRequestRow {
	row := views.GatewayRequestRow{ID: r.ID, OrderID: r.OrderID, Kind: string(r.Kind), Provider: r.Provider, Key: r.IdempotencyKey,
		Amount: r.Amount, Currency: r.Currency, Phase: string(r.Phase), Attempts: r.Attempts, Object: r.ProviderObjectID,
		RedirectURL: r.RedirectURL, LastError: r.LastError, Created: r.CreatedAt.UTC(), Updated: r.UpdatedAt.UTC(), Done: utc(r.DoneAt),
		AnsweredAmount: r.AnsweredAmount, AnsweredCurrency: r.AnsweredCurrency,
		UnknownSince: utc(r.UnknownSince), Asks: r.Asks, NextAsk: utc(r.NextAskAt),
		Retry: r.Kind == models.GatewayRefund && (r.Phase == models.GatewayPlanned || r.Phase == models.GatewaySent)}
	if r.Phase == models.GatewayConflict && r.AnsweredAmount != nil {
		row.Answer = views.AnswerConflict{Asked: models.Money(r.Amount, r.Currency),
			Answered: models.Money(*r.AnsweredAmount, cmp.Or(r.AnsweredCurrency, r.Currency))}
	}
	return row
}

func gatewayRefundRow(r models.Refund) views.GatewayRefundRow {
	return views.GatewayRefundRow{Provider: r.Provider, RefundKey: r.RefundKey, Amount: r.Amount, Currency: r.Currency, Status: string(r.Status),
		FailureReason: r.FailureReason, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

func emailRow(e models.OutboundEmail) views.EmailRow {
	return views.EmailRow{
		Key: e.Key, MessageID: e.MessageID, To: e.To, Subject: e.Subject, Status: string(e.Status),
		Attempts: e.Attempts, LastError: e.LastError, SentAt: utc(e.SentAt), Logged: e.Logged,
	}
}

func eventRow(e story.Event) views.Event {
	return views.Event{At: e.At.UTC(), What: e.What, Detail: e.Detail, Tone: e.Tone, Ref: views.NullText(e.Ref)}
}

func actionRow(a models.AdminAction) views.ActionRow {
	return views.ActionRow{
		ID: a.ID, At: a.CreatedAt.UTC(), Admin: a.AdminEmail, Action: a.Action, Target: a.Target, Result: a.Result,
		Detail: a.Detail, RemoteAddr: a.RemoteAddr, Count: a.Count, Since: utc(a.WindowStart),
	}
}

// rows maps a slice with f; never nil, so JSON shows [] rather than null.
func rows[T, V any](in []T, f func(T) V) []V {
	out := make([]V, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

// nullID is id, or 0 (null in the JSON) for none.
func nullID(id *int64) views.NullID {
	if id == nil {
		return 0
	}
	return views.NullID(*id)
}
