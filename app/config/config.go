// Package config reads Sekali's configuration from environment variables.
// Every variable has a default that matches docker-compose.yml and a stock
// local setup; a bad value stops start-up with a message naming the variable.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sekali/sekali/app/stdwebhooks"
)

// Defaults. DevSandboxSecret is public on purpose: it is for local use only,
// and it is the one secret that is ever printed (with a warning).
const (
	DefaultDatabaseURL    = "postgres://postgres:postgres@127.0.0.1:5432/sekali?sslmode=disable"
	DefaultDBMaxConns     = 20
	DefaultRedisURL       = "redis://127.0.0.1:6379/0"
	DefaultHTTPAddr       = ":8080"
	DefaultMetricsAddr    = ":9090"
	DevSandboxSecret      = "whsec_c2VrYWxpLWRldmVsb3BtZW50LXdlYmhvb2stc2VjcmV0"
	DefaultOrderTTL       = 15 * time.Minute
	DefaultAdminEmail     = "admin@example.com"
	DefaultRequestTimeout = 10 * time.Second
	DefaultTaskRetention  = 72 * time.Hour
	DefaultJobLockTTL     = 30 * time.Second
	DefaultConcurrency    = 10
	DefaultPruneAfter     = 30 * 24 * time.Hour
	DefaultMailFrom       = "Sekali <shop@example.com>"
)

// Config is everything Sekali reads from its environment.
type Config struct {
	DatabaseURL string // DATABASE_URL
	DBMaxConns  int    // DB_MAX_CONNS
	RedisURL    string // REDIS_URL
	HTTPAddr    string // HTTP_ADDR
	MetricsAddr string // METRICS_ADDR: /metrics of a process without the web role

	// SandboxKeys are the decoded SANDBOX_WEBHOOK_SECRET keys, all active.
	SandboxKeys [][]byte
	// SandboxSecretIsDefault is true when SANDBOX_WEBHOOK_SECRET is unset
	// and the public development secret is in use.
	SandboxSecretIsDefault bool

	OrderTTL       time.Duration // ORDER_TTL
	RequestTimeout time.Duration // REQUEST_TIMEOUT: deadline of one HTTP request, pool wait included

	AdminEmail    string // ADMIN_EMAIL
	AdminPassword string // ADMIN_PASSWORD; empty: seed makes one up and prints it once
	AdminAPIToken string // ADMIN_API_TOKEN; empty: the admin API answers 404
	SMTPURL       string // SMTP_URL; empty: emails are logged, not sent

	MailFrom string // MAIL_FROM: the From address of outbound email

	// Jobs.
	TaskRetention  time.Duration // TASK_RETENTION: how long the queue keeps a finished task's id
	JobLockTTL     time.Duration // JOB_LOCK_TTL: lifetime of a job's lock and lease, refreshed while it runs
	JobConcurrency int           // JOB_CONCURRENCY: jobs one worker runs at once
	PruneAfter     time.Duration // PRUNE_AFTER: age at which audit rows and finished jobs are pruned
	WorkerID       string        // WORKER_ID: this worker's name in job_executions (default host:pid)

	LogLevel slog.Level // LOG_LEVEL: debug, info, warn, error
}

// Load reads the configuration through getenv (os.Getenv in main, a map in
// tests). It reports every bad variable at once.
func Load(getenv func(string) string) (Config, error) {
	r := reader{getenv: getenv}
	c := Config{
		DatabaseURL:    r.url("DATABASE_URL", DefaultDatabaseURL, "postgres", "postgresql"),
		DBMaxConns:     r.positiveInt("DB_MAX_CONNS", DefaultDBMaxConns),
		RedisURL:       r.url("REDIS_URL", DefaultRedisURL, "redis", "rediss"),
		HTTPAddr:       r.addr("HTTP_ADDR", DefaultHTTPAddr),
		MetricsAddr:    r.addr("METRICS_ADDR", DefaultMetricsAddr),
		OrderTTL:       r.duration("ORDER_TTL", DefaultOrderTTL),
		RequestTimeout: r.duration("REQUEST_TIMEOUT", DefaultRequestTimeout),
		AdminEmail:     r.str("ADMIN_EMAIL", DefaultAdminEmail),
		AdminPassword:  r.str("ADMIN_PASSWORD", ""),
		AdminAPIToken:  r.str("ADMIN_API_TOKEN", ""),
		SMTPURL:        r.optionalURL("SMTP_URL", "smtp", "smtps"),
		MailFrom:       r.str("MAIL_FROM", DefaultMailFrom),
		TaskRetention:  r.duration("TASK_RETENTION", DefaultTaskRetention),
		JobLockTTL:     r.duration("JOB_LOCK_TTL", DefaultJobLockTTL),
		JobConcurrency: r.positiveInt("JOB_CONCURRENCY", DefaultConcurrency),
		PruneAfter:     r.duration("PRUNE_AFTER", DefaultPruneAfter),
		WorkerID:       r.str("WORKER_ID", defaultWorkerID()),
		LogLevel:       r.level("LOG_LEVEL", slog.LevelInfo),
	}
	if c.JobLockTTL < time.Second {
		r.fail("JOB_LOCK_TTL", "%s is too short: a job's lock must live at least 1s", c.JobLockTTL)
	}
	if _, err := mail.ParseAddress(c.MailFrom); err != nil {
		r.fail("MAIL_FROM", "%q is not an email address", c.MailFrom)
	}
	c.SandboxKeys, c.SandboxSecretIsDefault = r.secrets("SANDBOX_WEBHOOK_SECRET", DevSandboxSecret)
	if !strings.Contains(c.AdminEmail, "@") {
		r.fail("ADMIN_EMAIL", "%q is not an email address", c.AdminEmail)
	}
	return c, errors.Join(r.errs...)
}

// LogValue lets a Config be logged whole: secrets are reduced to whether
// they are set, and the password in a URL is masked.
func (c Config) LogValue() slog.Value {
	set := func(s string) string {
		if s == "" {
			return "unset"
		}
		return "set"
	}
	return slog.GroupValue(
		slog.String("database_url", redactURL(c.DatabaseURL)),
		slog.Int("db_max_conns", c.DBMaxConns),
		slog.String("redis_url", redactURL(c.RedisURL)),
		slog.String("http_addr", c.HTTPAddr),
		slog.String("metrics_addr", c.MetricsAddr),
		slog.Int("sandbox_secrets", len(c.SandboxKeys)),
		slog.Bool("sandbox_secret_is_default", c.SandboxSecretIsDefault),
		slog.Duration("order_ttl", c.OrderTTL),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.String("admin_email", c.AdminEmail),
		slog.String("admin_password", set(c.AdminPassword)),
		slog.String("admin_api_token", set(c.AdminAPIToken)),
		slog.String("smtp_url", redactURL(c.SMTPURL)),
		slog.String("mail_from", c.MailFrom),
		slog.Duration("task_retention", c.TaskRetention),
		slog.Duration("job_lock_ttl", c.JobLockTTL),
		slog.Int("job_concurrency", c.JobConcurrency),
		slog.Duration("prune_after", c.PruneAfter),
		slog.String("worker_id", c.WorkerID),
		slog.String("log_level", c.LogLevel.String()),
	)
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "worker"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

func redactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}

// reader collects one error per bad variable.
type reader struct {
	getenv func(string) string
	errs   []error
}

func (r *reader) fail(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
}

func (r *reader) str(name, def string) string {
	if v := strings.TrimSpace(r.getenv(name)); v != "" {
		return v
	}
	return def
}

func (r *reader) positiveInt(name string, def int) int {
	v := r.str(name, strconv.Itoa(def))
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		r.fail(name, "%q is not a positive integer", v)
		return def
	}
	return n
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := r.str(name, def.String())
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(name, "%q is not a positive duration such as 15m or 30s", v)
		return def
	}
	return d
}

func (r *reader) url(name, def string, schemes ...string) string {
	v := r.str(name, def)
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || !slices.Contains(schemes, u.Scheme) {
		r.fail(name, "not a %s://host/... URL", schemes[0])
		return def
	}
	return v
}

func (r *reader) optionalURL(name string, schemes ...string) string {
	if r.str(name, "") == "" {
		return ""
	}
	return r.url(name, "", schemes...)
}

func (r *reader) addr(name, def string) string {
	v := r.str(name, def)
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		r.fail(name, "%q is not a listen address such as :8080 or 127.0.0.1:8080", v)
		return def
	}
	return v
}

func (r *reader) level(name string, def slog.Level) slog.Level {
	v := r.str(name, def.String())
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		r.fail(name, "%q is not one of debug, info, warn, error", v)
		return def
	}
	return l
}

// secrets reads a comma-separated list of whsec_ secrets. The secret text
// never appears in an error.
func (r *reader) secrets(name, def string) (keys [][]byte, isDefault bool) {
	v := r.str(name, "")
	if v == "" {
		v, isDefault = def, true
	}
	for i, s := range strings.Split(v, ",") {
		key, err := stdwebhooks.DecodeSecret(s)
		if err != nil {
			r.fail(name, "secret #%d: %v", i+1, err)
			continue
		}
		keys = append(keys, key)
	}
	return keys, isDefault
}
