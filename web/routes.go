package web

import (
	"slices"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sekali/sekali/models"
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
	if s.deps.Tracer != nil {
		e.Use(s.traceRequests(s.deps.Tracer))
	}

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
	e.POST("/api/orders/:id/payment", s.orderPayment, api...)

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
	e.GET("/api/admin/deliveries/:id", s.adminDelivery, adminAPI...)
	e.GET("/api/admin/deliveries/:id/dry-run", s.adminDryRun, adminAPI...)
	e.POST("/api/admin/deliveries/:id/dry-run", s.adminDryRun, adminAPI...)
	e.POST("/api/admin/deliveries/:id/apply", s.adminApplyAgain, adminAPI...)
	e.GET("/api/admin/orders", s.adminOrders, adminAPI...)
	e.GET("/api/admin/orders/:id", s.adminOrder, adminAPI...)
	e.POST("/api/admin/orders/:id/refunds", s.createRefund, adminAPI...)
	e.GET("/api/admin/jobs", s.adminJobs, adminAPI...)
	e.GET("/api/admin/jobs/:key", s.adminJob, adminAPI...)
	e.POST("/api/admin/jobs/:key/discard", s.adminDiscardJob, adminAPI...)
	e.GET("/api/admin/outbox", s.adminOutbox, adminAPI...)
	e.GET("/api/admin/products", s.adminProducts, adminAPI...)
	e.GET("/api/admin/products/:sku", s.adminProduct, adminAPI...)
	e.GET("/api/admin/actions", s.adminActions, adminAPI...)
	e.GET("/api/admin/gateway-requests", s.adminGatewayRequests, adminAPI...)

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
	e.POST("/orders/:id/pay", s.payOrder, shop...)
	if s.deps.PaymentPage != nil {
		s.deps.PaymentPage.Mount(e, middleware.BodyLimit(maxFormBody), s.shopHeaders, s.sameOrigin, s.deadline)
	}

	if s.deps.Sessions == nil {
		return // a server without the console (tests of the API alone)
	}
	// Middleware per route here too, so that a known console path asked
	// with another method is a 405, not a 404.
	admin := []echo.MiddlewareFunc{middleware.BodyLimit(maxFormBody), s.adminHeaders, s.sameOrigin, s.loadSession}
	e.GET("/admin/login", s.loginForm, admin...)
	e.POST("/admin/login", s.login, admin...)
	e.GET("/admin/login/code", s.codeForm, admin...)
	e.POST("/admin/login/code", s.loginCode, admin...)
	e.GET("/admin/invite/:token", s.inviteForm, admin...)
	e.POST("/admin/invite/:token", s.acceptInvite, admin...)

	// A viewer's session may only read (requireAdmin); what manages
	// admins needs an owner.
	console := append(slices.Clone(admin), s.requireAdmin)
	owner := append(slices.Clone(console), need(models.RoleOwner))
	e.POST("/admin/logout", s.logout, console...)
	e.GET("/admin/account", s.account, console...)
	e.POST("/admin/account/password", s.changePassword, console...)
	e.POST("/admin/account/mfa", s.enableMFA, console...)
	e.POST("/admin/account/mfa/remove", s.removeMFA, console...)
	e.GET("/admin/admins", s.adminAdmins, owner...)
	e.POST("/admin/admins/invite", s.adminInvite, owner...)
	e.POST("/admin/admins/invitations/:id/revoke", s.adminRevokeInvitation, owner...)
	for _, change := range []string{"role", "disable", "enable", "reset-mfa"} {
		e.POST("/admin/admins/:id/"+change, s.adminManage(change), owner...)
	}
	e.GET("/admin", s.adminDashboard, console...)
	e.POST("/admin/alerts/:id/acknowledge", s.adminAcknowledgeAlert, console...)
	e.GET("/admin/callbacks", s.adminCallbacks, console...)
	e.GET("/admin/callbacks/:id", s.adminCallback, console...)
	e.GET("/admin/deliveries", s.adminDeliveries, console...)
	e.GET("/admin/deliveries/apply-matching", s.adminApplyMatchingConfirm, console...)
	e.POST("/admin/deliveries/apply-matching", s.adminApplyMatching, console...)
	e.GET("/admin/deliveries/:id", s.adminDelivery, console...)
	e.GET("/admin/deliveries/:id/dry-run", s.adminDryRun, console...)
	e.POST("/admin/deliveries/:id/apply", s.adminApplyAgain, console...)
	e.GET("/admin/orders", s.adminOrders, console...)
	e.GET("/admin/orders/:id", s.adminOrder, console...)
	e.GET("/admin/orders/:id/cancel", s.adminCancelConfirm, console...)
	e.POST("/admin/orders/:id/cancel", s.adminCancelOrder, console...)
	e.GET("/admin/orders/:id/refund", s.adminRefundConfirm, console...)
	e.POST("/admin/orders/:id/refund", s.adminRefund, console...)
	e.POST("/admin/orders/:id/total", s.adminCorrectTotal, owner...)
	e.GET("/admin/jobs", s.adminJobs, console...)
	e.POST("/admin/jobs/rerun", s.adminRerunJob, console...)
	e.GET("/admin/jobs/rerun-matching", s.adminRerunConfirm, console...)
	e.POST("/admin/jobs/rerun-matching", s.adminRerunMatching, console...)
	e.GET("/admin/jobs/discard-matching", s.adminDiscardConfirm, console...)
	e.POST("/admin/jobs/discard-matching", s.adminDiscardMatching, console...)
	e.GET("/admin/jobs/:key", s.adminJob, console...)
	e.POST("/admin/jobs/:key/discard", s.adminDiscardJob, console...)
	e.GET("/admin/outbox", s.adminOutbox, console...)
	e.POST("/admin/outbox/:id/dispatch", s.adminDispatch, console...)
	e.GET("/admin/products", s.adminProducts, console...)
	e.POST("/admin/products", s.adminCreateProduct, console...)
	e.GET("/admin/products/:sku", s.adminProduct, console...)
	e.POST("/admin/products/:sku/restock", s.adminRestock, console...)
	e.POST("/admin/products/:sku/limit", s.adminProductLimit, console...)
	e.GET("/admin/audit", s.adminAudit, console...)
	e.POST("/admin/audit", s.adminRunAudit, console...)
	e.GET("/admin/actions", s.adminActions, console...)
	e.GET("/admin/catch-up", s.adminCatchUp, console...)
	e.POST("/admin/catch-up", s.adminAskCatchUp, console...)
	e.GET("/admin/gateway-requests", s.adminGatewayRequests, console...)
	e.POST("/admin/gateway-requests/:id/retry", s.adminRetryRefund, console...)
	// A refund above REFUND_APPROVAL_ABOVE is sent once another owner
	// approves it. Not in the admin API: its token is no person.
	e.POST("/admin/gateway-requests/:id/approve", s.adminApproveRefund, owner...)
	e.POST("/admin/gateway-requests/:id/decline", s.adminDeclineRefund, owner...)
	e.GET("/admin/help", s.adminHelp, console...)
	// Any other console address: a 404, inside the console's frame for
	// an admin (the session is read, not required).
	e.GET("/admin/*", s.adminNotFound, admin...)
	if s.deps.Queues != nil {
		queues := s.queuesHandler()
		e.Any("/admin/queues", queues, console...)
		e.Any("/admin/queues/*", queues, console...)
	}
}
