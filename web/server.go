// Package web is Sekali's HTTP side: the JSON API, the payment callback
// endpoint, the admin console (HTML, templ + htmx), health checks and
// metrics. It is the only package that knows Echo and templ, and it never
// sees the database: everything it does is delegated to the app/ services
// it is given (Deps) — a request under an Idempotency-Key goes to a
// service as an idempotency.Once, and the service runs it in a
// transaction of its own.
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
	"go.opentelemetry.io/otel/trace"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/janitor"
	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/app/story"
	"github.com/sekali/sekali/models"
)

// The two services the web layer reaches through an interface of its
// own. Every other service is its app package's concrete type: no test
// puts anything else in its place.
type (
	// PaymentPage is a hosted payment page the shop sends customers to
	// (the sandbox gateway, web/sandboxgw). It mounts its own routes.
	PaymentPage interface {
		Mount(e *echo.Echo, mw ...echo.MiddlewareFunc)
		PayURL(orderID, token string) string
	}
	// jobConsole is what the console asks of the job queue; jobs.Console
	// implements it, so that web does not import the queue's library.
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
		// Job is one job's page: its row, attempts, outbox row and the
		// queue's task (asynq's Inspector.GetTaskInfo).
		Job(ctx context.Context, key string) (jobview.JobDetail, error)
		Discard(ctx context.Context, d jobview.Discard) error
		Discardable(ctx context.Context, f jobview.Filter) ([]string, error)
		DiscardAll(ctx context.Context, f jobview.Filter, d jobview.Discard) (map[jobview.DiscardOutcome]int, error)
	}
)

// Deps are the services a Server is built from.
type Deps struct {
	Orders   *orders.Service
	Payments *payments.Service
	Keys     *idempotency.Keys
	Products *catalog.Service
	Audit    *audit.Auditor
	// Metrics is what /metrics serves (the process's metrics.Set
	// registry); none when nil.
	Metrics prometheus.Gatherer
	// Ready are the checks /readyz runs, by name (database, redis).
	Ready map[string]func(context.Context) error

	// The admin console.
	Admins   *admins.Service
	Sessions *scs.SessionManager // NewSessions
	Stories  *story.Reader
	Stats    *stats.Reader
	Jobs     jobConsole
	// Queues is the queue's own web UI, mounted at /admin/queues behind
	// the console's log-in; nil leaves that page out.
	Queues http.Handler
	// Checkout opens hosted payment pages at the configured gateway; nil:
	// the shop offers no Pay.
	Checkout *gatewaycalls.Pages
	// Calls lists the calls Sekali made to gateways (gatewaycalls.Ledger);
	// nil: the console lists none.
	Calls *gatewaycalls.Ledger
	// Refunds asks gateways for the refunds admins ask for; nil: the
	// console offers none.
	Refunds *refunds.Service
	// Janitor asks the gateways about an unknown outcome at an admin's
	// "Ask now" (janitor.Janitor.AskNow); nil: the button sends a refund
	// again through Refunds, as "Send again now" does.
	Janitor *janitor.Janitor
	// CatchUp lists the catch-up runs (catchup.Service); nil: the page
	// lists none.
	CatchUp catchUpRuns
	// Alerts takes an operator's acknowledgement of a dashboard alert;
	// nil: the dashboard offers none.
	Alerts *alerts.Acks
	// PaymentPage is the payment page of the shop; nil: none is mounted.
	PaymentPage PaymentPage
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Tracer traces every request (tracing.Setup); nil: none is.
	Tracer trace.TracerProvider
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
