package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/janitor"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// scopeRefunds is the Idempotency-Key scope of an order's refunds: the
// admin API's and the console's form share it.
const scopeRefunds = "orders.refunds"

// refundRequestJSON is the body of POST /api/admin/orders/:id/refunds:
// the amount in major units (absent: all that is left), and why; and,
// to refund another charge of the order than its own (a second charge),
// that payment's provider_reference.
type refundRequestJSON struct {
	Amount            json.Number `json:"amount"`
	Reason            string      `json:"reason"`
	ProviderReference string      `json:"provider_reference"`
}

// createRefund is POST /api/admin/orders/:id/refunds, under an
// Idempotency-Key: 202 with the refund record, which the refund:send job
// then asks the gateway for. The same key and body again answer the same
// record; above what is left is 422 and nothing is sent.
func (s *Server) createRefund(c echo.Context) error {
	if s.deps.Refunds == nil {
		return models.Errorf(models.EInvalidTransition, "refunds are not set up in this process")
	}
	id := c.Param("id")
	return runIdempotent(s, c, scopeRefunds, id, nil,
		func(once idempotency.Once, req refundRequestJSON) (idempotency.Response, error) {
			r := refunds.Request{OrderID: id, Payment: req.ProviderReference, Amount: req.Amount.String(), Reason: req.Reason, Admin: "api",
				RequestID: requestID(c)}
			resp, err := s.deps.Refunds.RequestOnce(c.Request().Context(), once, r, answerJSON(http.StatusAccepted, refundAnswer))
			s.recordRefund(c, "api", r, resp, err)
			return resp, err
		})
}

// recordRefund writes a refund asked for into the admin action log
// (a replayed answer is not a new action).
func (s *Server) recordRefund(c echo.Context, admin string, r refunds.Request, resp idempotency.Response, err error) {
	detail := "amount " + r.Amount
	if r.Amount == "" {
		detail = "in full"
	}
	if r.Payment != "" {
		detail += " of payment " + r.Payment
	}
	detail += "; " + r.Reason
	switch {
	case err != nil:
		s.record(c, admin, "refund order", r.OrderID, models.ActionError, err.Error())
	case resp.Replayed:
	case resp.Code == http.StatusAccepted:
		s.record(c, admin, "refund order", r.OrderID, models.ActionOK, models.Truncate(detail, 500))
	default:
		s.record(c, admin, "refund order", r.OrderID, models.ActionRefused, models.ErrorMessage(storedError(resp)))
	}
}

// refundsOf are an order's refund records among its gateway requests.
func refundsOf(rs []models.GatewayRequest) []models.GatewayRequest {
	var out []models.GatewayRequest
	for _, r := range rs {
		if r.Kind == models.GatewayRefund {
			out = append(out, r)
		}
	}
	return out
}

// refundRow is a refund record as the order page shows it and the admin
// API answers it.
func refundRow(r models.GatewayRequest) views.RefundRow {
	return views.RefundRow{GatewayRequestRow: gatewayRow(r), Reason: r.Reason, By: r.RequestedBy,
		ApprovedBy: r.ApprovedBy, ApprovedAt: utc(r.ApprovedAt), DeclinedBy: r.DeclinedBy, DeclinedAt: utc(r.DeclinedAt)}
}

// mayAnswer marks the refunds awaiting approval that admin, of role,
// may approve (an owner who did not ask for it) or decline (an owner).
func mayAnswer(rows []views.RefundRow, admin string, role models.AdminRole) {
	for i := range rows {
		if rows[i].Phase != string(models.GatewayAwaitingApproval) || !role.Allows(models.RoleOwner) {
			continue
		}
		rows[i].CanDecline = true
		rows[i].CanApprove = rows[i].By != admin
	}
}

// refundAnswer is the stored answer of a refund asked.
func refundAnswer(r *models.GatewayRequest) views.RefundRow { return refundRow(*r) }

// refundRows are the order's refund records, each with the state of its
// refund at the gateway (found by the gateway's id of it, or Sekali's
// key where the gateway names it so) and, for one the gateway failed
// after accepting it, the way to ask for it again.
func refundRows(o models.Order, requests []models.GatewayRequest, found []models.Refund) []views.RefundRow {
	byKey := map[string]models.Refund{}
	for _, rf := range found {
		byKey[rf.RefundKey] = rf
	}
	out := []views.RefundRow{}
	for _, r := range refundsOf(requests) {
		row := refundRow(r)
		rf, ok := byKey[r.ProviderObjectID]
		if !ok {
			rf, ok = byKey[r.IdempotencyKey]
		}
		if ok {
			row.AtGateway, row.GatewaySays = string(rf.Status), rf.FailureReason
		}
		if r.Phase == models.GatewayFailed && r.LastError == payments.FailedAfterAcceptance {
			q := url.Values{"amount": {payments.MajorText(r.Amount, r.Currency, 0)}, "reason": {r.Reason}}
			if p := chargeRef(o, r); p != "" {
				q.Set("payment", p)
			}
			row.AgainURL = "/admin/orders/" + url.PathEscape(o.ID) + "/refund?" + q.Encode()
		}
		out = append(out, row)
	}
	return out
}

// chargeRef is the provider reference of the charge refund request r
// refunds when it is not the order's own (a second charge), else "".
func chargeRef(o models.Order, r models.GatewayRequest) string {
	for _, p := range o.Payments {
		if r.PaymentID != nil && p.ID == *r.PaymentID && p.Status != models.PaymentSucceeded && p.RefundedFrom != models.PaymentSucceeded {
			return p.ProviderReference
		}
	}
	return ""
}

// refundForm is the order page's refund form for o's charge named by
// payment ("": the order's own): what is left of it.
func (s *Server) refundForm(c echo.Context, o *models.Order, payment string) (views.RefundForm, refunds.Refundable, error) {
	f := views.RefundForm{OrderID: o.ID, Payment: payment}
	if s.deps.Refunds == nil {
		return f, refunds.Refundable{}, nil
	}
	r, err := s.deps.Refunds.Refundable(c.Request().Context(), o.ID, payment)
	if err != nil {
		return f, r, err
	}
	return refundFormOf(o, r, payment), r, nil
}

// refundFormOf is the refund form of what r says is left, for the
// charge named by payment ("": the order's own).
func refundFormOf(o *models.Order, r refunds.Refundable, payment string) views.RefundForm {
	f := views.RefundForm{OrderID: o.ID, Payment: payment, Provider: r.Provider, Currency: r.Currency, Left: r.Left, Why: r.Why, Disputed: r.Disputed}
	if r.Left == 0 && !r.Disputed && payment == "" && o.Status == models.OrderRefunded {
		// A state, not an error: everything went back.
		f.Why = fullyRefunded
	}
	if r.Left > 0 {
		f.LeftText = payments.MajorText(r.Left, r.Currency, 0)
		f.Owed = payment != "" || o.Status == models.OrderRefundRequired
		f.Key = newFormKey()
	}
	return f
}

// fullyRefunded is what a refunded order's refund form says instead.
const fullyRefunded = "Fully refunded: nothing left to refund."

// owedForms are the one-click refunds of o's other charges that must go
// back: a second charge of a paid order.
func (s *Server) owedForms(c echo.Context, o *models.Order) ([]views.RefundForm, error) {
	if s.deps.Refunds == nil {
		return nil, nil
	}
	owed, err := s.deps.Refunds.Owed(c.Request().Context(), o.ID)
	if err != nil {
		return nil, err
	}
	var forms []views.RefundForm
	for _, r := range owed {
		forms = append(forms, refundFormOf(o, r, r.Payment))
	}
	return forms, nil
}

// adminRefundConfirm is GET /admin/orders/:id/refund?amount=&reason=:
// the order page's refund form lands here, and the page says what the
// refund does and asks before anything is sent. A wrong amount or no
// reason shows the form again (422), with the refund's own words.
func (s *Server) adminRefundConfirm(c echo.Context) error {
	o, err := s.deps.Orders.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	f, r, err := s.refundForm(c, o, strings.TrimSpace(c.QueryParam("payment")))
	if err != nil {
		return err
	}
	f.Amount, f.Reason = strings.TrimSpace(c.QueryParam("amount")), strings.TrimSpace(c.QueryParam("reason"))
	if f.Left == 0 && f.Why == fullyRefunded {
		s.flash(c, "warn", "Order "+o.ID+" is fully refunded: nothing left to refund.")
		return seeOther(c, "/admin/orders/"+url.PathEscape(o.ID))
	}
	if f.Left == 0 {
		s.flash(c, "bad", "Nothing can be refunded of order "+o.ID+": "+f.Why)
		return seeOther(c, "/admin/orders/"+url.PathEscape(o.ID))
	}
	if err := refunds.CheckReason(f.Reason); err != nil {
		f.ReasonError = models.ErrorMessage(err)
	}
	amount, err := r.Amount(f.Amount)
	if err != nil {
		f.Error = models.ErrorMessage(err)
	}
	if f.Error != "" || f.ReasonError != "" {
		return s.page(c, http.StatusUnprocessableEntity, "Refund order "+o.ID, "orders", views.RefundAskPage(orderRow(*o), f))
	}
	v := views.RefundConfirm{Order: orderRow(*o), Payment: f.Payment, Provider: f.Provider, Amount: amount, Currency: f.Currency, Left: f.Left,
		AmountText: f.Amount, Reason: f.Reason, Key: newFormKey(), NeedsApproval: s.deps.Refunds.NeedsApproval(r, amount)}
	return s.page(c, http.StatusOK, "Refund order "+o.ID+"?", "orders", views.RefundConfirmPage(v))
}

// adminRefund is POST /admin/orders/:id/refund with confirm=yes: the
// same refund as the admin API's, under the form's Idempotency-Key (a
// double click or a resubmit asks once), logged with the admin's email.
// Without confirm=yes it refunds nothing and shows the confirmation page.
func (s *Server) adminRefund(c echo.Context) error {
	id := c.Param("id")
	back := "/admin/orders/" + url.PathEscape(id)
	if c.FormValue("confirm") != "yes" {
		q := url.Values{"amount": {c.FormValue("amount")}, "reason": {c.FormValue("reason")}}
		if p := c.FormValue("payment"); p != "" {
			q.Set("payment", p)
		}
		return seeOther(c, back+"/refund?"+q.Encode())
	}
	if s.deps.Refunds == nil {
		return models.Errorf(models.EInvalidTransition, "refunds are not set up in this process")
	}
	r := refunds.Request{OrderID: id, Payment: strings.TrimSpace(c.FormValue("payment")), Amount: strings.TrimSpace(c.FormValue("amount")),
		Reason: strings.TrimSpace(c.FormValue("reason")), Admin: adminOf(c), RequestID: requestID(c)}
	once, err := s.formOnce(c, scopeRefunds, id)
	var resp idempotency.Response
	if err == nil {
		resp, err = s.deps.Refunds.RequestOnce(c.Request().Context(), once, r, answerJSON(http.StatusAccepted, refundAnswer))
		s.recordRefund(c, adminOf(c), r, resp, err)
	}
	if err == nil {
		err = storedError(resp)
	}
	switch {
	case err == nil:
		var rec views.RefundRow
		json.Unmarshal(resp.Body, &rec)
		if rec.Phase == string(models.GatewayAwaitingApproval) {
			s.flash(c, "warn", "Refund of "+views.Money(rec.Amount, rec.Currency)+" awaits approval: it is above REFUND_APPROVAL_ABOVE, "+
				"so nothing is sent until another owner approves it. Its amount is held back meanwhile.")
			break
		}
		s.flash(c, "ok", "Refund of "+views.Money(rec.Amount, rec.Currency)+" asked of "+rec.Provider+
			". It shows as done when the gateway answers; asking again never refunds twice.")
	case statusOfError(err) < 500:
		s.flash(c, "bad", models.ErrorMessage(err))
	default:
		return err
	}
	return seeOther(c, back+"#refunds")
}

// adminRetryRefund is POST /admin/gateway-requests/:id/retry, "Ask
// now": a call whose outcome is unknown is asked about at once rather
// than at its next scheduled ask, by the janitor's own code
// (janitor.AskNow: a refund sent again with its key, only if no one else
// holds it; a pending refund or a lost page looked up). A refund not
// sent yet is sent now ("Send again now") rather than at its job's next
// try — by the same code the job runs (refunds.Service.Send), so it
// calls only if no one else holds the refund, and with the same key.
// The job then finds it over. With from=order it goes back to the
// order's page, else to the calls not over.
func (s *Server) adminRetryRefund(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return models.Errorf(models.ENotFound, "no gateway request %q", c.Param("id"))
	}
	orderID := ""
	if s.deps.Janitor != nil {
		a, err := s.deps.Janitor.AskNow(c.Request().Context(), id, requestID(c))
		if err != nil {
			return err
		}
		if a.Result != janitor.Known || a.Request.Kind != models.GatewayRefund {
			s.askedNow(c, a)
			return seeOther(c, retryBack(c, a.Request.OrderID))
		}
		orderID = a.Request.OrderID
	}
	if s.deps.Refunds == nil {
		return models.Errorf(models.EInvalidTransition, "refunds are not set up in this process")
	}
	r, err := s.deps.Refunds.Send(c.Request().Context(), id, requestID(c))
	target := "refund " + strconv.FormatInt(id, 10)
	switch {
	case err == nil && r.Phase == models.GatewayDone:
		s.record(c, adminOf(c), "send refund again", target, models.ActionOK, "done: "+r.ProviderObjectID)
		s.flash(c, "ok", "The gateway answered: refund "+r.ProviderObjectID+" of order "+r.OrderID+" is done.")
	case err == nil:
		s.record(c, adminOf(c), "send refund again", target, models.ActionNoop, string(r.Phase))
		s.flash(c, "bad", "Refund "+strconv.FormatInt(id, 10)+" of order "+r.OrderID+" is "+string(r.Phase)+": "+r.LastError)
	case errors.Is(err, refunds.ErrBusy):
		s.record(c, adminOf(c), "send refund again", target, models.ActionNoop, "held by another caller")
		s.flash(c, "warn", "This refund is being sent right now (or its last caller died less than a lease ago): nothing was sent twice. Look again in a minute.")
	case errors.Is(err, refunds.ErrUnanswered):
		s.record(c, adminOf(c), "send refund again", target, models.ActionError, err.Error())
		s.flash(c, "bad", "The gateway did not answer; the refund stays sent and its job keeps asking, with the same key.")
	case statusOfError(err) < 500:
		return err
	default:
		s.record(c, adminOf(c), "send refund again", target, models.ActionError, err.Error())
		return err
	}
	if r != nil {
		orderID = r.OrderID
	}
	return seeOther(c, retryBack(c, orderID))
}

// retryBack is where "Ask now" and "Send again now" go back to: the
// order's refunds, from its page (from=order), else the calls not over.
func retryBack(c echo.Context, orderID string) string {
	if c.FormValue("from") == "order" && orderID != "" {
		return "/admin/orders/" + url.PathEscape(orderID) + "#refunds"
	}
	return "/admin/gateway-requests?phase=open"
}

// askedNow logs what an admin's "Ask now" came to and says it.
func (s *Server) askedNow(c echo.Context, a janitor.Asked) {
	r := a.Request
	what := r.Provider + " " + strings.ReplaceAll(string(r.Kind), "_", " ") + " " + strconv.FormatInt(r.ID, 10) + " of order " + r.OrderID
	next := ""
	if r.NextAskAt != nil {
		next = "; " + views.GatewayRequestRow{Asks: r.Asks}.Asked() + ", next at " + views.Time(*r.NextAskAt) + " UTC"
	}
	result, tone, say := models.ActionOK, "ok", ""
	switch a.Result {
	case janitor.Final:
		say = "The gateway answered: " + what + " is " + views.PhaseText(string(r.Phase)) + "."
		if r.LastError != "" && r.Phase != models.GatewayDone {
			say += " " + r.LastError
		}
	case janitor.Unknown:
		result, tone = models.ActionError, "warn"
		say = "Asked: " + what + " is still not known (" + cmp.Or(r.LastError, "pending at the gateway") + ")" + next + "."
	case janitor.Busy:
		result, tone = models.ActionNoop, "warn"
		say = what + " is being asked right now by another caller: nothing was asked twice" + next + ". Look again in a minute."
	case janitor.CannotAsk:
		result, tone = models.ActionNoop, "warn"
		say = r.Provider + " cannot be asked about " + what + "; Sekali looks again whether it became known" + next + "."
	default:
		result, tone = models.ActionNoop, "ok"
		say = "Nothing to ask: the outcome of " + what + " is known (" + views.PhaseText(string(r.Phase)) + ")."
	}
	s.record(c, adminOf(c), "ask gateway now", "gateway request "+strconv.FormatInt(r.ID, 10), result, string(a.Result))
	s.flash(c, tone, say)
}

// adminApproveRefund is POST /admin/gateway-requests/:id/approve (owners):
// a refund awaiting approval is sent — its job written with the
// approval, once however many owners press at once. The owner who asked
// for it cannot approve it (403).
func (s *Server) adminApproveRefund(c echo.Context) error {
	return s.answerRefund(c, "approved", func(ctx context.Context, d refunds.Decision) (*models.GatewayRequest, error) {
		return s.deps.Refunds.Approve(ctx, d)
	})
}

// adminDeclineRefund is POST /admin/gateway-requests/:id/decline
// (owners): a refund awaiting approval ends unsent, and what it held
// back can be refunded again.
func (s *Server) adminDeclineRefund(c echo.Context) error {
	return s.answerRefund(c, "declined", func(ctx context.Context, d refunds.Decision) (*models.GatewayRequest, error) {
		return s.deps.Refunds.Decline(ctx, d)
	})
}

// answerRefund approves or declines (answer) the refund named by the
// path, as the logged-in owner, and goes back to its order's refunds. A
// refused answer is the error's page (403, 409), logged.
func (s *Server) answerRefund(c echo.Context, did string, answer func(context.Context, refunds.Decision) (*models.GatewayRequest, error)) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return models.Errorf(models.ENotFound, "no gateway request %q", c.Param("id"))
	}
	if s.deps.Refunds == nil {
		return models.Errorf(models.EInvalidTransition, "refunds are not set up in this process")
	}
	r, err := answer(c.Request().Context(), refunds.Decision{ID: id, Admin: adminOf(c), RequestID: requestID(c), RemoteAddr: c.RealIP()})
	if err != nil {
		// Done is logged with the change; a refusal is logged here.
		if statusOfError(err) < 500 {
			s.record(c, adminOf(c), strings.TrimSuffix(did, "d")+" refund", "refund "+strconv.FormatInt(id, 10), models.ActionRefused, models.ErrorMessage(err))
		}
		return err
	}
	msg := "Refund of " + views.Money(r.Amount, r.Currency) + " of order " + r.OrderID + " " + did + "."
	if r.Phase == models.GatewayPlanned {
		msg += " It is sent to " + r.Provider + " now; it shows as done when the gateway answers."
	}
	s.flash(c, "ok", msg)
	return seeOther(c, "/admin/orders/"+url.PathEscape(r.OrderID)+"#refunds")
}
