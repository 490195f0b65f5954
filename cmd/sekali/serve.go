package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/web"
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
	if err := fs.Parse(args); err != nil {
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
	log := newLogger(stderr, cfg.LogLevel)
	log.Info("starting", "roles", roles, "config", cfg)
	if cfg.SandboxSecretIsDefault {
		log.Warn("SANDBOX_WEBHOOK_SECRET is unset: using the public development secret; never use it in production")
		fmt.Fprintf(stdout, "WARNING: sandbox callbacks are checked with the development secret %s\n", config.DevSandboxSecret)
	}

	db, err := store.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns, log)
	if err != nil {
		return err
	}
	defer store.Close(db)
	redisOpts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(redisOpts)
	defer rdb.Close()

	orderService := orders.NewService(db, log, time.Now, cfg.OrderTTL)
	callbacks := payments.NewService(db, log, time.Now, payments.NewSandbox(cfg.SandboxKeys))
	defer callbacks.Close() // after the HTTP server has stopped: writes the queued delivery rows
	queue := asynq.NewClientFromRedisClient(rdb)
	defer queue.Close()
	// The series only this process's database and Redis can answer live
	// in a registry of its own, served beside the global one.
	local := prometheus.NewRegistry()
	local.MustRegister(jobs.NewStats(db), jobs.NewQueueStats(asynq.NewInspectorFromRedisClient(rdb)))

	g, ctx := errgroup.WithContext(ctx)
	if slices.Contains(roles, "web") {
		srv := web.NewServer(log, cfg, web.Deps{
			Orders:    orderService,
			Callbacks: callbacks,
			Keys:      idempotency.New(db, time.Now, cfg.RequestTimeout),
			Products:  catalog.NewService(db),
			Audit:     audit.New(db),
			Metrics:   prometheus.Gatherers{metrics.Registry, local},
			Ready: map[string]func(context.Context) error{
				"database": func(ctx context.Context) error { return store.Ping(ctx, db) },
				"redis":    func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
			},
		})
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("HTTP_ADDR: %w", err)
		}
		fmt.Fprintf(stdout, "Sekali is serving on %s\n", displayURL(ln.Addr()))
		g.Go(func() error { return serveHTTP(ctx, srv, ln, log) })
	}
	if !slices.Contains(roles, "web") {
		// Without the web role nothing serves /metrics: serve it alone.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{metrics.Registry, local}, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"status":"ok"}`) })
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("METRICS_ADDR: %w", err)
		}
		log.Info("serving /metrics", "addr", ln.Addr().String())
		g.Go(func() error { return serveHTTP(ctx, mux, ln, log) })
	}
	if slices.Contains(roles, "worker") {
		sender, err := newSender(cfg, log)
		if err != nil {
			return err
		}
		g.Go(func() error {
			return jobs.RunWorker(ctx, db, rdb, log, orderService, sender, jobs.WorkerConfig{
				Concurrency: cfg.JobConcurrency, LockTTL: cfg.JobLockTTL, WorkerID: cfg.WorkerID,
				MailFrom: cfg.MailFrom, PruneAfter: cfg.PruneAfter, ShutdownTimeout: shutdownTimeout,
			})
		})
	}
	if slices.Contains(roles, "relay") {
		relay := jobs.NewRelay(db, queue, log, cfg.TaskRetention, cfg.DatabaseURL)
		g.Go(func() error { return relay.Run(ctx) })
	}
	if slices.Contains(roles, "scheduler") {
		g.Go(func() error { return jobs.NewScheduler(queue, log, jobs.DefaultPeriodic).Run(ctx) })
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

// newSender sends email through SMTP_URL, or logs it when that is unset.
func newSender(cfg config.Config, log *slog.Logger) (mail.Sender, error) {
	if cfg.SMTPURL == "" {
		return mail.LogSender{Log: log}, nil
	}
	s, err := mail.NewSMTP(cfg.SMTPURL)
	if err != nil {
		return nil, fmt.Errorf("SMTP_URL: %w", err)
	}
	return s, nil
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

// displayURL turns a listen address into a URL a person can open.
func displayURL(a net.Addr) string {
	host, port, _ := net.SplitHostPort(a.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
