package web

import (
	"cmp"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gatewaycalls"
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

// sandboxPage is where the sandbox serves its hosted pages — its own and
// those of the gateways it emulates; they open the order with its token.
const sandboxPage = "/sandbox/pay/"

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
	// Only the customer's token: it goes into the way back from the
	// gateway, and every press must send the gateway the same request.
	token, _ := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
	if token == "" {
		token = c.QueryParam("t")
	}
	o, err := s.deps.Orders.Open(c.Request().Context(), c.Param("id"), token, false)
	if err != nil {
		return err
	}
	page, err := s.openPaymentPage(c, o, token)
	if err != nil {
		return err
	}
	redirect := page.RedirectURL
	if strings.HasPrefix(redirect, "/") { // the sandbox's own page: this server's
		redirect = s.publicBase(c) + redirect
	}
	return c.JSON(http.StatusOK, paymentPageJSON{Provider: s.deps.Checkout.Provider(), RedirectURL: redirect})
}

// openPaymentPage asks the checkout service for o's page. The gateway
// sends the customer back to the order's page, with the token when the
// caller has the customer's. Every press must send the gateway the same
// request — a repeat under one key with other parameters is an error at
// some gateways — so the return URL depends on nothing that changes between
// presses (not on the payment attempts so far, nor on the host asked),
// and the items carry the names they were sold under, not the
// catalogue's of the moment.
func (s *Server) openPaymentPage(c echo.Context, o *models.Order, token string) (gatewaycalls.Page, error) {
	ctx := c.Request().Context()
	items := pageItems(o)
	returnURL := s.publicBase(c) + "/orders/" + url.PathEscape(o.ID)
	if token != "" {
		returnURL += "?t=" + url.QueryEscape(token)
	}
	page, err := s.deps.Checkout.Open(ctx, o, items, returnURL)
	if err != nil {
		return page, err
	}
	// A stored sandbox page lost its token (Sekali keeps tokens hashed
	// only): the customer's goes back on.
	if u, perr := url.Parse(page.RedirectURL); perr == nil && strings.HasPrefix(u.Path, sandboxPage) && token != "" && !u.Query().Has("t") {
		q := u.Query()
		q.Set("t", token)
		u.RawQuery = q.Encode()
		page.RedirectURL = u.String()
	}
	return page, nil
}

// publicBase is the shop's address for links that leave the request:
// PUBLIC_URL, or without it the request's own scheme and Host
// (development, where the host is whatever the browser used). Only the
// Host the request was sent to — which net/http has checked is a host
// name — never X-Forwarded-Host, and only http or https: a link built so
// leads the customer to where the customer already is.
func (s *Server) publicBase(c echo.Context) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "http"
	if c.Scheme() == "https" {
		scheme = "https"
	}
	return scheme + "://" + c.Request().Host
}

// pageItems are o's items as a gateway's page shows them, with the names
// they were sold under: every press asks the gateway the same.
func pageItems(o *models.Order) []gatewaycalls.PageItem {
	items := make([]gatewaycalls.PageItem, len(o.Items))
	for i, it := range o.Items {
		items[i] = gatewaycalls.PageItem{SKU: it.SKU, Name: cmp.Or(it.Name, it.SKU), Qty: it.Qty, UnitPrice: it.UnitPrice}
	}
	return items
}
