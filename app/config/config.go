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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/redisconn"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/models"
)

// Defaults. DevSandboxSecret is public on purpose: it is for local use only,
// and it is the one secret that is ever printed (with a warning).
// DevOrderTokenSecret is public too, and used only where the sandbox
// gateway runs (SANDBOX_GATEWAY=on: development and QA).
const (
	DefaultDatabaseURL    = "postgres://postgres:postgres@127.0.0.1:5432/sekali?sslmode=disable"
	DefaultRedisURL       = "redis://127.0.0.1:6379/0"
	DefaultHTTPAddr       = ":8080"
	DefaultMetricsAddr    = ":9090"
	DevSandboxSecret      = "whsec_c2VrYWxpLWRldmVsb3BtZW50LXdlYmhvb2stc2VjcmV0"
	DevOrderTokenSecret   = "development-order-token-secret-public-never-in-production"
	DefaultOrderTTL       = 15 * time.Minute
	DefaultOrderMaxUnits  = 100
	DefaultOpenPerClient  = 10
	DefaultAdminEmail     = "admin@example.com"
	DefaultRequestTimeout = 10 * time.Second
	DefaultTaskRetention  = 72 * time.Hour
	DefaultJobLockTTL     = 30 * time.Second
	// DefaultIdleInTransaction: as long as a job's lock lives. A process
	// that stops in the middle of a transaction (frozen, swapped out, stuck
	// in a call it should not make there) holds its row locks until
	// PostgreSQL ends its session; every invoice waits for the counter row
	// meanwhile.
	DefaultIdleInTransaction = 30 * time.Second
	DefaultConcurrency       = 10
	DefaultPruneAfter        = 30 * 24 * time.Hour
	DefaultBodyRetention     = 7 * 24 * time.Hour
	DefaultReconcileAfter    = 10 * time.Minute
	DefaultPollWithin        = 5 * time.Minute
	DefaultMailFrom          = "Sekali <shop@example.com>"
	DefaultSessionIdle       = 30 * time.Minute
	DefaultSessionMax        = 12 * time.Hour
	// DefaultRefundApprovalWindow: a day of an order's refunds counts
	// towards REFUND_APPROVAL_ABOVE.
	DefaultRefundApprovalWindow = 24 * time.Hour
	// DefaultPaymentGateway: new payments go to the sandbox gateway's
	// pages unless PAYMENT_GATEWAY names another.
	DefaultPaymentGateway = "sandbox"
)

// CLIENT_IPV6_PREFIX: its default, a /64, is what one ordinary IPv6
// customer is given (RFC 6177), so it is one client. Its least, a /32,
// is what a whole provider is typically allocated: a shorter prefix
// would count every customer of a carrier as one client, so that one of
// them could lock all the others out. 128 counts each address alone.
const (
	DefaultClientIPv6Prefix = 64
	MinClientIPv6Prefix     = 32
)

// DefaultDBMaxConns is DB_MAX_CONNS's default: four connections per core
// of this machine (runtime.NumCPU), and at least four.
//
// Past a few connections per core, more connections do not make
// PostgreSQL commit more: they queue in PostgreSQL instead of in the
// pool, where waiting is cheap, and they stretch every transaction's
// locks. make bench measures the knee: pgbench of one new-event
// callback's SQL at 4, 8, 16 and 32 clients, and the server's new-event
// rate at several pool sizes. On 2 cores pgbench peaked at 8 clients,
// the server was within a few per cent at 8 and 16 connections, and 32
// did worse on both (docs/performance.md). Four per core also leaves
// room in PostgreSQL's max_connections (100) for a few processes. Set
// DB_MAX_CONNS when PostgreSQL runs on other cores than the app, or
// behind PgBouncer (docs/scaling.md).
var DefaultDBMaxConns = defaultDBMaxConns(runtime.NumCPU())

func defaultDBMaxConns(cores int) int { return max(4, 4*cores) }

// Config is everything Sekali reads from its environment.
type Config struct {
	DatabaseURL string // DATABASE_URL
	// DatabaseListenURL (DATABASE_LISTEN_URL, default DATABASE_URL) is a
	// direct connection to PostgreSQL for what needs a session of its own,
	// which a pooler in transaction mode does not keep: the relay's LISTEN
	// and the migrations' advisory lock.
	DatabaseListenURL string
	// DBPgBouncer (DB_PGBOUNCER) says DATABASE_URL goes through PgBouncer
	// in transaction pooling mode: see PoolURL.
	DBPgBouncer bool
	DBMaxConns  int // DB_MAX_CONNS
	// DBIdleInTransaction (DB_IDLE_IN_TRANSACTION_TIMEOUT; 0: off) is how
	// long PostgreSQL lets one of the pool's sessions sit idle inside a
	// transaction before it ends the session: see PoolURL.
	DBIdleInTransaction time.Duration
	RedisURL            string // REDIS_URL: redis://, rediss:// or redis-sentinel:// (see app/redisconn)
	HTTPAddr            string // HTTP_ADDR
	MetricsAddr         string // METRICS_ADDR: /metrics of a process without the web role, or of every process when MetricsPublic is false
	// MetricsPublic serves /metrics on the main port too (METRICS_PUBLIC);
	// false keeps it on METRICS_ADDR only, off the public listener.
	MetricsPublic bool

	// SandboxKeys are the decoded SANDBOX_WEBHOOK_SECRET keys, all active;
	// none (and no /callbacks/sandbox) when it is unset and the sandbox
	// gateway is off.
	SandboxKeys [][]byte
	// SandboxSecretIsDefault is true when SANDBOX_WEBHOOK_SECRET is unset,
	// SANDBOX_GATEWAY is on, and the public development secret is in use.
	SandboxSecretIsDefault bool
	// Each gateway reads its own settings (app/gateways); POLL_WITHIN is
	// how soon before an unpaid order expires the worker asks its gateway
	// about it, when the gateway's notification never came.
	PollWithin time.Duration // POLL_WITHIN
	// PaymentGateway is the gateway new payments go to (PAYMENT_GATEWAY):
	// the shop's Pay asks it for a hosted payment page. Which names there
	// are, and what each needs, is the registry's (gateways.Configure).
	PaymentGateway string
	// PublicURL (PUBLIC_URL) is the shop's address as customers reach it,
	// e.g. https://shop.example.com: the return URL Sekali gives a
	// gateway's hosted page is built from it, so that every press of Pay
	// sends the gateway the same request whichever host name or proxy it
	// came through. Empty: the request's own scheme and Host (development).
	PublicURL string
	// OrderTokenKey (ORDER_TOKEN_SECRET) is the key an order's access
	// token is derived from (an HMAC of the order id), so that a replay of
	// its creation can show the token again without any copy of it being
	// stored. Nil when unset, unless SANDBOX_GATEWAY is on: then
	// DevOrderTokenSecret, and OrderTokenKeyIsDefault is true. The web
	// role needs it (CheckWeb).
	OrderTokenKey          []byte
	OrderTokenKeyIsDefault bool
	// SandboxGateway mounts the pretend payment gateway at /sandbox
	// (SANDBOX_GATEWAY=on): for development and QA, never production.
	SandboxGateway bool
	// SandboxCallbackURL is where the gateway sends its callbacks
	// (SANDBOX_CALLBACK_URL); empty: this server's own address.
	SandboxCallbackURL string

	OrderTTL      time.Duration // ORDER_TTL
	OrderMaxUnits int           // ORDER_MAX_UNITS: units of all items of one order, at most
	// OpenOrdersPerClient (OPEN_ORDERS_PER_CLIENT) caps the unpaid orders
	// one client (ClientIPv6Prefix) may hold at once; 0: no cap (the load
	// tests).
	OpenOrdersPerClient int
	// ClientIPv6Prefix (CLIENT_IPV6_PREFIX) is how many leading bits of
	// an IPv6 address name one client for the per-client limits (open
	// orders, the log-in throttle, the refused-delivery row budget): 64
	// by default. IPv4 clients are counted by address.
	ClientIPv6Prefix int
	// TrustedProxies (TRUSTED_PROXIES) are the proxies whose
	// X-Forwarded-For names the client: comma-separated IPs or CIDRs.
	// None: the client is the connection's peer.
	TrustedProxies []*net.IPNet
	RequestTimeout time.Duration // REQUEST_TIMEOUT: deadline of one HTTP request, pool wait included

	AdminEmail    string // ADMIN_EMAIL
	AdminPassword string // ADMIN_PASSWORD; empty: seed makes one up and prints it once
	AdminAPIToken string // ADMIN_API_TOKEN; empty: the admin API answers 404
	// AdminMFARequired (ADMIN_MFA=required; default optional): an owner
	// without a second factor can do nothing in the console but set one up.
	AdminMFARequired bool
	// RefundApprovalAbove (REFUND_APPROVAL_ABOVE: "IDR:1000000,USD:500",
	// major units) is, per currency, the amount in minor units above
	// which a refund waits for another owner's approval. Unset: none does.
	RefundApprovalAbove map[string]int64
	// RefundApprovalWindow (REFUND_APPROVAL_WINDOW) is how far back what
	// an order asked counts towards RefundApprovalAbove.
	RefundApprovalWindow time.Duration

	// The admin console's sessions.
	SessionIdle     time.Duration // ADMIN_SESSION_IDLE: a session unused this long ends
	SessionLifetime time.Duration // ADMIN_SESSION_LIFETIME: a session ends this long after log-in, used or not
	CookieSecure    bool          // COOKIE_SECURE: send the session cookie over HTTPS only (false for plain HTTP on another host than localhost)
	SMTPURL         string        // SMTP_URL; empty: emails are logged, not sent

	MailFrom string // MAIL_FROM: the From address of outbound email

	// Jobs.
	TaskRetention  time.Duration // TASK_RETENTION: how long the queue keeps a finished task's id
	JobLockTTL     time.Duration // JOB_LOCK_TTL: lifetime of a job's lock and lease, refreshed while it runs
	JobConcurrency int           // JOB_CONCURRENCY: jobs one worker runs at once
	PruneAfter     time.Duration // PRUNE_AFTER: age at which audit rows and finished jobs are pruned
	// DELIVERY_BODY_RETENTION: how long a delivery's body and redacted
	// headers are kept on its row for the console; 0: never kept.
	DeliveryBodyRetention time.Duration
	ReconcileAfter        time.Duration // RECONCILE_AFTER: a dispatched task missing from the queue this long is dispatched again
	WorkerID              string        // WORKER_ID: this worker's name in job_executions (default host:pid)
	// CATCH_UP_EVERY: how often the worker asks the gateways what Sekali
	// missed (app/catchup); 0, the default: never, but by `sekali catch-up`.
	CatchUpEvery time.Duration

	// Operational webhooks (docs/operations.md#operational-webhooks).
	AlertWebhookURL string // ALERT_WEBHOOK_URL: where alerts are POSTed; empty: they are recorded, not sent
	AlertWebhookKey []byte // ALERT_WEBHOOK_SECRET ("whsec_<base64>"): the key alerts are signed with

	LogLevel slog.Level // LOG_LEVEL: debug, info, warn, error
	// Tracing is what the OTEL_* variables ask for; off when unset.
	Tracing tracing.Config
}

// Load reads the configuration through getenv (os.Getenv in main, a map in
// tests). It reports every bad variable at once.
func Load(getenv func(string) string) (Config, error) {
	r := reader{getenv: getenv}
	c := Config{
		DatabaseURL:           r.url("DATABASE_URL", DefaultDatabaseURL, "postgres", "postgresql"),
		DBMaxConns:            r.positiveInt("DB_MAX_CONNS", DefaultDBMaxConns),
		DBPgBouncer:           r.boolean("DB_PGBOUNCER", false),
		DBIdleInTransaction:   r.durationOrOff("DB_IDLE_IN_TRANSACTION_TIMEOUT", DefaultIdleInTransaction),
		RedisURL:              r.redisURL("REDIS_URL", DefaultRedisURL),
		HTTPAddr:              r.addr("HTTP_ADDR", DefaultHTTPAddr),
		MetricsAddr:           r.addr("METRICS_ADDR", DefaultMetricsAddr),
		MetricsPublic:         r.boolean("METRICS_PUBLIC", true),
		OrderTTL:              r.duration("ORDER_TTL", DefaultOrderTTL),
		SandboxGateway:        r.boolean("SANDBOX_GATEWAY", false),
		SandboxCallbackURL:    r.optionalURL("SANDBOX_CALLBACK_URL", "http", "https"),
		PollWithin:            r.duration("POLL_WITHIN", DefaultPollWithin),
		PaymentGateway:        r.str("PAYMENT_GATEWAY", DefaultPaymentGateway),
		PublicURL:             r.publicURL("PUBLIC_URL"),
		OrderMaxUnits:         r.positiveInt("ORDER_MAX_UNITS", DefaultOrderMaxUnits),
		OpenOrdersPerClient:   r.nonNegativeInt("OPEN_ORDERS_PER_CLIENT", DefaultOpenPerClient),
		ClientIPv6Prefix:      r.intBetween("CLIENT_IPV6_PREFIX", DefaultClientIPv6Prefix, MinClientIPv6Prefix, 128),
		TrustedProxies:        r.networks("TRUSTED_PROXIES"),
		RequestTimeout:        r.duration("REQUEST_TIMEOUT", DefaultRequestTimeout),
		AdminEmail:            r.str("ADMIN_EMAIL", DefaultAdminEmail),
		AdminPassword:         r.str("ADMIN_PASSWORD", ""),
		AdminAPIToken:         r.str("ADMIN_API_TOKEN", ""),
		AdminMFARequired:      r.choice("ADMIN_MFA", "optional", "optional", "required") == "required",
		RefundApprovalAbove:   r.amounts("REFUND_APPROVAL_ABOVE"),
		RefundApprovalWindow:  r.duration("REFUND_APPROVAL_WINDOW", DefaultRefundApprovalWindow),
		SessionIdle:           r.duration("ADMIN_SESSION_IDLE", DefaultSessionIdle),
		SessionLifetime:       r.duration("ADMIN_SESSION_LIFETIME", DefaultSessionMax),
		CookieSecure:          r.boolean("COOKIE_SECURE", true),
		SMTPURL:               r.optionalURL("SMTP_URL", "smtp", "smtps"),
		MailFrom:              r.str("MAIL_FROM", DefaultMailFrom),
		TaskRetention:         r.duration("TASK_RETENTION", DefaultTaskRetention),
		JobLockTTL:            r.duration("JOB_LOCK_TTL", DefaultJobLockTTL),
		JobConcurrency:        r.positiveInt("JOB_CONCURRENCY", DefaultConcurrency),
		PruneAfter:            r.duration("PRUNE_AFTER", DefaultPruneAfter),
		DeliveryBodyRetention: r.durationOrOff("DELIVERY_BODY_RETENTION", DefaultBodyRetention),
		ReconcileAfter:        r.duration("RECONCILE_AFTER", DefaultReconcileAfter),
		WorkerID:              r.str("WORKER_ID", defaultWorkerID()),
		CatchUpEvery:          r.offByDefault("CATCH_UP_EVERY", time.Minute),
		LogLevel:              r.level("LOG_LEVEL", slog.LevelInfo),
		Tracing:               r.tracing(),
	}
	c.DatabaseListenURL = r.url("DATABASE_LISTEN_URL", c.DatabaseURL, "postgres", "postgresql")
	c.AlertWebhookURL, c.AlertWebhookKey = r.alertWebhook("ALERT_WEBHOOK_URL", "ALERT_WEBHOOK_SECRET")
	if c.DBPgBouncer {
		r.checkPgBouncer(c)
	}
	if c.JobLockTTL < time.Second {
		r.fail("JOB_LOCK_TTL", "%s is too short: a job's lock must live at least 1s", c.JobLockTTL)
	}
	if _, err := mail.ParseAddress(c.MailFrom); err != nil {
		r.fail("MAIL_FROM", "%q is not an email address", c.MailFrom)
	}
	c.SandboxKeys, c.SandboxSecretIsDefault = r.secrets("SANDBOX_WEBHOOK_SECRET", DevSandboxSecret)
	c.OrderTokenKey, c.OrderTokenKeyIsDefault = r.orderTokenKey("ORDER_TOKEN_SECRET", c.SandboxGateway)
	if c.SandboxSecretIsDefault && !c.SandboxGateway {
		// The development secret is public: it checks sandbox callbacks
		// only where the sandbox gateway runs (development and QA).
		// Elsewhere a sandbox needs a secret of its own, or
		// /callbacks/sandbox is not mounted at all.
		c.SandboxKeys, c.SandboxSecretIsDefault = nil, false
	}
	if !strings.Contains(c.AdminEmail, "@") {
		r.fail("ADMIN_EMAIL", "%q is not an email address", c.AdminEmail)
	}
	return c, errors.Join(r.errs...)
}

// LogValue lets a Config be logged whole: secrets are reduced to whether
// they are set, and the password in a URL is masked.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("database_url", redactURL(c.DatabaseURL)),
		slog.String("database_listen_url", redactURL(c.DatabaseListenURL)),
		slog.Bool("db_pgbouncer", c.DBPgBouncer),
		slog.String("db_idle_in_transaction_timeout", c.DBIdleInTransaction.String()),
		slog.Int("db_max_conns", c.DBMaxConns),
		slog.String("redis_url", redisconn.Redact(c.RedisURL)),
		slog.String("http_addr", c.HTTPAddr),
		slog.String("metrics_addr", c.MetricsAddr),
		slog.Bool("metrics_public", c.MetricsPublic),
		slog.Int("sandbox_secrets", len(c.SandboxKeys)),
		slog.Bool("sandbox_secret_is_default", c.SandboxSecretIsDefault),
		slog.Bool("sandbox_gateway", c.SandboxGateway),
		slog.String("order_token_secret", orderTokenState(c)),
		slog.String("sandbox_callback_url", c.SandboxCallbackURL),
		slog.String("payment_gateway", c.PaymentGateway),
		slog.String("public_url", c.PublicURL),
		slog.String("poll_within", c.PollWithin.String()),
		slog.String("order_ttl", c.OrderTTL.String()),
		slog.Int("order_max_units", c.OrderMaxUnits),
		slog.Int("open_orders_per_client", c.OpenOrdersPerClient),
		slog.Int("client_ipv6_prefix", c.ClientIPv6Prefix),
		slog.String("trusted_proxies", fmt.Sprint(c.TrustedProxies)),
		slog.String("request_timeout", c.RequestTimeout.String()),
		slog.String("admin_email", c.AdminEmail),
		IsSet("admin_password", c.AdminPassword),
		IsSet("admin_api_token", c.AdminAPIToken),
		slog.Bool("admin_mfa_required", c.AdminMFARequired),
		slog.String("admin_session_idle", c.SessionIdle.String()),
		slog.String("admin_session_lifetime", c.SessionLifetime.String()),
		slog.Bool("cookie_secure", c.CookieSecure),
		slog.String("smtp_url", redactURL(c.SMTPURL)),
		slog.String("mail_from", c.MailFrom),
		slog.String("task_retention", c.TaskRetention.String()),
		slog.String("job_lock_ttl", c.JobLockTTL.String()),
		slog.Int("job_concurrency", c.JobConcurrency),
		slog.String("prune_after", c.PruneAfter.String()),
		slog.String("delivery_body_retention", c.DeliveryBodyRetention.String()),
		slog.String("reconcile_after", c.ReconcileAfter.String()),
		slog.Bool("alert_webhook", c.AlertWebhookURL != ""),
		slog.String("worker_id", c.WorkerID),
		slog.String("catch_up_every", c.CatchUpEvery.String()),
		slog.String("log_level", c.LogLevel.String()),
		tracingLog(c.Tracing),
	)
}

func orderTokenState(c Config) string {
	switch {
	case c.OrderTokenKeyIsDefault:
		return "development"
	case len(c.OrderTokenKey) > 0:
		return "set"
	}
	return "unset"
}

// CheckWeb reports what the web role cannot run without: the order
// token secret, which the sandbox's development default stands in for
// only with SANDBOX_GATEWAY=on (never in production). Other roles and
// commands do not derive tokens, and do not need it.
func (c Config) CheckWeb() error {
	if len(c.OrderTokenKey) == 0 {
		return fmt.Errorf("ORDER_TOKEN_SECRET: unset; the web role derives orders' access tokens from it: set %d or more random characters "+
			"(openssl rand -base64 32), the same in every web process", MinOrderTokenSecret)
	}
	return nil
}

// MinOrderTokenSecret is the shortest ORDER_TOKEN_SECRET, in bytes: 32
// random characters hold more than the tokens' 192 bits.
const MinOrderTokenSecret = 32

// orderTokenKey reads the order token secret; its text never appears in
// an error. Unset, it is the public development secret where the sandbox
// gateway runs (development and QA), else nil.
func (r *reader) orderTokenKey(name string, sandbox bool) (key []byte, isDefault bool) {
	v := r.str(name, "")
	switch {
	case v == "" && sandbox:
		return []byte(DevOrderTokenSecret), true
	case v == "":
		return nil, false
	case len(v) < MinOrderTokenSecret:
		r.fail(name, "%d characters is too short: set %d or more random characters (openssl rand -base64 32)", len(v), MinOrderTokenSecret)
		return nil, false
	}
	return []byte(v), false
}

// PoolURL is the URL the connection pool opens: DATABASE_URL with two
// defaults (a parameter the URL names itself is kept).
//
// idle_in_transaction_session_timeout (DB_IDLE_IN_TRANSACTION_TIMEOUT):
// PostgreSQL ends a session that sits idle inside a transaction that long,
// which rolls the transaction back and lets its row locks go. Without it a
// process that stops mid-transaction (SIGSTOP, a VM paused, a swap storm)
// holds its locks until it runs again, and every transaction that needs
// one of those rows waits. pgx sends it as a startup parameter, which
// PgBouncer refuses: with DB_PGBOUNCER set it on the role instead
// (docs/scaling.md).
//
// With DB_PGBOUNCER, pgx's default_query_exec_mode=exec. pgx's default
// prepares each statement once per connection under a name and reuses it;
// behind PgBouncer in transaction mode the next transaction may run on
// another server connection, where that name is unknown or means something
// else. In exec mode every statement goes unnamed — parse, bind and
// execute in one round trip — so nothing outlives the transaction, while
// the values still travel apart from the SQL (the simple protocol would
// splice them into it on the client).
func (c Config) PoolURL() string {
	u, err := url.Parse(c.DatabaseURL)
	if err != nil { // Load checked it
		return c.DatabaseURL
	}
	q := u.Query()
	if c.DBPgBouncer && q.Get(queryExecMode) == "" {
		q.Set(queryExecMode, "exec")
	}
	if !c.DBPgBouncer && c.DBIdleInTransaction > 0 && q.Get(idleInTransaction) == "" {
		q.Set(idleInTransaction, strconv.FormatInt(c.DBIdleInTransaction.Milliseconds(), 10))
	}
	if len(q) == 0 {
		return c.DatabaseURL
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// idleInTransaction is PostgreSQL's setting, in milliseconds.
const idleInTransaction = "idle_in_transaction_session_timeout"

// queryExecMode is pgx's connection-string parameter for how statements
// are sent.
const queryExecMode = "default_query_exec_mode"

// checkPgBouncer refuses settings that cannot work behind PgBouncer's
// transaction pooling.
func (r *reader) checkPgBouncer(c Config) {
	if c.DatabaseListenURL == c.DatabaseURL { // unset, or set to the pooled URL

		r.fail("DATABASE_LISTEN_URL", "must be a direct connection to PostgreSQL when DB_PGBOUNCER is true: "+
			"the relay's LISTEN and the migrations' lock need a session of their own, which transaction pooling does not keep")
	}
	if u, err := url.Parse(c.DatabaseURL); err == nil {
		switch mode := u.Query().Get(queryExecMode); mode {
		case "", "exec", "simple_protocol", "cache_describe":
		default:
			r.fail("DATABASE_URL", "%s=%s keeps prepared statements across transactions, which PgBouncer's transaction pooling (DB_PGBOUNCER) cannot; use exec or leave it out",
				queryExecMode, mode)
		}
	}
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

// choice reads one of allowed, def when unset.
func (r *reader) choice(name, def string, allowed ...string) string {
	v := r.str(name, def)
	if !slices.Contains(allowed, v) {
		r.fail(name, "%q is not one of %s", v, strings.Join(allowed, ", "))
		return def
	}
	return v
}

func (r *reader) positiveInt(name string, def int) int { return r.intFrom(name, def, 1) }

func (r *reader) nonNegativeInt(name string, def int) int { return r.intFrom(name, def, 0) }

// intFrom reads a whole number of at least least.
func (r *reader) intFrom(name string, def, least int) int {
	v := r.str(name, strconv.Itoa(def))
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		r.fail(name, "%q is not a whole number, %d or more", v, least)
		return def
	}
	return n
}

// intBetween reads a whole number from least to most.
func (r *reader) intBetween(name string, def, least, most int) int {
	v := r.str(name, strconv.Itoa(def))
	n, err := strconv.Atoi(v)
	if err != nil || n < least || n > most {
		r.fail(name, "%q is not a whole number from %d to %d", v, least, most)
		return def
	}
	return n
}

// networks reads comma-separated IPs and CIDRs; an IP is its /32 or /128.
func (r *reader) networks(name string) []*net.IPNet {
	var out []*net.IPNet
	for _, part := range strings.Split(r.str(name, ""), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			if ip := net.ParseIP(part); ip != nil {
				bits := 8 * len(ip.To16())
				if ip.To4() != nil {
					bits = 32
				}
				part += "/" + strconv.Itoa(bits)
			}
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			r.fail(name, "%q is not an IP address or a CIDR range", part)
			continue
		}
		out = append(out, n)
	}
	return out
}

// amounts reads comma-separated CURRENCY:AMOUNT pairs, each amount in
// its currency's major units, as minor units; one pair per currency.
func (r *reader) amounts(name string) map[string]int64 {
	out := map[string]int64{}
	for _, part := range strings.Split(r.str(name, ""), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		cur, text, ok := strings.Cut(part, ":")
		cur, text = strings.TrimSpace(cur), strings.TrimSpace(text)
		if !ok || !models.ValidCurrency(cur) {
			r.fail(name, "%q is not CURRENCY:AMOUNT with a three-letter currency code, such as IDR:1000000", part)
			continue
		}
		if _, dup := out[cur]; dup {
			r.fail(name, "%s is named twice", cur)
			continue
		}
		amount, err := payments.ParseAmount(text, cur)
		if err != nil {
			r.fail(name, "%q is not an amount of %s in major units, such as 1000000 or 500.00 (%v)", text, cur, err)
			continue
		}
		out[cur] = amount
	}
	return out
}

func (r *reader) boolean(name string, def bool) bool {
	v := strings.ToLower(r.str(name, strconv.FormatBool(def)))
	switch v {
	case "on", "yes":
		return true
	case "off", "no":
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, "%q is not one of on, off, true, false", v)
		return def
	}
	return b
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

// durationOrOff reads a positive duration, or 0 for "off".
func (r *reader) durationOrOff(name string, def time.Duration) time.Duration {
	if r.str(name, "") == "0" {
		return 0
	}
	return r.duration(name, def)
}

// offByDefault reads a duration of at least least, or 0 (also when
// unset) for "off".
func (r *reader) offByDefault(name string, least time.Duration) time.Duration {
	if v := r.str(name, ""); v == "" || v == "0" {
		return 0
	}
	d := r.duration(name, 0)
	if d > 0 && d < least {
		r.fail(name, "%s is shorter than %s", d, least)
		return 0
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

func (r *reader) redisURL(name, def string) string {
	v := r.str(name, def)
	if _, err := redisconn.Parse(v); err != nil { // its errors never repeat the URL
		r.fail(name, "%v", err)
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

// publicURL reads an optional http(s)://host[/path] address, without a
// query or fragment, and drops a trailing slash.
func (r *reader) publicURL(name string) string {
	v := r.optionalURL(name, "https", "http")
	if u, err := url.Parse(v); err == nil && (u.RawQuery != "" || u.Fragment != "" || u.User != nil) {
		r.fail(name, "an address without user, query or fragment, e.g. https://shop.example.com")
		return ""
	}
	return strings.TrimRight(v, "/")
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
// alertWebhook reads the alerts' address and the secret they are signed
// with: both or neither, since an unsigned alert cannot be trusted.
func (r *reader) alertWebhook(urlName, secretName string) (string, []byte) {
	u, secret := r.optionalURL(urlName, "https", "http"), r.str(secretName, "")
	switch {
	case u == "" && secret == "":
		return "", nil
	case u == "":
		r.fail(urlName, "is needed with %s", secretName)
		return "", nil
	case secret == "":
		r.fail(secretName, `is needed with %s: "whsec_" followed by base64`, urlName)
		return "", nil
	}
	key, err := stdwebhooks.DecodeSecret(secret)
	if err != nil {
		r.fail(secretName, "%v", err)
		return "", nil
	}
	return u, key
}

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
