package web

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// deliveryID is the :id of a delivery's address.
func deliveryID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, models.Errorf(models.ENotFound, "no delivery %q", c.Param("id"))
	}
	return id, nil
}

// adminDelivery is GET /admin/deliveries/:id: the delivery's row, what it
// carried while that is kept, the dry run, and "apply again" when its
// outcome allows it.
func (s *Server) adminDelivery(c echo.Context) error {
	id, err := deliveryID(c)
	if err != nil {
		return err
	}
	d, err := s.deps.Payments.Delivery(c.Request().Context(), id)
	if err != nil {
		return err
	}
	cbs, err := s.deps.Payments.DeliveryCallbacks(c.Request().Context(), []models.CallbackDelivery{d})
	if err != nil {
		return err
	}
	v := views.DeliveryDetail{Now: s.deps.Now(), Delivery: deliveryRowOf(d, callbackOf(d, cbs)), CanApplyAgain: payments.CanApplyAgain(d)}
	if d.Body != nil {
		sent := keptDelivery(d)
		v.Sent = &sent
	}
	return s.show(c, fmt.Sprintf("Delivery %d", id), "deliveries", v, views.DeliveryPage(v))
}

// adminDryRun is GET /admin/deliveries/:id/dry-run: what the kept
// delivery would do now, from a transaction rolled back (a read: it
// changes nothing, so a GET; the admin API takes a POST too, as the
// contract names it).
func (s *Server) adminDryRun(c echo.Context) error {
	id, err := deliveryID(c)
	if err != nil {
		return err
	}
	r, err := s.deps.Payments.DryRun(c.Request().Context(), id)
	if err != nil {
		return err
	}
	d, err := s.deps.Payments.Delivery(c.Request().Context(), id)
	if err != nil {
		return err
	}
	v := views.DryRun{DeliveryID: id, Result: r.Outcome.Word(), Status: r.Outcome.Status(), Detail: r.Outcome.Detail,
		OrderID: r.Event.OrderID, StatusBefore: string(r.Outcome.StatusBefore()), StatusAfter: string(r.Outcome.OrderStatus),
		Transitions: rows(r.Transitions, transitionRow), Movements: rows(r.Movements, movementRow), Outbox: []string{},
		Payments: len(r.Payments), CanApplyAgain: payments.CanApplyAgain(d)}
	for _, m := range r.Outbox {
		v.Outbox = append(v.Outbox, m.TaskID)
	}
	return s.show(c, fmt.Sprintf("Dry run of delivery %d", id), "deliveries", v, views.DryRunPage(v))
}

// againResult is the action-log result of a delivery applied again: a
// refusal or a duplicate changed nothing.
func againResult(out payments.Outcome) string {
	if out.Status() >= 400 || out.Result == models.ResultDuplicate {
		return models.ActionNoop
	}
	return models.ActionOK
}

// maxReason bounds an operator's reason.
const maxReason = 500

// againReason is the reason of an apply again, trimmed: required, and
// bounded.
func againReason(raw string) (string, error) {
	reason := strings.TrimSpace(raw)
	if reason == "" || len(reason) > maxReason || !models.CleanText(reason) {
		return "", models.Errorf(models.EInvalid, "reason must be 1 to %d characters of text", maxReason)
	}
	return reason, nil
}

// adminApplyAgain is POST /admin/deliveries/:id/apply (and
// /api/admin/deliveries/:id/apply) with a reason: the kept delivery runs
// through the pipeline again (payments.ApplyAgain), logged with the
// actor and the reason. The console goes back to the delivery's page;
// the API answers what the callback endpoint would answer for that body
// now. A delivery that may not be applied again is a 409.
func (s *Server) adminApplyAgain(c echo.Context) error {
	id, err := deliveryID(c)
	if err != nil {
		return err
	}
	raw, err := actionReason(c)
	if err != nil {
		return err
	}
	reason, err := againReason(raw)
	if err != nil {
		return err
	}
	target := "delivery " + strconv.FormatInt(id, 10)
	out, err := s.deps.Payments.ApplyAgain(c.Request().Context(), id, requestID(c))
	if err != nil {
		s.record(c, actor(c), "apply again", target, resultOf(err), models.Truncate(reason+"; "+err.Error(), 500))
		return err
	}
	said := fmt.Sprintf("%s (HTTP %d)", out.Word(), out.Status())
	if out.Detail != "" {
		said += ": " + out.Detail
	}
	result, tone := againResult(out), "ok"
	if result == models.ActionNoop {
		tone = "warn"
	}
	s.record(c, actor(c), "apply again", target, result, models.Truncate(reason+"; "+said, 500))
	if c.Get(ctxToken) == true {
		return answerCallback(c, out)
	}
	s.flash(c, tone, "Delivery #"+strconv.FormatInt(id, 10)+" applied again: "+said+".")
	return seeOther(c, "/admin/deliveries/"+strconv.FormatInt(id, 10))
}

// againQuery is the filter of a bulk apply again as a query, for its
// confirm page's form and the action log.
func againQuery(q url.Values) string {
	v := url.Values{}
	for _, k := range []string{"provider", "outcome", "callback", "addr", "request", "transaction", "body", "from", "to"} {
		if s := strings.TrimSpace(q.Get(k)); s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// adminApplyMatchingConfirm is GET /admin/deliveries/apply-matching?<filter>:
// how many kept deliveries refused for a reason that may have changed
// match (one per callback), and a form to apply them all again.
func (s *Server) adminApplyMatchingConfirm(c echo.Context) error {
	f, p := deliveryFilter(c.QueryParams())
	if err := p.check(c); err != nil {
		return err
	}
	ids, err := s.deps.Payments.AgainCandidates(c.Request().Context(), f)
	if err != nil {
		return err
	}
	v := views.ApplyMatching{Query: againQuery(c.QueryParams()), IDs: ids, Max: payments.MaxAgainAtOnce}
	return s.page(c, 200, "Apply deliveries again", "deliveries", views.ApplyMatchingPage(v))
}

// adminApplyMatching is POST /admin/deliveries/apply-matching: every
// matching delivery applied again (payments.ApplyAgain, one by one, each
// logged), with one reason; the flash counts what came of them.
func (s *Server) adminApplyMatching(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return models.Errorf(models.EInvalid, "the form could not be read")
	}
	reason, err := againReason(form.Get("reason"))
	if err != nil {
		return err
	}
	f, p := deliveryFilter(form) // the form's reason is the form's
	if p.err != nil {
		return p.err
	}
	f.Before, f.Limit = 0, 0
	ctx := c.Request().Context()
	ids, err := s.deps.Payments.AgainCandidates(ctx, f)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, id := range ids {
		target := "delivery " + strconv.FormatInt(id, 10)
		out, err := s.deps.Payments.ApplyAgain(ctx, id, requestID(c))
		if err != nil {
			counts["failed"]++
			s.record(c, adminOf(c), "apply again", target, resultOf(err), models.Truncate(reason+"; "+err.Error(), 500))
			continue
		}
		counts[out.Word()]++
		s.record(c, adminOf(c), "apply again", target, againResult(out), models.Truncate(reason+"; "+out.Word(), 500))
	}
	var parts []string
	for _, word := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[word], word))
	}
	summary := fmt.Sprintf("%d deliveries applied again", len(ids))
	if len(parts) > 0 {
		summary += ": " + strings.Join(parts, ", ")
	}
	query := againQuery(form)
	s.record(c, adminOf(c), "bulk apply again", "deliveries?"+query, models.ActionOK, models.Truncate(reason+"; "+summary, 500))
	s.flash(c, "ok", summary+".")
	return seeOther(c, "/admin/deliveries?"+query)
}
