package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbound"
	"github.com/sekali/sekali/models"
)

// payOrder is POST /orders/:id/pay?t=…, the shop's Pay: a 303 to the
// order's hosted payment page at the configured gateway (PAYMENT_GATEWAY),
// which is asked for it once, however often Pay is pressed. An order that
// is no longer pending goes back to its page, which says why.
func (s *Server) payOrder(c echo.Context) error {
	if s.deps.Checkout == nil {
		return models.Errorf(models.ENotFound, "no payment gateway is configured")
	}
	token := c.QueryParam("t")
	o, err := s.deps.Orders.Open(c.Request().Context(), c.Param("id"), token, false)
	if err != nil {
		return err
	}
	orderPage := "/orders/" + url.PathEscape(o.ID) + "?t=" + url.QueryEscape(token)
	if o.Status != models.OrderPending {
		return c.Redirect(http.StatusSeeOther, orderPage)
	}
	page, err := s.openPaymentPage(c, o, token)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, page.RedirectURL)
}

// paymentPageJSON is the answer of POST /api/orders/:id/payment.
type paymentPageJSON struct {
	Provider    string `json:"provider"`
	RedirectURL string `json:"redirect_url"`
}

// orderPayment is POST /api/orders/:id/payment with the order's access
// token: the order's hosted payment page, as payOrder opens it — the same
// redirect_url however often it is asked.
func (s *Server) orderPayment(c echo.Context) error {
	if s.deps.Checkout == nil {
		return models.Errorf(models.ENotFound, "no payment gateway is configured")
	}
	o, err := s.openOrder(c)
	if err != nil {
		return err
	}
	// The customer's token goes into the way back from the gateway (the
	// admin token never does).
	token, _ := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
	if token == "" {
		token = c.QueryParam("t")
	}
	if !orders.TokenOpens(o, token) {
		token = ""
	}
	page, err := s.openPaymentPage(c, o, token)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, paymentPageJSON{Provider: s.deps.Checkout.Provider(), RedirectURL: page.RedirectURL})
}

// openPaymentPage asks the checkout service for o's page. The gateway
// sends the customer back to the order's page, with the token when the
// caller has the customer's. Every press must send the gateway the same
// request — a repeat under one key with other parameters is an error at
// Stripe — so the return URL depends on nothing that changes between
// presses (not on the payment attempts so far).
func (s *Server) openPaymentPage(c echo.Context, o *models.Order, token string) (outbound.Page, error) {
	ctx := c.Request().Context()
	items, err := s.pageItems(ctx, o)
	if err != nil {
		return outbound.Page{}, err
	}
	returnURL := c.Scheme() + "://" + c.Request().Host + "/orders/" + url.PathEscape(o.ID)
	if token != "" {
		returnURL += "?t=" + url.QueryEscape(token)
	}
	return s.deps.Checkout.Open(ctx, o, items, returnURL)
}

// pageItems are o's items as a gateway's page shows them, with the
// products' names.
func (s *Server) pageItems(ctx context.Context, o *models.Order) ([]outbound.PageItem, error) {
	products, err := s.deps.Products.List(ctx) // the catalogue is small
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(products))
	for _, p := range products {
		names[p.SKU] = p.Name
	}
	items := make([]outbound.PageItem, len(o.Items))
	for i, it := range o.Items {
		items[i] = outbound.PageItem{SKU: it.SKU, Name: names[it.SKU], Qty: it.Qty, UnitPrice: it.UnitPrice}
	}
	return items, nil
}
