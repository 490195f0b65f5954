package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// scopeShopCheckout is the Idempotency-Key scope of the shop's order form.
const scopeShopCheckout = "shop.checkout"

// The shop: a catalogue, an order form per product, and the customer's
// order page. It is the API's order creation behind a form, so everything
// the API promises holds here too.

// shopPage renders a shop page: the whole page, or its content for htmx.
func (s *Server) shopPage(c echo.Context, status int, title string, content templ.Component) error {
	if isHTMX(c) {
		return renderHTML(c, status, content)
	}
	return renderHTML(c, status, views.ShopLayout(title, s.cfg.PaymentGateway, content))
}

// shopHeaders are the console's security headers, for the shop's pages.
// Their policy lets a form lead to the payment gateway's pages too: Pay
// posts here and is redirected there, and a browser checks that redirect
// against form-action.
func (s *Server) shopHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	csp := consoleCSP
	if s.deps.Checkout != nil {
		if origins := s.deps.Checkout.PageOrigins(); len(origins) > 0 {
			csp = strings.Replace(csp, "form-action 'self'", "form-action 'self' "+strings.Join(origins, " "), 1)
		}
	}
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin") // the order page's address carries its token
		return next(c)
	}
}

// shopHome is GET /: the catalogue.
func (s *Server) shopHome(c echo.Context) error {
	return s.catalog(c, http.StatusOK, "", views.CheckoutForm{})
}

// catalog renders the catalogue, with failed, the form of sku as it was
// posted, shown again with its errors.
func (s *Server) catalog(c echo.Context, status int, sku string, failed views.CheckoutForm) error {
	ps, err := s.deps.Products.List(c.Request().Context())
	if err != nil {
		return err
	}
	v := views.Catalog{Gateway: s.cfg.PaymentGateway}
	for _, p := range ps {
		form := views.CheckoutForm{Key: newFormKey(), Qty: "1"}
		if p.SKU == sku {
			form = failed
		}
		v.Products = append(v.Products, views.ShopProduct{SKU: p.SKU, Name: p.Name, Price: p.Price, Currency: p.Currency, Stock: p.Stock, Form: form})
	}
	return s.shopPage(c, status, "Shop", views.CatalogPage(v))
}

// checkout is POST /checkout: one order of one product, once per form —
// a double click, a refresh-and-resubmit or a duplicated tab post the
// same Idempotency-Key and get the same order. A refused form is shown
// again with the message next to its field; success is a 303 to the
// order page.
func (s *Server) checkout(c echo.Context) error {
	sku := c.FormValue("sku")
	form := views.CheckoutForm{
		// A form shown again gets a new key: the old one may have stored
		// this refusal, and the corrected form is another request.
		Key: newFormKey(), Qty: strings.TrimSpace(c.FormValue("qty")), Email: strings.TrimSpace(c.FormValue("email")),
		Errors: map[string]string{},
	}
	qty, err := strconv.ParseInt(form.Qty, 10, 64)
	if err != nil || qty < 1 {
		form.Errors["qty"] = "Enter how many you want: 1 or more."
		return s.catalog(c, http.StatusUnprocessableEntity, sku, form)
	}
	place := func() (idempotency.Response, error) {
		once, err := s.formOnce(c, scopeShopCheckout, "")
		if err != nil {
			return idempotency.Response{}, err
		}
		return s.placeOrder(c.Request().Context(), once, orders.CreateRequest{
			CustomerEmail: form.Email, Items: []orders.ItemRequest{{SKU: sku, Qty: qty}}, Client: s.client(c),
		})
	}
	resp, err := place()
	// The same form posted again while the first post still runs (two
	// tabs, a double submit without JavaScript): wait for the first, then
	// answer as it did — the customer lands on the order, not on a 409.
	for wait := 50 * time.Millisecond; models.ErrorCode(err) == models.ERequestInProgress; wait = min(2*wait, time.Second) {
		select {
		case <-c.Request().Context().Done():
			return err
		case <-time.After(wait):
		}
		resp, err = place()
	}
	if err == nil {
		err = storedError(resp)
	}
	if err != nil {
		status := statusOfError(err)
		if status >= 500 {
			return err
		}
		field, message := s.customerMessage(c.Request().Context(), err, sku)
		form.Errors[field] = message
		return s.catalog(c, status, sku, form)
	}
	var created orderJSON
	if err := json.Unmarshal(resp.Body, &created); err != nil {
		return err
	}
	if created.AccessToken == "" {
		// The same form posted again from another client (placeOrder):
		// the order is made, but its token is for the one who made it.
		form.Errors[""] = "This order was already placed from another connection. Open it there, or place a new one."
		return s.catalog(c, http.StatusConflict, sku, form)
	}
	return seeOther(c, "/orders/"+url.PathEscape(created.ID)+"?t="+url.QueryEscape(created.AccessToken))
}

// customerMessage says, in the customer's words, what was wrong with an
// order form, and which field it is about ("" for the form as a whole).
// The API keeps its problem codes and their messages; the shop speaks of
// products by name and never names a field, a SKU or a code.
func (s *Server) customerMessage(ctx context.Context, err error, sku string) (field, message string) {
	msg := models.ErrorMessage(err)
	p, perr := s.deps.Products.Get(ctx, sku)
	switch {
	case perr != nil || strings.HasPrefix(msg, "unknown sku"):
		return "", "Sorry, this product is no longer sold."
	case models.ErrorCode(err) == models.EInsufficientStock && p.Stock == 0:
		return "qty", "Sorry, " + p.Name + " is sold out."
	case models.ErrorCode(err) == models.EInsufficientStock:
		return "qty", fmt.Sprintf("Sorry, only %d left.", p.Stock)
	case strings.Contains(msg, "per order") && p.MaxPerOrder != nil:
		return "qty", fmt.Sprintf("You can order at most %d of these at once.", *p.MaxPerOrder)
	case strings.Contains(msg, "units in all"), strings.Contains(msg, "qty"):
		return "qty", "That is more than one order can hold: please order fewer."
	case strings.Contains(msg, "customer_email"):
		return "email", "Enter an email address such as name@example.com: letters, digits and . _ + - before the @, a domain name after it."
	case models.ErrorCode(err) == models.ETooManyRequests:
		return "", "You already have several unpaid orders. Pay or cancel one of them, or wait until one expires, before ordering again."
	}
	return "", "We could not place this order. Please check the form and try again."
}

// shopOrder is GET /orders/:id?t=<token>: the customer's order page. It
// refreshes itself: status, the time the stock is still held, then the
// invoice and the email as the jobs issue them. Without the order's
// token it is the 404 of an order that does not exist.
func (s *Server) shopOrder(c echo.Context) error {
	ctx := c.Request().Context()
	c.Response().Header().Set("Cache-Control", "no-store")
	token := c.QueryParam("t")
	o, err := s.deps.Orders.Open(ctx, c.Param("id"), token, false)
	if err != nil {
		return err
	}
	email, err := s.deps.Stories.ConfirmationEmail(ctx, o.ID)
	if err != nil {
		return err
	}
	v := views.ShopOrder{
		Now: s.deps.Now(), ID: o.ID, Token: token, Status: string(o.Status), Email: o.CustomerEmail,
		Total: o.TotalAmount, Currency: o.Currency, Expires: o.ExpiresAt, EmailState: email,
		Items: rows(o.Items, itemRow),
	}
	if o.Invoice != nil {
		v.Invoice = o.Invoice.Number
	}
	for _, p := range o.Payments {
		if o.Status.WasPaid() && (p.Status == models.PaymentSucceeded || p.Status == models.PaymentRefunded) {
			v.Refunded += p.RefundedAmount // the order's own charge
		}
	}
	// A refund the customer was emailed about that failed since says so
	// here, as the email of its failure does.
	undone, err := s.deps.Stories.RefundsUndone(ctx, o.ID)
	if err != nil {
		return err
	}
	for _, r := range undone {
		v.RefundsUndone = append(v.RefundsUndone, views.ShopRefund{Amount: r.Amount, Currency: r.Currency})
	}
	// ?attempt=N: the customer is back from the gateway's page, where
	// they made the order's Nth payment attempt. Until the gateway's word
	// on it lands (a payment row), the page says it is being confirmed
	// rather than offering to pay again.
	if attempt, err := strconv.Atoi(c.QueryParam("attempt")); err == nil && attempt > 0 {
		v.Attempt = attempt
		v.Processing = o.Status == models.OrderPending && len(o.Payments) < attempt
	}
	if n := len(o.Payments); o.Status == models.OrderPending && !v.Processing && n > 0 && o.Payments[n-1].Status == models.PaymentFailed {
		v.Declined = true // the latest attempt: payments are read in id order
	}
	if o.Status == models.OrderPending && s.deps.Checkout != nil {
		v.PayURL = "/orders/" + url.PathEscape(o.ID) + "/pay?t=" + url.QueryEscape(token)
	}
	return s.shopPage(c, http.StatusOK, "Order "+o.ID, views.ShopOrderPage(v))
}
