package web

import (
	"slices"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sekali/sekali/web/static"
)

// maxFormBody caps console form posts.
const maxFormBody = "64K"

// routes lists every route in one place, in three groups: /api (JSON,
// problem details), /callbacks (no session, no cross-origin check: the
// gateways sign their deliveries) and /admin (the console: session,
// cross-origin protection, security headers).
func (s *Server) routes() {
	e := s.echo
	e.Use(s.assignRequestID, s.baseHeaders, s.recoverPanics, s.accessLog, s.deadline)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if s.cfg.MetricsPublic && s.deps.Metrics != nil { // else serve.go serves /metrics on METRICS_ADDR only
		e.GET("/metrics", echoHandler(promhttp.HandlerFor(s.deps.Metrics, promhttp.HandlerOpts{})))
	}
	e.GET(static.Prefix+"*", echoHandler(static.Handler()))

	// The JSON API. Middleware per route, not a group's: a group with
	// middleware catches every path under it, and a known path asked with
	// another method would be a 404 instead of a 405.
	api := []echo.MiddlewareFunc{middleware.BodyLimit(maxAPIBody), noStore}
	e.POST("/api/orders", s.createOrder, api...)
	e.GET("/api/orders/:id", s.getOrder, api...)
	e.POST("/api/orders/:id/cancel", s.cancelOrder, api...)

	// The admin API, for test set-up and verdicts (load tests, QA), and
	// the console's pages as JSON, for scripts: the same handlers as the
	// pages below, behind the admin API token.
	adminAPI := append(slices.Clone(api), s.requireAdminToken)
	e.GET("/api/audit", s.getAudit, adminAPI...)
	e.POST("/api/products", s.createProduct, adminAPI...)
	e.POST("/api/products/:sku/restock", s.restockProduct, adminAPI...)
	e.GET("/api/admin", s.adminDashboard, adminAPI...)
	e.GET("/api/admin/callbacks", s.adminCallbacks, adminAPI...)
	e.GET("/api/admin/callbacks/:id", s.adminCallback, adminAPI...)
	e.GET("/api/admin/deliveries", s.adminDeliveries, adminAPI...)
	e.GET("/api/admin/orders", s.adminOrders, adminAPI...)
	e.GET("/api/admin/orders/:id", s.adminOrder, adminAPI...)
	e.GET("/api/admin/jobs", s.adminJobs, adminAPI...)
	e.GET("/api/admin/outbox", s.adminOutbox, adminAPI...)
	e.GET("/api/admin/products", s.adminProducts, adminAPI...)
	e.GET("/api/admin/products/:sku", s.adminProduct, adminAPI...)
	e.GET("/api/admin/actions", s.adminActions, adminAPI...)

	// The callback pipeline enforces its own 64 KiB limit, so that an
	// oversized delivery is recorded like any other.
	e.POST("/callbacks/:provider", s.receiveCallback)

	// The shop: the catalogue, its order form, the customer's order page,
	// and the payment page it sends customers to, if one is mounted.
	// (Middleware per route: a group at "/" would catch every unknown path
	// and turn a 405 into a 404.)
	shop := []echo.MiddlewareFunc{middleware.BodyLimit(maxFormBody), s.shopHeaders, s.sameOrigin}
	e.GET("/", s.shopHome, shop...)
	e.POST("/checkout", s.checkout, shop...)
	e.GET("/orders/:id", s.shopOrder, shop...)
	if s.deps.PaymentPage != nil {
		s.deps.PaymentPage.Mount(e.Group("/sandbox", middleware.BodyLimit(maxFormBody), s.shopHeaders, s.sameOrigin, s.deadline))
	}

	if s.deps.Sessions == nil {
		return // a server without the console (tests of the API alone)
	}
	admin := e.Group("/admin", middleware.BodyLimit(maxFormBody), s.adminHeaders, s.sameOrigin, s.loadSession)
	admin.GET("/login", s.loginForm)
	admin.POST("/login", s.login)

	console := admin.Group("", s.requireAdmin)
	console.POST("/logout", s.logout)
	console.GET("", s.adminDashboard)
	console.GET("/callbacks", s.adminCallbacks)
	console.GET("/callbacks/:id", s.adminCallback)
	console.GET("/deliveries", s.adminDeliveries)
	console.GET("/orders", s.adminOrders)
	console.GET("/orders/:id", s.adminOrder)
	console.POST("/orders/:id/cancel", s.adminCancelOrder)
	console.GET("/jobs", s.adminJobs)
	console.POST("/jobs/rerun", s.adminRerunJob)
	console.GET("/jobs/rerun-matching", s.adminRerunConfirm)
	console.POST("/jobs/rerun-matching", s.adminRerunMatching)
	console.GET("/outbox", s.adminOutbox)
	console.POST("/outbox/:id/dispatch", s.adminDispatch)
	console.GET("/products", s.adminProducts)
	console.POST("/products", s.adminCreateProduct)
	console.GET("/products/:sku", s.adminProduct)
	console.POST("/products/:sku/restock", s.adminRestock)
	console.GET("/audit", s.adminAudit)
	console.POST("/audit", s.adminRunAudit)
	console.GET("/actions", s.adminActions)
	console.GET("/help", s.adminHelp)
	if s.deps.Queues != nil {
		queues := s.queuesHandler()
		console.Any("/queues", queues)
		console.Any("/queues/*", queues)
	}
}
