package web

import (
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// callbackResults are the values of the callbacks list's result filter.
var callbackResults = []string{
	models.ResultProcessed, models.ResultStale, payments.FilterRejected, payments.FilterConflict,
	models.ReasonUnknownOrder, models.ReasonAmountMismatch, models.ReasonCurrencyMismatch, models.ReasonReferenceMismatch,
}

// deliveryOutcomes are the values of the deliveries list's outcome filter.
var deliveryOutcomes = append([]string{
	models.OutcomeProcessed, models.OutcomeStale, models.OutcomeDuplicate, models.OutcomeConflict,
	models.OutcomeRejected, models.OutcomeIgnored, models.OutcomeUnconfirmed, models.OutcomeError, payments.FilterRefused,
}, payments.RefusedOutcomes...)

// adminCallbacks is GET /admin/callbacks: one row per provider event,
// newest first, filtered by provider, result, order, key prefix, a search
// (transaction id, reference or email), a kept body's path = value and
// time window.
func (s *Server) adminCallbacks(c echo.Context) error {
	p := newParams(c.QueryParams())
	f := payments.CallbackFilter{
		Provider: p.text("provider"), Result: p.oneOf("result", callbackResults...), OrderID: p.text("order"),
		KeyPrefix: p.text("key"), Transaction: p.text("transaction"), Email: p.text("email"), Search: p.text("q"),
		Body: p.bodyField("body"), From: p.time("from"), To: p.time("to"), Before: p.id("before"), Limit: p.limit(),
	}
	if err := p.check(c); err != nil {
		return err
	}
	cbs, next, err := s.deps.Payments.ListCallbacks(c.Request().Context(), f)
	if err != nil {
		return err
	}
	own, err := s.deps.Stories.OwnRefunds(c.Request().Context(), cbs)
	if err != nil {
		return err
	}
	second, err := s.deps.Stories.SecondCharges(c.Request().Context(), cbs)
	if err != nil {
		return err
	}
	v := listPage(s, c, "/admin/callbacks", cbs, formatID(next), callbackRow)
	for i := range v.Rows {
		v.Rows[i].OwnRefund = own[v.Rows[i].ID]
		v.Rows[i].SecondCharge = second[v.Rows[i].ID]
	}
	form := views.CallbackFilter{Provider: f.Provider, Result: f.Result, Order: f.OrderID, Key: f.KeyPrefix,
		Transaction: f.Transaction, Email: f.Email, Search: f.Search, Body: f.Body.String(),
		From: c.QueryParam("from"), To: c.QueryParam("to")}
	return s.show(c, "Callbacks", "callbacks", v, views.CallbacksPage(v, form, s.deps.Payments.Providers(), callbackResults))
}

// adminCallback is GET /admin/callbacks/:id: the event as parsed, its
// fingerprint, every delivery, and what it caused.
func (s *Server) adminCallback(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return models.Errorf(models.ENotFound, "no callback %q", c.Param("id"))
	}
	ctx := c.Request().Context()
	st, err := s.deps.Stories.Callback(ctx, id)
	if err != nil {
		return err
	}
	now := s.deps.Now()
	v := views.CallbackDetail{
		Now: now, Callback: callbackRow(st.Callback),
		Deliveries:  rows(st.Deliveries, func(d models.CallbackDelivery) views.DeliveryRow { return deliveryRowOf(d, &st.Callback) }),
		Transitions: rows(st.Transitions, transitionRow), Movements: rows(st.Movements, movementRow),
		Outbox: rows(st.Outbox, outboxRow),
		Jobs:   rows(st.Jobs, func(j models.JobExecution) views.JobRow { return jobRow(j, now, s.taskTypes, "") }),
	}
	v.Callback.OwnRefund = st.OwnRefund
	v.Callback.SecondCharge = st.SecondCharge
	if st.Accepted != nil {
		sent := keptDelivery(*st.Accepted)
		v.Sent = &sent
	}
	v.Conflicts = conflicts(st.Accepted, st.Conflicting)
	if st.Payment != nil {
		p := paymentRow(*st.Payment)
		v.Payment = &p
	}
	return s.show(c, "Callback "+st.Callback.IdempotencyKey, "callbacks", v, views.CallbackPage(v))
}

// deliveryFilter reads the deliveries list's filter, and the params read,
// for the caller to check.
func deliveryFilter(q url.Values) (payments.DeliveryFilter, *params) {
	p := newParams(q)
	f := payments.DeliveryFilter{
		Provider: p.text("provider"), Outcome: p.oneOf("outcome", deliveryOutcomes...), CallbackID: p.id("callback"),
		RemoteAddr: p.text("addr"), RequestID: p.text("request"), Transaction: p.text("transaction"),
		Body: p.bodyField("body"), From: p.time("from"), To: p.time("to"), Before: p.id("before"), Limit: p.limit(),
	}
	return f, p
}

// callbackOf is delivery d's callback among cbs; nil when it has none.
func callbackOf(d models.CallbackDelivery, cbs map[int64]models.PaymentCallback) *models.PaymentCallback {
	if d.CallbackID == nil {
		return nil
	}
	if cb, ok := cbs[*d.CallbackID]; ok {
		return &cb
	}
	return nil
}

// adminDeliveries is GET /admin/deliveries: the raw delivery log,
// refusals included — where a wrong secret or an attacker shows.
func (s *Server) adminDeliveries(c echo.Context) error {
	f, p := deliveryFilter(c.QueryParams())
	if err := p.check(c); err != nil {
		return err
	}
	ds, next, err := s.deps.Payments.ListDeliveries(c.Request().Context(), f)
	if err != nil {
		return err
	}
	cbs, err := s.deps.Payments.DeliveryCallbacks(c.Request().Context(), ds)
	if err != nil {
		return err
	}
	v := listPage(s, c, "/admin/deliveries", ds, formatID(next), func(d models.CallbackDelivery) views.DeliveryRow {
		return deliveryRowOf(d, callbackOf(d, cbs))
	})
	form := views.DeliveryFilter{Provider: f.Provider, Outcome: f.Outcome, Callback: formatID(f.CallbackID),
		Addr: f.RemoteAddr, Request: f.RequestID, Transaction: f.Transaction, Body: f.Body.String(), From: c.QueryParam("from"), To: c.QueryParam("to")}
	return s.show(c, "Deliveries", "deliveries", v, views.DeliveriesPage(v, form, s.deps.Payments.Providers(), deliveryOutcomes))
}
