// Package web is Sekali's HTTP side: the JSON API, the payment callback
// endpoint, health checks and metrics. It is the only package that knows
// Echo; everything it does is delegated to the app/ services it is given.
package web

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// The services the web layer uses, declared here by their consumer.
type (
	orderService interface {
		CreateTx(tx *gorm.DB, req orders.CreateRequest) (*models.Order, error)
		Get(ctx context.Context, id string) (*models.Order, error)
		Cancel(ctx context.Context, id string) (*models.Order, error)
	}
	callbackService interface {
		Receive(ctx context.Context, d payments.Delivery) payments.Outcome
	}
	productService interface {
		Create(ctx context.Context, p models.Product) (*models.Product, error)
		RestockTx(tx *gorm.DB, sku string, qty int64) (*models.Product, error)
	}
	auditor interface {
		Run(ctx context.Context, drainTimeout time.Duration) (audit.Report, error)
	}
	idempotencyKeys interface {
		Do(ctx context.Context, scope, key, requestHash string, fn func(tx *gorm.DB) (idempotency.Response, error)) (idempotency.Response, error)
	}
)

// Deps are the services a Server is built from.
type Deps struct {
	Orders    orderService
	Callbacks callbackService
	Keys      idempotencyKeys
	Products  productService
	Audit     auditor
	// Metrics is what /metrics serves; metrics.Registry when nil.
	Metrics prometheus.Gatherer
	// Ready are the checks /readyz runs, by name (database, redis).
	Ready map[string]func(context.Context) error
}

// Server is the HTTP handler of one Sekali process.
type Server struct {
	log  *slog.Logger
	cfg  config.Config
	deps Deps
	echo *echo.Echo
}

// NewServer builds the handler with every route of routes.go.
func NewServer(log *slog.Logger, cfg config.Config, deps Deps) *Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = echo.ExtractIPDirect() // no proxy is trusted unless one is configured
	s := &Server{log: log, cfg: cfg, deps: deps, echo: e}
	e.HTTPErrorHandler = s.handleError
	s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }
