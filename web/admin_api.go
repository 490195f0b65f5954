package web

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

const scopeProductsRestock = "products.restock"

// maxDrainTimeout bounds the drain an audit request may ask for.
const maxDrainTimeout = 2 * time.Minute

// requireAdminToken guards the admin API with ADMIN_API_TOKEN. Without a
// token configured the API does not exist (404); a wrong or missing
// bearer token is a 401. The comparison is constant-time.
func (s *Server) requireAdminToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.cfg.AdminAPIToken == "" {
			return models.Errorf(models.ENotFound, "no such resource")
		}
		got, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.AdminAPIToken)) != 1 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="sekali-admin"`)
			return models.Errorf(models.EUnauthorized, "a valid bearer token is required")
		}
		c.Set(ctxToken, true) // a script's request: console reads answer it JSON (wantsJSON)
		return next(c)
	}
}

// getAudit is GET /api/audit[?drain_timeout=30s]: the integrity audit as
// JSON (docs/api.md#get-apiaudit), the same report `sekali verify` prints.
// It drains first, so it outlives the usual request deadline.
func (s *Server) getAudit(c echo.Context) error {
	drain := audit.DefaultDrainTimeout
	if v := c.QueryParam("drain_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxDrainTimeout {
			return models.Errorf(models.EInvalid, "drain_timeout must be a duration between 0s and %s", maxDrainTimeout)
		}
		drain = d
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), drain+time.Minute)
	defer cancel()
	// The server's write timeout is shorter than a long drain.
	if err := http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(drain + time.Minute)); err != nil {
		return err
	}
	report, err := s.deps.Audit.Run(ctx, drain)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, report)
}

// createProduct is POST /api/products: a product and its initial stock
// (an adjust movement).
func (s *Server) createProduct(c echo.Context) error {
	body, err := readJSONBody(c)
	if err != nil {
		return err
	}
	var req views.ProductRow // a product as the console shows it and the API answers it
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	p, err := s.deps.Products.Create(c.Request().Context(), models.Product{
		SKU: req.SKU, Name: req.Name, Price: req.Price, Currency: req.Currency, Stock: req.Stock, MaxPerOrder: req.MaxPerOrder,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, productRow(*p))
}

// restockRequest is the body of a restock.
type restockRequest struct {
	Qty int64 `json:"qty"`
}

// restockProduct is POST /api/products/:sku/restock with {"qty": n},
// idempotent under its Idempotency-Key like order creation; the SKU is
// part of the request's fingerprint.
func (s *Server) restockProduct(c echo.Context) error {
	sku := c.Param("sku")
	return runIdempotent(s, c, scopeProductsRestock, sku, nil,
		func(once idempotency.Once, req restockRequest) (idempotency.Response, error) {
			return s.deps.Products.RestockOnce(c.Request().Context(), once, sku, req.Qty, answerJSON(http.StatusOK, productAnswer))
		})
}
