package sandboxgw

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// page is GET /sandbox/pay/:id?t=<token>: the hosted payment page. Only
// the order's access token opens it, as it opens the order page.
func (g *Gateway) page(c echo.Context) error {
	token := c.QueryParam("t")
	o, err := g.orders.Open(c.Request().Context(), c.Param("id"), token, false)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	// The emulated page of a gateway (?via=stripe) pays in that gateway's
	// format when the gateway speaks it; else in the sandbox's.
	via := sandbox.Name
	if v := c.QueryParam("via"); slices.Contains(g.Formats(), v) {
		via = v
	}
	v := PayView{
		OrderID: o.ID, Token: token, Status: string(o.Status), Amount: o.TotalAmount, Currency: o.Currency,
		Deliveries: g.Deliveries(o.ID), Self: payPathVia(o.ID, token, via), Formats: g.Formats(), Via: via,
		OrderURL: "/orders/" + url.PathEscape(o.ID) + "?t=" + url.QueryEscape(token),
		Plan:     DefaultPlan,
	}
	v.Plan.Provider = via
	// The QA panel shows the plan it last sent (its redirect names it), so
	// that sending it again is one click.
	q := c.QueryParams()
	if plan, err := g.ParsePlan(q.Get("outcome"), q.Get("copies"), q.Get("mode"), q.Get("provider")); err == nil {
		v.Plan = plan
	}
	return render(c, http.StatusOK, PayPage(v))
}

// pay is POST /sandbox/pay/:id: the customer's Pay, Decline and "Let it
// expire" buttons (one delivery, then back to the order page), and the QA
// panel (outcome, copies, mode, provider; back to this page to watch the
// deliveries land).
func (g *Gateway) pay(c echo.Context) error {
	token := c.FormValue("t")
	o, err := g.orders.Open(c.Request().Context(), c.Param("id"), token, false)
	if err != nil {
		return err
	}
	plan, err := g.ParsePlan(c.FormValue("outcome"), c.FormValue("copies"), c.FormValue("mode"), c.FormValue("provider"))
	if err != nil {
		return err
	}
	g.Start(o, plan)
	g.log.InfoContext(c.Request().Context(), "sandbox gateway: sending callbacks", "order_id", o.ID,
		"payment_status", plan.Outcome, "copies", plan.Copies, "mode", plan.Mode, "provider", plan.Provider)
	next := g.PayURL(o.ID, token) + "&" + url.Values{
		"outcome": {string(plan.Outcome)}, "copies": {strconv.Itoa(plan.Copies)}, "mode": {plan.Mode}, "provider": {plan.Provider},
	}.Encode()
	if c.FormValue("return") == "order" {
		// Back to the order, as this attempt: the order page says the
		// payment is being confirmed until the gateway's word lands.
		next = "/orders/" + url.PathEscape(o.ID) + "?t=" + url.QueryEscape(token) + "&attempt=" + strconv.Itoa(len(o.Payments)+1)
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// render sends a gateway page: whole, or its content for htmx.
func render(c echo.Context, status int, content templ.Component) error {
	comp := views.ShopLayout("Sandbox payment", content)
	if c.Request().Header.Get("HX-Request") == "true" {
		comp = content
	}
	c.Response().Header().Add("Vary", "HX-Request") // a page or its fragment, on one URL
	var buf bytes.Buffer
	if err := comp.Render(context.WithoutCancel(c.Request().Context()), &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// PayView is the payment page.
type PayView struct {
	OrderID    string
	Token      string
	Status     string
	Amount     int64
	Currency   string
	Deliveries []Delivery
	Formats    []string // the gateways whose format the QA panel can send
	Self       string
	OrderURL   string
	Via        string // the format the customer's buttons pay in: the gateway whose page this is, or the sandbox
	Plan       Plan   // what the QA panel's fields show
}

// DefaultPlan is what the QA panel offers first: ten copies of the
// payment, all at once.
var DefaultPlan = Plan{Outcome: models.EventPaid, Copies: 10, Mode: ModeConcurrent, Provider: "sandbox"}

// pending reports whether the order still waits for its payment.
func (v PayView) pending() bool { return v.Status == string(models.OrderPending) }
