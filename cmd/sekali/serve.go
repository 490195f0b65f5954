package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"time"

	"github.com/alexedwards/scs/postgresstore"
	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/catchup"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/janitor"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/redisconn"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/story"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web"
	"github.com/sekali/sekali/web/sandboxgw"
)

// knownRoles are the parts `serve` can run; by default all of them, in
// one process. Run them apart to scale them apart.
var knownRoles = []string{"web", "worker", "relay", "scheduler"}

// shutdownTimeout is how long in-flight requests get to finish.
const shutdownTimeout = 15 * time.Second

// serve is `sekali serve`: it builds everything by hand, in the order it is
// used, and shuts it down in reverse when ctx ends (SIGINT, SIGTERM).
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	rolesFlag := fs.String("roles", strings.Join(knownRoles, ","), "comma-separated parts to run: "+strings.Join(knownRoles, ", "))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	roles, err := parseRoles(*rolesFlag)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	if slices.Contains(roles, "web") {
		if err := cfg.CheckWeb(); err != nil {
			return fmt.Errorf("configuration:\n  %w", err)
		}
	}
	log := newLogger(stderr, cfg.LogLevel)
	redisconn.LogTo(log)
	log.Info("starting", "roles", roles, "config", cfg)
	if cfg.SandboxSecretIsDefault && slices.Contains(roles, "web") { // only the web role checks callbacks
		log.Warn("SANDBOX_WEBHOOK_SECRET is unset: using the public development secret; never use it in production")
		fmt.Fprintf(stdout, "WARNING: sandbox callbacks are checked with the development secret %s\n", config.DevSandboxSecret)
	}
	if cfg.OrderTokenKeyIsDefault && slices.Contains(roles, "web") {
		log.Warn("ORDER_TOKEN_SECRET is unset: order access tokens are derived from the public development secret; never use it in production")
	}

	// Tracing is off (a nil provider) unless the OTEL_* settings ask for
	// it; its shutdown, last, sends the spans still buffered.
	tracer, stopTracing, err := tracing.Setup(ctx, cfg.Tracing, strings.Join(roles, ","))
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := stopTracing(ctx); err != nil {
			log.Warn("tracing: could not send the last spans", "error", err)
		}
	}()
	db, err := store.Open(ctx, cfg.PoolURL(), cfg.DBMaxConns, log)
	if err != nil {
		return err
	}
	defer store.Close(db)
	// One client for everything in this process that talks to Redis: the
	// queue, the worker, the inspector, the job locks, /readyz. Behind
	// Sentinel it follows the primary through a failover.
	redisConn, err := redisconn.Parse(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redisConn.NewClient()
	defer rdb.Close()

	orderService := orders.NewService(db, log, time.Now, cfg.OrderTTL, jobs.Tasks{})
	orderService.MaxUnits = int64(cfg.OrderMaxUnits)
	orderService.OpenPerClient = cfg.OpenOrdersPerClient
	if cfg.OrderTokenKey != nil { // the web role's (CheckWeb); no other role derives tokens
		orderService.TokenKey = cfg.OrderTokenKey
	}
	// The web role listens first: the sandbox gateway answers on its
	// address, and the gateways that ask it need to know where.
	var ln net.Listener
	webAddr := cfg.HTTPAddr // where this environment's web role listens
	if slices.Contains(roles, "web") {
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return fmt.Errorf("HTTP_ADDR: %w", err)
		}
		defer ln.Close()
		webAddr = ln.Addr().String() // the port it was given, for HTTP_ADDR=:0
	}
	gatewaySet, sandboxURL, err := configureGateways(cfg, getenv, webAddr)
	if err != nil {
		return err
	}
	log.Info("gateways", "settings", gatewaySet)
	// This process's series: every service counts into them, /metrics
	// serves them, with what only its database and Redis can answer live.
	metricSet := metrics.New()
	inspector := asynq.NewInspectorFromRedisClient(rdb) // the queue gauges and the console read the queue through it
	metricSet.Registry.MustRegister(jobs.Gauges(db, inspector)...)
	paymentService := payments.NewService(db, log, time.Now, metricSet, jobs.Tasks{}, gatewaySet.Providers()...)
	paymentService.KeepBodies = cfg.DeliveryBodyRetention > 0
	paymentService.KeptBodyKey = payments.KeptBodyKey(cfg.OrderTokenKey)
	defer paymentService.Close() // after the HTTP server has stopped: writes the queued delivery rows
	queue := asynq.NewClientFromRedisClient(rdb)
	defer queue.Close()
	var gateway *sandboxgw.Sandbox
	if cfg.SandboxGateway { // the pretend gateway, for development and QA only
		gateway = sandboxgw.New(orderService, cfg.SandboxKeys[0], sandboxURL, log)
		for _, sender := range gatewaySet.Senders() { // each mounted gateway's format
			gateway.Speak(sender)
		}
		for _, em := range gatewaySet.Emulators() { // and as each gateway's API that its package emulates
			gateway.Emulate(em)
		}
		defer gateway.Close()
	}
	refunders := gatewaySet.Refunders()
	if gateway != nil { // the sandbox's own charges
		refunders = append([]gatewaycalls.Refunder{gateway}, refunders...)
	}
	refundService := refunds.NewService(db, log, time.Now, metricSet, paymentService, jobs.Tasks{}, refunders...)
	refundService.ApprovalAbove = cfg.RefundApprovalAbove
	refundService.ApprovalWindow = cfg.RefundApprovalWindow
	catchUps := catchup.New(db, log, time.Now, paymentService, gatewaySet.Listers(), gatewaySet.StatusClients(), jobs.Tasks{})
	openers := gatewaySet.PageOpeners()
	if gateway != nil { // the sandbox's own pages
		openers = append([]gatewaycalls.PageOpener{gateway}, openers...)
	}
	unknowns := janitor.New(db, log, time.Now, metricSet, refundService, gateways.Schedules(), openers...)

	g, ctx := errgroup.WithContext(ctx)
	if slices.Contains(roles, "web") {
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		sessionStore := postgresstore.NewWithCleanupInterval(sqlDB, 5*time.Minute)
		defer sessionStore.StopCleanup()
		// asynqmon builds (and closes) clients of its own from the same URL.
		queuesUI := asynqmon.New(asynqmon.Options{RootPath: "/admin/queues", RedisConnOpt: redisConn})
		defer queuesUI.Close()
		deps := web.Deps{
			Orders:   orderService,
			Payments: paymentService,
			Refunds:  refundService,
			Calls:    gatewaycalls.NewLedger(db, time.Now, metricSet),
			Keys:     idempotency.New(db, time.Now, cfg.RequestTimeout),
			Products: catalog.NewService(db),
			Audit:    audit.New(db).WithSchedules(gateways.Schedules()).RaisingAlerts(jobs.Tasks{}),
			Janitor:  unknowns,
			Metrics:  metricSet.Registry,
			Ready: map[string]func(context.Context) error{
				"database": func(ctx context.Context) error { return store.Ping(ctx, db) },
				"redis":    func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
			},
			Admins:   admins.NewService(db, time.Now).Notifying(jobs.Tasks{}),
			Sessions: web.NewSessions(sessionStore, cfg),
			Stories:  story.New(db, jobs.Tasks{}),
			Stats:    stats.NewReader(db, time.Now),
			Jobs:     jobs.NewConsole(db, inspector, queue, cfg.TaskRetention, metricSet),
			CatchUp:  catchUps,
			Alerts:   alerts.NewAcks(db, time.Now),
			Queues:   queuesUI,
		}
		if gateway != nil {
			deps.PaymentPage = gateway
			log.Warn("SANDBOX_GATEWAY is on: /sandbox/pay pays orders without money; never turn it on in production")
		}
		// PAYMENT_GATEWAY's pages; the sandbox gateway serves the sandbox's.
		if opener := gatewaySet.PageOpener(); opener != nil {
			deps.Checkout = gatewaycalls.NewPages(db, opener, log, time.Now, metricSet)
		} else if gateway != nil {
			deps.Checkout = gatewaycalls.NewPages(db, gateway, log, time.Now, metricSet)
		}
		deps.Tracer = tracer
		srv := web.NewServer(log, cfg, deps)
		fmt.Fprintf(stdout, "Sekali is serving on %s\n", displayURL(ln.Addr()))
		g.Go(func() error { return serveHTTP(ctx, srv, ln, log) })
	}
	if !slices.Contains(roles, "web") || !cfg.MetricsPublic {
		// Without the web role nothing serves /metrics, and with
		// METRICS_PUBLIC=false the web role does not: serve it alone.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(metricSet.Registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"status":"ok"}`) })
		// The profiler, here only: never on the public port (HTTP_ADDR).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("METRICS_ADDR: %w", err)
		}
		log.Info("serving /metrics", "addr", ln.Addr().String())
		g.Go(func() error { return serveHTTP(ctx, mux, ln, log) })
	}
	if slices.Contains(roles, "worker") {
		mailer, closeMailer, err := newMailer(cfg, log)
		if err != nil {
			return err
		}
		statusClients := gatewaySet.StatusClients()
		g.Go(func() error {
			defer closeMailer()
			return jobs.RunWorker(ctx, db, rdb, log, orderService, mailer, metricSet, jobs.WorkerConfig{
				Concurrency: cfg.JobConcurrency, LockTTL: cfg.JobLockTTL, WorkerID: cfg.WorkerID,
				MailFrom: cfg.MailFrom, PruneAfter: cfg.PruneAfter, KeepBodiesFor: cfg.DeliveryBodyRetention, ShutdownTimeout: shutdownTimeout,
				ReconcileAfter: cfg.ReconcileAfter, TaskRetention: cfg.TaskRetention,
				Refunds: refundService, Tracer: tracer,
				AlertWebhookURL: cfg.AlertWebhookURL, AlertWebhookKey: cfg.AlertWebhookKey,
				PollPayments: func(ctx context.Context) (int, error) {
					return paymentService.Poll(ctx, statusClients, cfg.PollWithin)
				},
				AskUnknown: func(ctx context.Context) (int, error) {
					rep, err := unknowns.Run(ctx)
					return rep.Due, err
				},
				CatchUp: func(ctx context.Context, askedBy string) error {
					_, err := catchUps.Run(ctx, time.Time{}, models.CatchUpByJob, askedBy)
					return err
				},
			})
		})
	}
	if slices.Contains(roles, "relay") {
		// LISTEN needs a session of its own: the direct URL, never PgBouncer's.
		relay := jobs.NewRelay(db, queue, log, cfg.TaskRetention, cfg.DatabaseListenURL, metricSet)
		relay.Tracer = tracer
		g.Go(func() error { return relay.Run(ctx) })
	}
	if slices.Contains(roles, "scheduler") {
		g.Go(func() error {
			return jobs.NewScheduler(queue, log, jobs.WithCatchUp(jobs.Schedule(cfg.ReconcileAfter), cfg.CatchUpEvery)).Run(ctx)
		})
	}
	err = g.Wait()
	log.Info("stopped", "error", err)
	return err
}

// serveHTTP serves until ctx ends, then lets in-flight requests finish.
func serveHTTP(ctx context.Context, h http.Handler, ln net.Listener, log *slog.Logger) error {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down HTTP")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newMailer sends email through SMTP_URL, or logs it when that is unset;
// closeMailer ends the SMTP sessions it keeps open, once the worker has
// stopped.
func newMailer(cfg config.Config, log *slog.Logger) (mailer mail.Mailer, closeMailer func(), err error) {
	if cfg.SMTPURL == "" {
		return mail.LogMailer{Log: log}, func() {}, nil
	}
	s, err := mail.NewSMTP(cfg.SMTPURL)
	if err != nil {
		return nil, nil, fmt.Errorf("SMTP_URL: %w", err)
	}
	return s, s.Close, nil
}

func parseRoles(s string) ([]string, error) {
	var roles []string
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if !slices.Contains(knownRoles, r) {
			return nil, fmt.Errorf("--roles: unknown role %q (known: %s)", r, strings.Join(knownRoles, ", "))
		}
		roles = append(roles, r)
	}
	return roles, nil
}

// configureGateways builds the gateways from cfg, the same way for every
// command that asks them (serve, catch-up): where the sandbox gateway
// runs, a gateway whose API it emulates is asked at the sandbox's
// address, sandboxURL — SANDBOX_CALLBACK_URL, or webAddr, where the web
// role of this environment listens — so that `sekali catch-up` with
// serve's environment asks the emulation serve answers as, never the
// gateway's own sandbox. sandboxURL is "" without the sandbox gateway.
func configureGateways(cfg config.Config, getenv func(string) string, webAddr string) (set gateways.Set, sandboxURL string, err error) {
	if cfg.SandboxGateway {
		sandboxURL = callbackURL(cfg, webAddr)
	}
	set, err = gateways.Configure(config.Env{Config: cfg, Getenv: getenv, SandboxURL: sandboxURL})
	return set, sandboxURL, err
}

// callbackURL is where the sandbox gateway sends its callbacks:
// SANDBOX_CALLBACK_URL, or the web role's address (host:port; a
// wildcard host is this machine).
func callbackURL(cfg config.Config, webAddr string) string {
	if cfg.SandboxCallbackURL != "" {
		return strings.TrimSuffix(cfg.SandboxCallbackURL, "/")
	}
	host, port, _ := net.SplitHostPort(webAddr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// displayURL turns a listen address into a URL a person can open.
func displayURL(a net.Addr) string {
	host, port, _ := net.SplitHostPort(a.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
