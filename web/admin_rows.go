package web

import (
	"strings"
	"time"

	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// From models to the console's view rows: the views never see a model.

func callbackRow(c models.PaymentCallback) views.CallbackRow {
	return views.CallbackRow{
		ID: c.ID, Provider: c.Provider, Key: c.IdempotencyKey, OrderID: c.OrderID, Event: string(c.EventStatus),
		TransactionID: c.TransactionID, Amount: c.Amount, Currency: c.Currency, Status: string(c.Status),
		Result: c.Result, ResponseCode: c.ResponseCode, Attempts: c.Attempts, Conflicts: c.ConflictCount,
		FirstReceived: c.FirstReceivedAt, LastReceived: c.LastReceivedAt, Processed: c.ProcessedAt, Fingerprint: c.PayloadHash,
	}
}

func deliveryRow(d models.CallbackDelivery) views.DeliveryRow {
	r := views.DeliveryRow{
		ID: d.ID, Provider: d.Provider, ReceivedAt: d.ReceivedAt, Outcome: d.Outcome, ResponseCode: d.ResponseCode,
		DurationMS: d.DurationMS, RemoteAddr: d.RemoteAddr, RequestID: d.RequestID, Note: d.Note,
	}
	if d.CallbackID != nil {
		r.CallbackID = *d.CallbackID
	}
	return r
}

func transitionRow(t models.OrderTransition) views.TransitionRow {
	r := views.TransitionRow{OrderID: t.OrderID, From: string(t.FromStatus), To: string(t.ToStatus), Cause: t.Cause, At: t.CreatedAt}
	if t.CallbackID != nil {
		r.CallbackID = *t.CallbackID
	}
	return r
}

func movementRow(m models.StockMovement) views.MovementRow {
	r := views.MovementRow{ID: m.ID, SKU: m.SKU, Kind: string(m.Kind), Qty: m.Kind.Sign() * m.Qty, At: m.CreatedAt}
	if m.OrderID != nil {
		r.OrderID = *m.OrderID
	}
	return r
}

func paymentRow(p models.Payment) views.PaymentRow {
	return views.PaymentRow{
		Provider: p.Provider, Reference: p.ProviderReference, OrderID: p.OrderID, Amount: p.Amount,
		Refunded: p.RefundedAmount, Dispute: string(p.Dispute), Currency: p.Currency, Status: string(p.Status), Created: p.CreatedAt, Updated: p.UpdatedAt,
	}
}

func outboxRow(m models.OutboxMessage) views.OutboxRow {
	return views.OutboxRow{
		ID: m.ID, TaskID: m.TaskID, Type: m.TaskType, Queue: m.Queue, Status: string(m.Status), ProcessAt: m.ProcessAt,
		Attempts: m.Attempts, LastError: m.LastError, Created: m.CreatedAt, Dispatched: m.DispatchedAt,
	}
}

func jobRow(j models.JobExecution, now time.Time, taskTypes []string) views.JobRow {
	return views.JobRow{
		Key: j.IdempotencyKey, Type: taskType(j.IdempotencyKey, taskTypes), BusinessKey: j.BusinessKey, Queue: j.QueueName,
		Status: string(j.Status), Stuck: isStuck(j, now),
		Attempts: j.Attempts, Fence: j.Fence, Worker: j.WorkerID, LockedUntil: j.LockedUntil, Started: j.StartedAt,
		Finished: j.FinishedAt, LastError: j.LastError,
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
		MaxRetry: t.MaxRetry, LastError: t.LastError, LastFailedAt: t.LastFailedAt,
	}
}

func orderRow(o models.Order) views.OrderRow {
	return views.OrderRow{
		ID: o.ID, Email: o.CustomerEmail, Status: string(o.Status), Total: o.TotalAmount, Currency: o.Currency,
		Created: o.CreatedAt, Expires: o.ExpiresAt, Paid: o.PaidAt,
	}
}

func productRow(p models.Product) views.ProductRow {
	return views.ProductRow{SKU: p.SKU, Name: p.Name, Price: p.Price, Currency: p.Currency, Stock: p.Stock, MaxPerOrder: p.MaxPerOrder}
}

func gatewayRow(r models.GatewayRequest) views.GatewayRequestRow {
	phase := string(r.Phase)
	if r.Phase == models.GatewaySent {
		phase = views.PhaseSentUnknown
	}
	return views.GatewayRequestRow{ID: r.ID, OrderID: r.OrderID, Kind: string(r.Kind), Provider: r.Provider, Key: r.IdempotencyKey, Phase: phase,
		Attempts: r.Attempts, Object: r.ProviderObjectID, LastError: r.LastError, Updated: r.UpdatedAt,
		Retry: r.Kind == models.GatewayRefund && (r.Phase == models.GatewayPlanned || r.Phase == models.GatewaySent)}
}

func emailRow(e models.OutboundEmail) views.EmailRow {
	return views.EmailRow{
		Key: e.Key, MessageID: e.MessageID, To: e.To, Subject: e.Subject, Status: string(e.Status),
		Attempts: e.Attempts, LastError: e.LastError, SentAt: e.SentAt,
	}
}

func actionRow(a models.AdminAction) views.ActionRow {
	return views.ActionRow{
		ID: a.ID, At: a.CreatedAt, Admin: a.AdminEmail, Action: a.Action, Target: a.Target, Result: a.Result,
		Detail: a.Detail, RemoteAddr: a.RemoteAddr, Count: a.Count, Since: a.WindowStart,
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
