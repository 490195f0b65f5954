package sandboxgw

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// page is GET /sandbox/pay/:id?t=<token>: the hosted payment page. Only
// the order's access token opens it, as it opens the order page.
func (g *Sandbox) page(c echo.Context) error {
	token := c.QueryParam("t")
	o, err := g.orders.Open(c.Request().Context(), c.Param("id"), token, false)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	if back := g.returns.to(o.ID, ""); back != "" {
		allowFormTo(c.Response().Header(), back)
	}
	// The emulated page of a gateway (?via=<gateway>) pays in that gateway's
	// format when the gateway speaks it; else in the sandbox's.
	via, emulates := sandbox.Name, ""
	if v := c.QueryParam("via"); slices.Contains(g.Formats(), v) {
		via = v
	}
	if e, ok := gateways.Find(c.QueryParam("via")); ok && e.Name != sandbox.Name {
		emulates = e.Name
	}
	v := PayView{
		OrderID: o.ID, Token: token, Status: string(o.Status), Amount: o.TotalAmount, Currency: o.Currency,
		Deliveries: g.Deliveries(o.ID), Self: payPathVia(o.ID, token, via), Formats: g.Formats(), Via: via, Emulates: emulates,
		OrderURL: g.returns.to(o.ID, "/orders/"+url.PathEscape(o.ID)+"?t="+url.QueryEscape(token)),
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
func (g *Sandbox) pay(c echo.Context) error {
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
		next = withAttempt(g.returns.to(o.ID, "/orders/"+url.PathEscape(o.ID)+"?t="+url.QueryEscape(token)), len(o.Payments)+1)
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// page is the path of the emulated page of gateway via for order
// (an order id, or a request key of it), made by that gateway's API with
// the merchant's returnURL: the page sends the customer back there, as a
// real gateway's does — to the host the customer left the shop from, not
// to the address the API was asked at.
func (r *returnURLs) page(order, returnURL, via string) string {
	if u, err := url.Parse(returnURL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		r.put(gatewaycalls.OrderOfKey(order), returnURL)
	}
	return payPathVia(order, tokenOf(returnURL), via)
}

// returnURLs are the merchants' return URLs of the emulated pages, by
// order id: the last keptOrders, in memory (this is a sandbox).
type returnURLs struct {
	mu    sync.Mutex
	m     map[string]string
	order []string // oldest first
}

func (r *returnURLs) put(orderID, u string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]string{}
	}
	if _, ok := r.m[orderID]; !ok {
		r.order = append(r.order, orderID)
	}
	r.m[orderID] = u
	if len(r.order) > keptOrders {
		delete(r.m, r.order[0])
		r.order = r.order[1:]
	}
}

// to is the merchant's return URL of the order's page, or else.
func (r *returnURLs) to(orderID, orElse string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u, ok := r.m[orderID]; ok {
		return u
	}
	return orElse
}

// withAttempt is the order page u as the customer's nth payment attempt:
// the order page says the payment is being confirmed until its word lands.
func withAttempt(u string, n int) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "attempt=" + strconv.Itoa(n)
}

// allowFormTo lets the page's forms lead back to returnURL's origin:
// each button posts here and is redirected there, and a browser checks
// that redirect against the policy's form-action.
func allowFormTo(h http.Header, returnURL string) {
	csp, origin := h.Get("Content-Security-Policy"), gatewaycalls.Origin(returnURL)
	if csp == "" || origin == "" || strings.ContainsAny(origin, "; ,'") {
		return
	}
	h.Set("Content-Security-Policy", strings.Replace(csp, "form-action 'self'", "form-action 'self' "+origin, 1))
}

// render sends a gateway page: whole, or its content for htmx.
func render(c echo.Context, status int, content templ.Component) error {
	comp := views.ShopLayout("Sandbox payment", "sandbox", content)
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
	Emulates   string // the gateway whose hosted page this stands in for (?via=), or "" for the sandbox's own
	Plan       Plan   // what the QA panel's fields show
}

// Brand is the page's name: the gateway it emulates, or the sandbox's own.
func (v PayView) Brand() string {
	if v.Emulates == "" {
		return "Sandbox Pay"
	}
	return strings.ToUpper(v.Emulates[:1]) + v.Emulates[1:] + " (emulated)"
}

// secretUnset is the variable that, set, would let the page pay in the
// format of the gateway it emulates: without it Sekali has no endpoint
// for that gateway, so the payment is recorded, and refunded, as the
// sandbox's.
func (v PayView) secretUnset() string {
	if v.Emulates == "" || v.Via == v.Emulates {
		return ""
	}
	e, _ := gateways.Find(v.Emulates)
	return e.SecretVariable
}

// DefaultPlan is what the QA panel offers first: ten copies of the
// payment, all at once.
var DefaultPlan = Plan{Outcome: models.EventPaid, Copies: 10, Mode: ModeConcurrent, Provider: "sandbox"}

// pending reports whether the order still waits for its payment.
func (v PayView) pending() bool { return v.Status == string(models.OrderPending) }
