package web

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// totalCorrection is order o's form that corrects its total, while a
// payment of it stands rejected for its amount (cbs: its callbacks); nil
// otherwise, and for anyone but an owner.
func (s *Server) totalCorrection(c echo.Context, o *models.Order, cbs []models.PaymentCallback) (*views.TotalCorrection, error) {
	if roleOf(c) != models.RoleOwner {
		return nil, nil
	}
	ok, err := s.deps.Orders.CanCorrectTotal(c.Request().Context(), o)
	if err != nil || !ok {
		return nil, err
	}
	for i := len(cbs) - 1; i >= 0; i-- { // the latest rejection
		cb := cbs[i]
		if cb.Status == models.CallbackRejected && cb.Result == models.ReasonAmountMismatch && cb.Currency == o.Currency {
			return &views.TotalCorrection{Amount: payments.MajorText(cb.Amount, cb.Currency, 0), Callback: cb.ID}, nil
		}
	}
	return &views.TotalCorrection{Amount: payments.MajorText(o.TotalAmount, o.Currency, 0)}, nil
}

// adminCorrectTotal is POST /admin/orders/:id/total (owners) with amount
// (in the order currency's major unit) and reason: the order's total
// corrected, logged in the same transaction (orders.CorrectTotal), so
// that its payment rejected for the amount can be applied again. A bad
// amount or reason is a 422; an order with no such payment, or already
// paid, a 409.
func (s *Server) adminCorrectTotal(c echo.Context) error {
	id := c.Param("id")
	ctx := c.Request().Context()
	o, err := s.deps.Orders.Get(ctx, id)
	if err != nil {
		return err
	}
	text := strings.TrimSpace(c.FormValue("amount"))
	amount, err := payments.ParseAmount(text, o.Currency)
	if err != nil {
		err = models.Errorf(models.EInvalid, "amount %s must be a decimal in %s: %v", payments.QuoteAmount(text), o.Currency, err)
		s.record(c, adminOf(c), models.ActionCorrectTotal, orders.CorrectionTarget(id), models.ActionRefused, models.ErrorMessage(err))
		return err
	}
	before, err := s.deps.Orders.CorrectTotal(ctx, orders.Correction{
		OrderID: id, Amount: amount, Reason: c.FormValue("reason"), Admin: adminOf(c), RemoteAddr: c.RealIP(),
	})
	switch code := models.ErrorCode(err); {
	case err == nil:
	case code == models.EInvalid || code == models.EInvalidTransition || code == models.ENotFound:
		s.record(c, adminOf(c), models.ActionCorrectTotal, orders.CorrectionTarget(id), models.ActionRefused, models.ErrorMessage(err))
		return err
	default:
		s.record(c, adminOf(c), models.ActionCorrectTotal, orders.CorrectionTarget(id), models.ActionError, err.Error())
		return err
	}
	s.flash(c, "ok", fmt.Sprintf("Order %s's total is now %s (it was %s). Apply its rejected payment again from its delivery.",
		id, views.Money(amount, o.Currency), views.Money(before, o.Currency)))
	return seeOther(c, "/admin/orders/"+url.PathEscape(id))
}
