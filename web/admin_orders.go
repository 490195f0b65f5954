package web

import (
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// orderStatuses are the values of the orders list's status filter.
var orderStatuses = []string{
	string(models.OrderPending), string(models.OrderPaid), string(models.OrderFailed), string(models.OrderExpired),
	string(models.OrderCancelled), string(models.OrderRefundRequired), string(models.OrderPartiallyRefunded),
	string(models.OrderRefunded),
}

// adminOrders is GET /admin/orders: newest first, filtered by status,
// customer email, id prefix and creation window.
func (s *Server) adminOrders(c echo.Context) error {
	p := newParams(c.QueryParams())
	f := orders.Filter{
		Status: models.OrderStatus(p.oneOf("status", orderStatuses...)), Email: p.text("email"), IDPrefix: p.text("id"),
		Transaction: p.text("transaction"),
		From:        p.time("from"), To: p.time("to"), Before: p.text("before"), Limit: p.limit(),
	}
	if err := p.check(c); err != nil {
		return err
	}
	os, next, err := s.deps.Orders.List(c.Request().Context(), f)
	if err != nil {
		return err
	}
	v := listPage(s, c, "/admin/orders", os, next, orderRow)
	form := views.OrderFilter{Status: string(f.Status), Email: f.Email, ID: f.IDPrefix, Transaction: f.Transaction,
		From: c.QueryParam("from"), To: c.QueryParam("to")}
	return s.show(c, "Orders", "orders", v, views.OrdersPage(v, form, orderStatuses))
}

// adminOrder is GET /admin/orders/:id: the order's whole story on one
// timeline, and the actions its status allows.
func (s *Server) adminOrder(c echo.Context) error {
	ctx := c.Request().Context()
	st, err := s.deps.Stories.Order(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	now := s.deps.Now()
	o := st.Order
	// The queue's view of each job that has not succeeded, best effort:
	// the page shows without it.
	queueStates := map[string]string{}
	for _, j := range st.Jobs {
		if s.deps.Jobs != nil && j.Status != models.JobSucceeded {
			queueStates[j.IdempotencyKey], _ = s.deps.Jobs.TaskState(ctx, j.IdempotencyKey)
		}
	}
	v := views.OrderDetail{
		Now: now, Order: orderRow(o), Payments: rows(o.Payments, paymentRow),
		Items: rows(o.Items, itemRow), Invoice: invoiceRow(o.Invoice),
		Callbacks: rows(st.Callbacks, func(cb models.PaymentCallback) views.CallbackRow {
			r := callbackRow(cb)
			r.OwnRefund = st.OwnRefund(cb)
			r.SecondCharge = st.SecondCharge(cb)
			return r
		}),
		Transitions: rows(st.Transitions, transitionRow),
		Movements:   rows(st.Movements, movementRow), Outbox: rows(st.Outbox, outboxRow), Emails: rows(st.Emails, emailRow),
		Gateway: rows(st.GatewayRequests, gatewayRow),
		Jobs: rows(st.Jobs, func(j models.JobExecution) views.JobRow {
			return jobRow(j, now, s.taskTypes, queueStates[j.IdempotencyKey])
		}),
		CanCancel:      o.Status == models.OrderPending,
		Refunds:        refundRows(o, st.GatewayRequests, st.Refunds),
		GatewayRefunds: rows(st.Refunds, gatewayRefundRow),
		Timeline:       rows(st.Timeline, eventRow),
		Traces:         st.Traces(),
	}
	mayAnswer(v.Refunds, adminOf(c), roleOf(c))
	for i := range v.Gateway { // their buttons come back here
		v.Gateway[i].From = "order"
	}
	for i := range v.Refunds {
		v.Refunds[i].From = "order"
	}
	if v.Refund, _, err = s.refundForm(c, &o, ""); err != nil {
		return err
	}
	v.RefundLeft = v.Refund.Left
	if v.Owed, err = s.owedForms(c, &o); err != nil {
		return err
	}
	if v.CorrectTotal, err = s.totalCorrection(c, &o, st.Callbacks); err != nil {
		return err
	}
	return s.show(c, "Order "+o.ID, "orders", v, views.OrderPage(v))
}

// adminCancelConfirm is GET /admin/orders/:id/cancel: what cancelling
// the order does, and the button that does it. Cancelling cannot be
// undone, so it is never one click away.
func (s *Server) adminCancelConfirm(c echo.Context) error {
	o, err := s.deps.Orders.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	v := views.CancelConfirm{
		Order:     orderRow(*o),
		Items:     rows(o.Items, itemRow),
		CanCancel: o.Status == models.OrderPending,
	}
	return s.page(c, 200, "Cancel order "+o.ID+"?", "orders", views.CancelConfirmPage(v))
}

// adminCancelOrder is POST /admin/orders/:id/cancel with confirm=yes (the
// confirmation page's button): the same cancel as the API's (pending →
// cancelled, stock released, once). Without confirm=yes it cancels
// nothing and shows the confirmation page.
func (s *Server) adminCancelOrder(c echo.Context) error {
	id := c.Param("id")
	if c.FormValue("confirm") != "yes" {
		return seeOther(c, "/admin/orders/"+url.PathEscape(id)+"/cancel")
	}
	_, err := s.deps.Orders.Cancel(c.Request().Context(), id, models.CauseAdmin)
	switch code := models.ErrorCode(err); {
	case err == nil:
		s.record(c, adminOf(c), "cancel order", id, models.ActionOK, "")
		s.flash(c, "ok", "Order "+id+" is cancelled and its stock released.")
	case code == models.EInvalidTransition || code == models.ENotFound:
		s.record(c, adminOf(c), "cancel order", id, models.ActionRefused, models.ErrorMessage(err))
		s.flash(c, "bad", models.ErrorMessage(err))
	default:
		s.record(c, adminOf(c), "cancel order", id, models.ActionError, err.Error())
		return err
	}
	return seeOther(c, "/admin/orders/"+url.PathEscape(id))
}
