package web

import (
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sekali/sekali/app/metrics"
)

// routes lists every route in one place.
func (s *Server) routes() {
	e := s.echo
	e.Use(middleware.RequestID(), s.recoverPanics, s.accessLog, s.deadline)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	gatherer := s.deps.Metrics
	if gatherer == nil {
		gatherer = metrics.Registry
	}
	e.GET("/metrics", echoHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))

	api := e.Group("/api", middleware.BodyLimit(maxAPIBody))
	api.POST("/orders", s.createOrder)
	api.GET("/orders/:id", s.getOrder)
	api.POST("/orders/:id/cancel", s.cancelOrder)

	// The admin API, for test set-up and verdicts (load tests, QA).
	api.GET("/audit", s.getAudit, s.requireAdminToken)
	api.POST("/products", s.createProduct, s.requireAdminToken)
	api.POST("/products/:sku/restock", s.restockProduct, s.requireAdminToken)

	// The callback pipeline enforces its own 64 KiB limit, so that an
	// oversized delivery is recorded like any other.
	e.POST("/callbacks/:provider", s.receiveCallback)
}
