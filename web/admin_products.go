package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

const scopeProductsCreate = "products.create"

// adminProducts is GET /admin/products: every product and its stock, and
// the form for a new one.
func (s *Server) adminProducts(c echo.Context) error {
	if err := newParams(c.QueryParams()).check(c); err != nil { // one page of every product: no filters
		return err
	}
	return s.productsPage(c, 200, views.ProductForm{Key: newFormKey(), Values: map[string]string{"currency": models.DefaultCurrency}})
}

// productsPage answers GET /admin/products (a read: JSON or the page), and
// a refused new-product form, shown again on the page with status.
func (s *Server) productsPage(c echo.Context, status int, form views.ProductForm) error {
	ps, err := s.deps.Products.List(c.Request().Context())
	if err != nil {
		return err
	}
	v := views.Products{List: listPage(s, c, "/admin/products", ps, "", productRow), Form: form} // every product: one page
	content := views.ProductsPage(v)
	if c.Request().Method != http.MethodGet {
		return s.page(c, status, "Products", "products", content)
	}
	return s.show(c, "Products", "products", v, content)
}

// adminCreateProduct is POST /admin/products: a product and its initial
// stock (an adjust movement), through the same catalog service as the
// API, once per form (its Idempotency-Key).
func (s *Server) adminCreateProduct(c echo.Context) error {
	values := map[string]string{}
	for _, f := range []string{"sku", "name", "price", "currency", "stock"} {
		values[f] = strings.TrimSpace(c.FormValue(f))
	}
	// A form shown again gets a new key: the old one may have stored
	// this refusal, and the corrected form is another request.
	form := views.ProductForm{Key: newFormKey(), Values: values, Errors: map[string]string{}}
	price, perr := payments.ParseMinorUnits(values["price"]) // the grammar of every amount: no sign, no exponent
	if perr != nil {
		form.Errors["price"] = "a whole number of minor units (IDR has none: 150000 is Rp 150.000)"
	}
	stock, serr := strconv.ParseInt(values["stock"], 10, 64)
	if serr != nil {
		form.Errors["stock"] = "a whole number"
	}
	if len(form.Errors) > 0 {
		return s.productsPage(c, 422, form)
	}
	p := models.Product{SKU: values["sku"], Name: values["name"], Price: price, Currency: values["currency"], Stock: stock}
	once, err := s.formOnce(c, scopeProductsCreate, "")
	var resp idempotency.Response
	if err == nil {
		resp, err = s.deps.Products.CreateOnce(c.Request().Context(), once, p, answerJSON(http.StatusCreated, productAnswer))
	}
	if err == nil {
		err = storedError(resp)
	}
	if err != nil {
		if statusOfError(err) >= 500 {
			return err
		}
		s.record(c, adminOf(c), "create product", p.SKU, models.ActionRefused, models.ErrorMessage(err))
		form.Errors[fieldOf(models.ErrorMessage(err))] = models.ErrorMessage(err)
		return s.productsPage(c, statusOfError(err), form)
	}
	if !resp.Replayed {
		s.record(c, adminOf(c), "create product", p.SKU, models.ActionOK, "stock "+values["stock"])
		s.flash(c, "ok", "Product "+p.SKU+" created.")
	}
	return seeOther(c, "/admin/products/"+url.PathEscape(p.SKU))
}

// fieldOf guesses which form field a validation message is about: the
// catalog's messages start with the field's name.
func fieldOf(msg string) string {
	first, _, _ := strings.Cut(msg, " ")
	switch first {
	case "sku", "name", "price", "currency", "stock":
		return first
	case "product": // "product X exists"
		return "sku"
	}
	return ""
}

// adminProduct is GET /admin/products/:sku: the product, its stock ledger
// (every movement, newest first) and the restock form.
func (s *Server) adminProduct(c echo.Context) error {
	return s.productPage(c, 200, views.RestockForm{Key: newFormKey()}, nil)
}

// productPage shows the product with the restock form, and the limit form
// as typed when limit is not nil (else as the product has it).
func (s *Server) productPage(c echo.Context, status int, restock views.RestockForm, limit *views.LimitForm) error {
	ctx := c.Request().Context()
	sku := c.Param("sku")
	p := newParams(c.QueryParams())
	before, rows := p.id("before"), p.limit()
	if err := p.check(c); err != nil {
		return err
	}
	prod, err := s.deps.Products.Get(ctx, sku)
	if err != nil {
		return err
	}
	ledger, next, err := s.deps.Products.Ledger(ctx, sku, before, rows)
	if err != nil {
		return err
	}
	l := listPage(s, c, "/admin/products/"+url.PathEscape(sku), ledger, formatID(next), movementRow)
	v := views.ProductDetail{Product: productRow(*prod), Ledger: l, Restock: restock}
	if limit != nil {
		v.Limit = *limit
	} else if prod.MaxPerOrder != nil {
		v.Limit.Value = strconv.FormatInt(*prod.MaxPerOrder, 10)
	}
	if c.Request().Method != http.MethodGet { // a refused form, shown again
		return s.page(c, status, "Product "+sku, "products", views.ProductPage(v))
	}
	return s.show(c, "Product "+sku, "products", v, views.ProductPage(v))
}

// adminRestock is POST /admin/products/:sku/restock: adds qty units with
// an adjust movement, through the same idempotent service as the API's
// restock, once per form.
func (s *Server) adminRestock(c echo.Context) error {
	sku := c.Param("sku")
	form := views.RestockForm{Key: newFormKey(), Qty: strings.TrimSpace(c.FormValue("qty"))}
	qty, err := strconv.ParseInt(form.Qty, 10, 64)
	if err != nil {
		form.Error = "qty must be a whole number of units"
		return s.productPage(c, 422, form, nil)
	}
	once, err := s.formOnce(c, scopeProductsRestock, sku)
	var resp idempotency.Response
	if err == nil {
		resp, err = s.deps.Products.RestockOnce(c.Request().Context(), once, sku, qty, answerJSON(http.StatusOK, productAnswer))
	}
	if err == nil {
		err = storedError(resp)
	}
	if err != nil {
		if statusOfError(err) >= 500 {
			return err
		}
		s.record(c, adminOf(c), "restock", sku, models.ActionRefused, models.ErrorMessage(err))
		form.Error = models.ErrorMessage(err)
		return s.productPage(c, statusOfError(err), form, nil)
	}
	if !resp.Replayed {
		s.record(c, adminOf(c), "restock", sku, models.ActionOK, "+"+form.Qty)
		s.flash(c, "ok", "Added "+form.Qty+" to "+sku+".")
	}
	return seeOther(c, "/admin/products/"+url.PathEscape(sku))
}

// adminProductLimit is POST /admin/products/:sku/limit: the most units of
// the product one order may hold, or none (an empty field). Setting it is
// idempotent by nature: the same value twice is the same state.
func (s *Server) adminProductLimit(c echo.Context) error {
	sku := c.Param("sku")
	form := views.LimitForm{Value: strings.TrimSpace(c.FormValue("max_per_order"))}
	var limit *int64
	if form.Value != "" {
		n, err := strconv.ParseInt(form.Value, 10, 64)
		if err != nil {
			form.Error = "a whole number of units, or empty for no cap"
			return s.productPage(c, 422, views.RestockForm{Key: newFormKey()}, &form)
		}
		limit = &n
	}
	if _, err := s.deps.Products.SetMaxPerOrder(c.Request().Context(), sku, limit); err != nil {
		if status := statusOfError(err); status != 422 {
			return err
		}
		s.record(c, adminOf(c), "set units per order", sku, models.ActionRefused, models.ErrorMessage(err))
		form.Error = models.ErrorMessage(err)
		return s.productPage(c, 422, views.RestockForm{Key: newFormKey()}, &form)
	}
	shown := "none"
	if limit != nil {
		shown = form.Value
	}
	s.record(c, adminOf(c), "set units per order", sku, models.ActionOK, "at most "+shown)
	s.flash(c, "ok", "Units per order of "+sku+": at most "+shown+".")
	return seeOther(c, "/admin/products/"+url.PathEscape(sku))
}
