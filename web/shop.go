package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

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
	return renderHTML(c, status, views.ShopLayout(title, content))
}

// shopHeaders are the console's security headers, for the shop's pages.
func (s *Server) shopHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", consoleCSP)
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
	v := views.Catalog{}
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
		form.Errors["qty"] = "a whole number, 1 or more"
		return s.catalog(c, http.StatusUnprocessableEntity, sku, form)
	}
	resp, err := s.runForm(c, scopeShopCheckout, "", func(tx *gorm.DB) (int, any, error) {
		o, err := s.deps.Orders.CreateTx(tx, orders.CreateRequest{
			CustomerEmail: form.Email, Items: []orders.ItemRequest{{SKU: sku, Qty: qty}}, Client: c.RealIP(),
		})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, newOrderJSON(o), nil
	})
	if err == nil {
		err = storedError(resp)
	}
	if err != nil {
		status := models.HTTPStatus(models.ErrorCode(err))
		if status >= 500 {
			return err
		}
		form.Errors[checkoutField(err)] = models.ErrorMessage(err)
		return s.catalog(c, status, sku, form)
	}
	var created orderJSON
	if err := json.Unmarshal(resp.Body, &created); err != nil {
		return err
	}
	return seeOther(c, "/orders/"+url.PathEscape(created.ID)+"?t="+url.QueryEscape(created.AccessToken))
}

// checkoutField says which field of the order form an error is about.
func checkoutField(err error) string {
	msg := models.ErrorMessage(err)
	switch {
	case models.ErrorCode(err) == models.EInsufficientStock, strings.Contains(msg, "qty"), strings.Contains(msg, "units"),
		strings.Contains(msg, "per order"):
		return "qty"
	case strings.Contains(msg, "customer_email"):
		return "email"
	}
	return ""
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
	sent, err := s.deps.Stories.EmailSent(ctx, o.ID)
	if err != nil {
		return err
	}
	v := views.ShopOrder{
		Now: s.deps.Now(), ID: o.ID, Token: token, Status: string(o.Status), Email: o.CustomerEmail,
		Total: o.TotalAmount, Currency: o.Currency, Expires: o.ExpiresAt, EmailSent: sent,
		Items: rows(o.Items, func(i models.OrderItem) views.ItemRow {
			return views.ItemRow{SKU: i.SKU, Qty: i.Qty, UnitPrice: i.UnitPrice}
		}),
	}
	if o.Invoice != nil {
		v.Invoice = o.Invoice.Number
	}
	for _, p := range o.Payments {
		if o.Status.WasPaid() && (p.Status == models.PaymentSucceeded || p.Status == models.PaymentRefunded) {
			v.Refunded += p.RefundedAmount // the order's own charge
		}
	}
	if n := len(o.Payments); o.Status == models.OrderPending && n > 0 && o.Payments[n-1].Status == models.PaymentFailed {
		v.Declined = true // the latest attempt: payments are read in id order
	}
	if o.Status == models.OrderPending && s.deps.PaymentPage != nil {
		v.PayURL = s.deps.PaymentPage.PayURL(o.ID, token)
	}
	return s.shopPage(c, http.StatusOK, "Order "+o.ID, views.ShopOrderPage(v))
}
