// Package web is Sekali's HTTP side: the JSON API, the payment callback
// endpoint, the admin console (HTML, templ + htmx), health checks and
// metrics. It is the only package that knows Echo and templ, and it never
// sees the database: everything it does is delegated to the app/ services
// it is given, through the small interfaces below — a request under an
// Idempotency-Key goes to a service as an idempotency.Once, and the
// service runs it in a transaction of its own.
package web

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbound"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/app/story"
	"github.com/sekali/sekali/models"
)

// The services the web layer uses, declared here by their consumer.
type (
	orderService interface {
		CreateOnce(ctx context.Context, once idempotency.Once, req orders.CreateRequest, answer idempotency.Answer[*models.Order]) (idempotency.Response, error)
		Get(ctx context.Context, id string) (*models.Order, error)
		Open(ctx context.Context, id, token string, admin bool) (*models.Order, error)
		ReplayToken(ctx context.Context, id, client string) (string, error)
		Cancel(ctx context.Context, id, cause string) (*models.Order, error)
		List(ctx context.Context, f orders.Filter) ([]models.Order, string, error)
	}
	paymentService interface {
		Receive(ctx context.Context, d payments.Delivery) payments.Outcome
		Providers() []string
		ListCallbacks(ctx context.Context, f payments.CallbackFilter) ([]models.PaymentCallback, int64, error)
		ListDeliveries(ctx context.Context, f payments.DeliveryFilter) ([]models.CallbackDelivery, int64, error)
	}
	productService interface {
		Create(ctx context.Context, p models.Product) (*models.Product, error)
		CreateOnce(ctx context.Context, once idempotency.Once, p models.Product, answer idempotency.Answer[*models.Product]) (idempotency.Response, error)
		RestockOnce(ctx context.Context, once idempotency.Once, sku string, qty int64, answer idempotency.Answer[*models.Product]) (idempotency.Response, error)
		SetMaxPerOrder(ctx context.Context, sku string, n *int64) (*models.Product, error)
		List(ctx context.Context) ([]models.Product, error)
		Get(ctx context.Context, sku string) (*models.Product, error)
		Ledger(ctx context.Context, sku string, before int64, limit int) ([]models.StockMovement, int64, error)
	}
	auditor interface {
		Run(ctx context.Context, drainTimeout time.Duration) (audit.Report, error)
		Checks() []audit.Check
	}
	idempotencyKeys interface {
		Once(scope, key, requestHash string) idempotency.Once
	}
	adminService interface {
		Authenticate(ctx context.Context, email, password string) (*models.AdminUser, error)
		Reserve(ctx context.Context, email, client string) (admins.Attempt, time.Duration, error)
		Succeeded(ctx context.Context, a admins.Attempt) error
		Record(ctx context.Context, a models.AdminAction) error
		RecordRefusedLogin(ctx context.Context, email, client, detail string) error
		ListActions(ctx context.Context, f admins.ActionFilter) ([]models.AdminAction, int64, error)
	}
	// checkoutService opens an order's hosted payment page at the
	// configured gateway (PAYMENT_GATEWAY), once per order.
	checkoutService interface {
		Provider() string
		PageOrigins() []string
		Open(ctx context.Context, o *models.Order, items []outbound.PageItem, returnURL string) (outbound.Page, error)
	}
	gatewayCalls interface {
		List(ctx context.Context, f outbound.Filter) ([]models.GatewayRequest, int64, error)
	}
	refundService interface {
		RequestOnce(ctx context.Context, once idempotency.Once, r refunds.Request, answer idempotency.Answer[*models.GatewayRequest]) (idempotency.Response, error)
		Refundable(ctx context.Context, orderID, payment string) (refunds.Refundable, error)
		Owed(ctx context.Context, orderID string) ([]refunds.Refundable, error)
		Send(ctx context.Context, id int64, requestID string) (*models.GatewayRequest, error)
	}
	storyReader interface {
		Order(ctx context.Context, id string) (*story.Order, error)
		Callback(ctx context.Context, id int64) (*story.Callback, error)
		EmailSent(ctx context.Context, orderID string) (bool, error)
	}
	// PaymentPage is a hosted payment page the shop sends customers to
	// (the sandbox gateway, web/sandboxgw). It mounts its own routes.
	PaymentPage interface {
		Mount(e *echo.Echo, mw ...echo.MiddlewareFunc)
		PayURL(orderID, token string) string
	}
	statsReader interface {
		Dashboard(ctx context.Context) (stats.Dashboard, error)
		DeliveriesSince(ctx context.Context, from time.Time) ([]stats.MinuteCount, error)
	}
	// jobConsole is what the console asks of the job queue; jobs.Console
	// implements it (web does not import the queue's library).
	jobConsole interface {
		TaskTypes() []string
		List(ctx context.Context, f jobview.Filter) ([]models.JobExecution, int64, error)
		Archived(ctx context.Context, f jobview.Filter) ([]jobview.QueuedTask, error)
		ArchivedCount(ctx context.Context) (int, error)
		TaskState(ctx context.Context, key string) (string, error)
		Rerun(ctx context.Context, key string) (jobview.RerunOutcome, error)
		AnyFailed(ctx context.Context, f jobview.Filter) (bool, error)
		Rerunnable(ctx context.Context, f jobview.Filter) ([]string, error)
		RerunAll(ctx context.Context, f jobview.Filter) (map[jobview.RerunOutcome]int, error)
		ListOutbox(ctx context.Context, f outbox.Filter) ([]models.OutboxMessage, int64, error)
		DispatchNow(ctx context.Context, outboxID int64) (jobview.DispatchOutcome, error)
	}
)

// Deps are the services a Server is built from.
type Deps struct {
	Orders   orderService
	Payments paymentService
	Keys     idempotencyKeys
	Products productService
	Audit    auditor
	// Metrics is what /metrics serves (the process's metrics.Set
	// registry); none when nil.
	Metrics prometheus.Gatherer
	// Ready are the checks /readyz runs, by name (database, redis).
	Ready map[string]func(context.Context) error

	// The admin console.
	Admins   adminService
	Sessions *scs.SessionManager // NewSessions
	Stories  storyReader
	Stats    statsReader
	Jobs     jobConsole
	// Queues is the queue's own web UI, mounted at /admin/queues behind
	// the console's log-in; nil leaves that page out.
	Queues http.Handler
	// Checkout opens hosted payment pages at the configured gateway; nil:
	// the shop offers no Pay.
	Checkout checkoutService
	// Calls lists the calls Sekali made to gateways (outbound.Ledger);
	// nil: the console lists none.
	Calls gatewayCalls
	// Refunds asks gateways for the refunds admins ask for; nil: the
	// console offers none.
	Refunds refundService
	// PaymentPage is the payment page of the shop; nil: none is mounted.
	PaymentPage PaymentPage
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Server is the HTTP handler of one Sekali process.
type Server struct {
	log         *slog.Logger
	cfg         config.Config
	deps        Deps
	echo        *echo.Echo
	crossOrigin *http.CrossOriginProtection
	// taskTypes are the business task types (the job queue's TaskTypes),
	// read once: they are fixed for the process.
	taskTypes []string
}

// NewServer builds the handler with every route of routes.go.
func NewServer(log *slog.Logger, cfg config.Config, deps Deps) *Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = clientIP(cfg.TrustedProxies)
	if deps.Now == nil {
		deps.Now = time.Now
	}
	s := &Server{log: log, cfg: cfg, deps: deps, echo: e, crossOrigin: http.NewCrossOriginProtection()}
	if deps.Jobs != nil {
		s.taskTypes = deps.Jobs.TaskTypes()
	}
	e.HTTPErrorHandler = s.handleError
	s.routes()
	return s
}

// clientIP is how the client's address is read (c.RealIP): the
// connection's peer, unless proxies are trusted (TRUSTED_PROXIES). Then
// X-Forwarded-For is read from the right, past the trusted proxies, to
// the first address that is not one of them — the client as the outermost
// trusted proxy saw it, which a client cannot forge. Echo trusts loopback
// and private networks by default; here only the ranges named are.
func clientIP(proxies []*net.IPNet) echo.IPExtractor {
	if len(proxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range proxies {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }
