package config_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/config"
)

// allVars are the variables Load reads; an error must name only the bad ones.
var allVars = []string{
	"DATABASE_URL", "DB_MAX_CONNS", "REDIS_URL", "HTTP_ADDR", "SANDBOX_WEBHOOK_SECRET",
	"ORDER_TTL", "REQUEST_TIMEOUT", "ADMIN_EMAIL", "ADMIN_PASSWORD", "ADMIN_API_TOKEN",
	"SMTP_URL", "LOG_LEVEL", "ADMIN_SESSION_IDLE", "ADMIN_SESSION_LIFETIME", "COOKIE_SECURE",
	"ORDER_MAX_UNITS", "DATABASE_LISTEN_URL", "DB_PGBOUNCER", "OPEN_ORDERS_PER_CLIENT", "TRUSTED_PROXIES",
	"PUBLIC_URL", "CLIENT_IPV6_PREFIX", "ORDER_TOKEN_SECRET", "REFUND_APPROVAL_ABOVE",
	"REFUND_APPROVAL_WINDOW",
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func secret(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	for name, getenv := range map[string]func(string) string{
		"empty": env(nil),
		// Blank counts as unset for every variable with a default.
		"blank": func(k string) string {
			if k == "ADMIN_PASSWORD" || k == "ADMIN_API_TOKEN" {
				return ""
			}
			return " \t"
		},
	} {
		c, err := config.Load(getenv)
		if err != nil {
			t.Fatalf("%s: Load: %v", name, err)
		}
		// Literal values from the configuration table (README.md), not the package's constants.
		checks := []struct {
			what      string
			got, want any
		}{
			{"DatabaseURL", c.DatabaseURL, "postgres://postgres:postgres@127.0.0.1:5432/sekali?sslmode=disable"},
			{"DBMaxConns", c.DBMaxConns, config.DefaultDBMaxConns},
			{"RedisURL", c.RedisURL, "redis://127.0.0.1:6379/0"},
			{"HTTPAddr", c.HTTPAddr, ":8080"},
			{"CatchUpEvery", c.CatchUpEvery, time.Duration(0)},
			{"OrderTTL", c.OrderTTL, 15 * time.Minute},
			{"AdminEmail", c.AdminEmail, "admin@example.com"},
			{"AdminPassword", c.AdminPassword, ""},
			{"AdminAPIToken", c.AdminAPIToken, ""},
			{"PublicURL", c.PublicURL, ""},
			{"SMTPURL", c.SMTPURL, ""},
			{"SandboxSecretIsDefault", c.SandboxSecretIsDefault, false},
			{"len(SandboxKeys)", len(c.SandboxKeys), 0}, // no sandbox without a secret of its own
			{"LogLevel", c.LogLevel, slog.LevelInfo},
			{"RequestTimeout > 0", c.RequestTimeout > 0, true},
			{"SessionIdle", c.SessionIdle, 30 * time.Minute},
			{"SessionLifetime", c.SessionLifetime, 12 * time.Hour},
			{"CookieSecure", c.CookieSecure, true},
			{"OrderMaxUnits", c.OrderMaxUnits, 100},
			{"ClientIPv6Prefix", c.ClientIPv6Prefix, 64},
			{"len(OrderTokenKey)", len(c.OrderTokenKey), 0}, // required by the web role: CheckWeb
			{"OrderTokenKeyIsDefault", c.OrderTokenKeyIsDefault, false},
			{"DatabaseListenURL", c.DatabaseListenURL, c.DatabaseURL},
			{"DBPgBouncer", c.DBPgBouncer, false},
			{"DBIdleInTransaction", c.DBIdleInTransaction, 30 * time.Second},
			{"PoolURL", c.PoolURL(), strings.Replace(c.DatabaseURL, "?", "?idle_in_transaction_session_timeout=30000&", 1)},
			{"PaymentGateway", c.PaymentGateway, "sandbox"}, // which names there are is app/gateways'

		}
		for _, ch := range checks {
			if ch.got != ch.want {
				t.Errorf("%s: %s = %v, want %v", name, ch.what, ch.got, ch.want)
			}
		}
		if len(c.SandboxKeys) == 1 && len(c.SandboxKeys[0]) == 0 {
			t.Errorf("%s: the default sandbox key is empty", name)
		}
	}
}

func TestLoadOverrides(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"DATABASE_URL":           "postgresql://app:pw@db.internal:6432/shop?sslmode=require",
		"DB_MAX_CONNS":           "7",
		"REDIS_URL":              "rediss://cache.internal:6380/3",
		"HTTP_ADDR":              "127.0.0.1:9090",
		"SANDBOX_WEBHOOK_SECRET": secret("rotated-key-1"),
		"ORDER_TTL":              "90s",
		"REQUEST_TIMEOUT":        "3s",
		"ADMIN_EMAIL":            "ops@shop.test",
		"ADMIN_PASSWORD":         "correct horse",
		"ADMIN_API_TOKEN":        "tok-123",
		"SMTP_URL":               "smtp://mailer:pw@mail.internal:587",
		"LOG_LEVEL":              "debug",
		"ADMIN_SESSION_IDLE":     "5m",
		"ADMIN_SESSION_LIFETIME": "1h",
		"COOKIE_SECURE":          "false",
		"ORDER_MAX_UNITS":        "7",
		"DATABASE_LISTEN_URL":    "postgresql://app:pw@db-primary.internal:5432/shop?sslmode=require",
		"DB_PGBOUNCER":           "true",
		"OPEN_ORDERS_PER_CLIENT": "0",
		"TRUSTED_PROXIES":        "10.0.0.0/8, 192.0.2.7",
		"PUBLIC_URL":             "https://shop.example.com/",
		"CLIENT_IPV6_PREFIX":     "56",
		"ORDER_TOKEN_SECRET":     "w2v0bQk1r9Yt3n8ZcXeL4pHsA6uJfD7g",
		"REFUND_APPROVAL_ABOVE":  "IDR:1000000,USD:500",
		"REFUND_APPROVAL_WINDOW": "168h",
	}
	if len(vars) != len(allVars) {
		t.Fatalf("override %d variables, Load reads %d", len(vars), len(allVars))
	}
	c, err := config.Load(env(vars))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"DatabaseURL", c.DatabaseURL, vars["DATABASE_URL"]},
		{"DBMaxConns", c.DBMaxConns, 7},
		{"RedisURL", c.RedisURL, vars["REDIS_URL"]},
		{"HTTPAddr", c.HTTPAddr, "127.0.0.1:9090"},
		{"OrderTTL", c.OrderTTL, 90 * time.Second},
		{"RequestTimeout", c.RequestTimeout, 3 * time.Second},
		{"AdminEmail", c.AdminEmail, "ops@shop.test"},
		{"AdminPassword", c.AdminPassword, "correct horse"},
		{"AdminAPIToken", c.AdminAPIToken, "tok-123"},
		{"SMTPURL", c.SMTPURL, vars["SMTP_URL"]},
		{"LogLevel", c.LogLevel, slog.LevelDebug},
		{"SessionIdle", c.SessionIdle, 5 * time.Minute},
		{"SessionLifetime", c.SessionLifetime, time.Hour},
		{"CookieSecure", c.CookieSecure, false},
		{"OrderMaxUnits", c.OrderMaxUnits, 7},
		{"DatabaseListenURL", c.DatabaseListenURL, vars["DATABASE_LISTEN_URL"]},
		{"DBPgBouncer", c.DBPgBouncer, true},
		{"OpenOrdersPerClient", c.OpenOrdersPerClient, 0},
		{"ClientIPv6Prefix", c.ClientIPv6Prefix, 56},
		{"OrderTokenKey", string(c.OrderTokenKey), vars["ORDER_TOKEN_SECRET"]},
		{"CheckWeb", c.CheckWeb(), nil},
		{"TrustedProxies", fmt.Sprint(c.TrustedProxies), "[10.0.0.0/8 192.0.2.7/32]"},
		{"PublicURL", c.PublicURL, "https://shop.example.com"}, // without the trailing slash
		{"PoolURL", c.PoolURL(), "postgresql://app:pw@db.internal:6432/shop?default_query_exec_mode=exec&sslmode=require"},
		{"SandboxSecretIsDefault", c.SandboxSecretIsDefault, false},
		{"len(SandboxKeys)", len(c.SandboxKeys), 1},
		{"RefundApprovalAbove", fmt.Sprint(c.RefundApprovalAbove), "map[IDR:1000000 USD:50000]"},
		{"RefundApprovalWindow", c.RefundApprovalWindow, 7 * 24 * time.Hour},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
	if len(c.SandboxKeys) == 1 && string(c.SandboxKeys[0]) != "rotated-key-1" {
		t.Errorf("SandboxKeys[0] = %q, want the decoded secret", c.SandboxKeys[0])
	}
}

func TestLoadBadValueNamesTheVariable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		secretText  string // must not appear in the error
	}{
		{"DB_MAX_CONNS", "0", ""},
		{"REFUND_APPROVAL_ABOVE", "1000000", ""},
		{"REFUND_APPROVAL_ABOVE", "idr:1000000", ""},
		{"REFUND_APPROVAL_ABOVE", "IDR:1000000.5", ""}, // the rupiah has no minor unit
		{"REFUND_APPROVAL_ABOVE", "USD:-5", ""},
		{"REFUND_APPROVAL_ABOVE", "USD:500,USD:600", ""},
		{"REFUND_APPROVAL_ABOVE", "USD:", ""},
		{"DB_MAX_CONNS", "-3", ""},
		{"DB_MAX_CONNS", "abc", ""},
		{"DB_MAX_CONNS", "2.5", ""},
		{"ORDER_TTL", "soon", ""},
		{"CATCH_UP_EVERY", "30s", ""}, // shorter than a minute
		{"CATCH_UP_EVERY", "hourly", ""},
		{"ORDER_TTL", "15", ""}, // a unit is required
		{"ORDER_TTL", "-1m", ""},
		{"ORDER_TTL", "0s", ""},
		{"REQUEST_TIMEOUT", "fast", ""},
		{"DATABASE_URL", "mysql://x", ""},
		{"DATABASE_URL", "mysql://root:hunter2@db/x", "hunter2"},
		{"DATABASE_URL", "postgres:///nohost", ""},
		{"DATABASE_URL", "://", ""},
		{"REDIS_URL", "nope", ""},
		{"REDIS_URL", "http://cache:6379", ""},
		{"REDIS_URL", "redis://:hunter2@cache:port/0", "hunter2"},
		{"REDIS_URL", "redis-sentinel://:hunter2@s1:26379,s2:26379/", "hunter2"}, // no master
		{"REDIS_URL", "redis-sentinel://s1:26379,s2/?master=m", ""},
		{"DATABASE_LISTEN_URL", "mysql://x", ""},
		{"DB_PGBOUNCER", "maybe", ""},
		{"HTTP_ADDR", "8080", ""},
		{"HTTP_ADDR", "localhost", ""},
		{"HTTP_ADDR", "127.0.0.1:", ""},
		{"LOG_LEVEL", "loud", ""},
		{"SMTP_URL", "http://x", ""},
		{"SMTP_URL", "http://mailer:s3cr3tSMTP@x", "s3cr3tSMTP"},
		{"SANDBOX_WEBHOOK_SECRET", "notwhsec", "notwhsec"},
		{"SANDBOX_WEBHOOK_SECRET", "whsec_!!notBase64Secret!!", "notBase64Secret"},
		{"SANDBOX_WEBHOOK_SECRET", "whsec_", ""},
		{"SANDBOX_WEBHOOK_SECRET", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{"SANDBOX_WEBHOOK_SECRET", secret("good-one") + ",bad-second-Secret", "bad-second-Secret"},
		{"ADMIN_EMAIL", "nobody", ""},
		{"ADMIN_SESSION_IDLE", "forever", ""},
		{"ADMIN_SESSION_LIFETIME", "0s", ""},
		{"COOKIE_SECURE", "maybe", ""},
		{"ORDER_MAX_UNITS", "0", ""},
		{"OPEN_ORDERS_PER_CLIENT", "-1", ""},
		{"CLIENT_IPV6_PREFIX", "0", ""},
		{"CLIENT_IPV6_PREFIX", "31", ""}, // a whole provider's allocation: one client
		{"CLIENT_IPV6_PREFIX", "129", ""},
		{"CLIENT_IPV6_PREFIX", "/64", ""},
		{"ORDER_TOKEN_SECRET", "shortSecretText", "shortSecretText"},
		{"TRUSTED_PROXIES", "10.0.0.0/33", ""},
		{"TRUSTED_PROXIES", "cdn.example.com", ""},
		{"PUBLIC_URL", "shop.example.com", ""},
		{"PUBLIC_URL", "https://shop.example.com/?from=gateway", ""},
		{"PUBLIC_URL", "https://admin:hunter2@shop.example.com", "hunter2"},
	}
	for _, tt := range tests {
		_, err := config.Load(env(map[string]string{tt.name: tt.value}))
		if err == nil {
			t.Errorf("Load(%s=%q) succeeded, want an error", tt.name, tt.value)
			continue
		}
		msg := err.Error()
		for _, v := range allVars {
			if named := strings.Contains(msg, v); named != (v == tt.name) {
				t.Errorf("Load(%s=%q) error %q: names %s = %v", tt.name, tt.value, msg, v, named)
			}
		}
		if tt.secretText != "" && strings.Contains(msg, tt.secretText) {
			t.Errorf("Load(%s=...) error %q contains the secret text", tt.name, msg)
		}
		if tt.name == "SANDBOX_WEBHOOK_SECRET" && strings.Contains(msg, strings.TrimPrefix(secret("good-one"), "whsec_")) {
			t.Errorf("error %q contains a valid secret", msg)
		}
	}
}

func TestLoadReportsEveryBadVariable(t *testing.T) {
	t.Parallel()
	tests := []map[string]string{
		{"DB_MAX_CONNS": "abc", "ORDER_TTL": "soon"},
		{"DATABASE_URL": "mysql://x", "SANDBOX_WEBHOOK_SECRET": "notwhsec", "ADMIN_EMAIL": "nobody"},
		{"REDIS_URL": "nope", "HTTP_ADDR": "8080", "LOG_LEVEL": "loud", "SMTP_URL": "http://x"},
	}
	for _, vars := range tests {
		_, err := config.Load(env(vars))
		if err == nil {
			t.Errorf("Load(%v) succeeded", vars)
			continue
		}
		for name := range vars {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("Load(%v) error %q does not name %s", vars, err, name)
			}
		}
	}
}

func TestLoadSeveralSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string
		want  []string
	}{
		{secret("k1"), []string{"k1"}},
		{secret("k1") + "," + secret("k2"), []string{"k1", "k2"}},
		{secret("old") + ", " + secret("new") + " ,\t" + secret("newest"), []string{"old", "new", "newest"}},
	}
	for _, tt := range tests {
		c, err := config.Load(env(map[string]string{"SANDBOX_WEBHOOK_SECRET": tt.value}))
		if err != nil {
			t.Errorf("Load(SANDBOX_WEBHOOK_SECRET=%q): %v", tt.value, err)
			continue
		}
		var got []string
		for _, k := range c.SandboxKeys {
			got = append(got, string(k))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("SANDBOX_WEBHOOK_SECRET=%q: keys %q, want %q", tt.value, got, tt.want)
		}
		if c.SandboxSecretIsDefault {
			t.Errorf("SANDBOX_WEBHOOK_SECRET=%q: SandboxSecretIsDefault = true", tt.value)
		}
	}
}

func TestLogValueHidesSecrets(t *testing.T) {
	t.Parallel()
	const (
		adminPassword = "adminPw-7f3a9"
		apiToken      = "apiTok-c41d2"
		dbPassword    = "dbPw-91be7"
		redisPassword = "redisPw-0a5c3"
		smtpPassword  = "smtpPw-e28f6"
		sandboxKey    = "sandbox-key-5d1b8"
		orderTokens   = "order-token-secret-9f8e7d6c5b4a39281"
		alertKey      = "alert-key-3c9d0"
		alertToken    = "alertUrlTok-6b2e1"
	)
	sandboxSecret, alertSecret := secret(sandboxKey), secret(alertKey)
	vars := map[string]string{
		"DATABASE_URL":           "postgres://app:" + dbPassword + "@db.internal:5432/shop",
		"REDIS_URL":              "redis://:" + redisPassword + "@cache.internal:6379/1",
		"SMTP_URL":               "smtp://mailer:" + smtpPassword + "@mail.internal:587",
		"ADMIN_PASSWORD":         adminPassword,
		"ADMIN_API_TOKEN":        apiToken,
		"SANDBOX_WEBHOOK_SECRET": sandboxSecret,
		"ORDER_TOKEN_SECRET":     orderTokens,
		"ALERT_WEBHOOK_URL":      "https://hooks.example.com/in/" + alertToken,
		"ALERT_WEBHOOK_SECRET":   alertSecret,
	}
	c, err := config.Load(env(vars))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	secrets := []string{
		adminPassword, apiToken, dbPassword, redisPassword, smtpPassword, sandboxKey, sandboxSecret,
		orderTokens, alertKey, alertSecret, alertToken, strings.TrimPrefix(alertSecret, "whsec_"),
		base64.StdEncoding.EncodeToString([]byte(orderTokens)), // a []byte in JSON
		strings.TrimPrefix(sandboxSecret, "whsec_"),            // also how a []byte key is written in JSON
	}
	for name, v := range map[string]any{"value": c, "pointer": &c} {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", v)
		out := buf.String()
		// The line must actually carry the config, or the checks below prove nothing.
		for _, want := range []string{"db.internal", "cache.internal", "mail.internal", "admin_password", `"order_token_secret":"set"`,
			`"order_ttl":"15m0s"`} { // durations as people write them, not nanoseconds
			if !strings.Contains(out, want) {
				t.Errorf("%s: log line lacks %q: %s", name, want, out)
			}
		}
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s: log line contains secret %q: %s", name, s, out)
			}
		}
	}
}

// TestLoadAlertWebhook: ALERT_WEBHOOK_URL and ALERT_WEBHOOK_SECRET come
// together or not at all, the secret in the Standard Webhooks form.
func TestLoadAlertWebhook(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(nil))
	if err != nil || c.AlertWebhookURL != "" || c.AlertWebhookKey != nil {
		t.Fatalf("unset: %q %q %v; want alerts not sent", c.AlertWebhookURL, c.AlertWebhookKey, err)
	}
	c, err = config.Load(env(map[string]string{"ALERT_WEBHOOK_URL": "https://ops.example.com/hooks", "ALERT_WEBHOOK_SECRET": secret("k1")}))
	if err != nil || c.AlertWebhookURL != "https://ops.example.com/hooks" || string(c.AlertWebhookKey) != "k1" {
		t.Fatalf("both set: %q %q %v", c.AlertWebhookURL, c.AlertWebhookKey, err)
	}
	for _, vars := range []map[string]string{
		{"ALERT_WEBHOOK_URL": "https://ops.example.com/hooks"},
		{"ALERT_WEBHOOK_SECRET": secret("k1")},
		{"ALERT_WEBHOOK_URL": "https://ops.example.com/hooks", "ALERT_WEBHOOK_SECRET": "plain-secret"},
		{"ALERT_WEBHOOK_URL": "ftp://ops.example.com/hooks", "ALERT_WEBHOOK_SECRET": secret("k1")},
	} {
		if _, err := config.Load(env(vars)); err == nil || !strings.Contains(err.Error(), "ALERT_WEBHOOK_") {
			t.Errorf("Load(%v): %v; want an error naming the variable", vars, err)
		}
	}
}

func TestLoadRedisSentinel(t *testing.T) {
	t.Parallel()
	const u = "redis-sentinel://:sentinelPw-41c@10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/?master=mymaster&db=2&password=primaryPw-9d2"
	c, err := config.Load(env(map[string]string{"REDIS_URL": u}))
	if err != nil || c.RedisURL != u {
		t.Fatalf("Load(REDIS_URL=%s) = %q, %v", u, c.RedisURL, err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", c)
	if out := buf.String(); !strings.Contains(out, "10.0.0.3:26379") || strings.Contains(out, "Pw-") {
		t.Errorf("the log line shows a password, or no Sentinel: %s", out)
	}
	_, err = config.Load(env(map[string]string{"REDIS_URL": "redis-sentinel://10.0.0.1:26379/"}))
	if err == nil || !strings.Contains(err.Error(), "REDIS_URL: redis-sentinel URL: no ?master=name") {
		t.Fatalf("a Sentinel URL without master: %v", err)
	}
}

// DB_PGBOUNCER needs a direct connection for LISTEN and the migrations,
// and refuses an exec mode that prepares named statements.
func TestLoadPgBouncer(t *testing.T) {
	t.Parallel()
	const pooled = "postgres://app@pgbouncer:6432/shop"
	const direct = "postgres://app@db:5432/shop"
	for _, tt := range []struct {
		vars     map[string]string
		err      string // a part of the error; empty: none
		poolURL  string
		listened string
	}{
		{vars: map[string]string{"DB_PGBOUNCER": "true", "DATABASE_URL": pooled, "DATABASE_LISTEN_URL": direct},
			poolURL: pooled + "?default_query_exec_mode=exec", listened: direct},
		{vars: map[string]string{"DB_PGBOUNCER": "true", "DATABASE_URL": pooled + "?default_query_exec_mode=simple_protocol", "DATABASE_LISTEN_URL": direct},
			poolURL: pooled + "?default_query_exec_mode=simple_protocol", listened: direct},
		{vars: map[string]string{"DB_PGBOUNCER": "false", "DATABASE_URL": pooled},
			poolURL: pooled + "?idle_in_transaction_session_timeout=30000", listened: pooled},
		{vars: map[string]string{"DATABASE_URL": pooled, "DB_IDLE_IN_TRANSACTION_TIMEOUT": "0"},
			poolURL: pooled, listened: pooled},
		{vars: map[string]string{"DATABASE_URL": pooled, "DB_IDLE_IN_TRANSACTION_TIMEOUT": "2m"},
			poolURL: pooled + "?idle_in_transaction_session_timeout=120000", listened: pooled},
		{vars: map[string]string{"DATABASE_URL": pooled + "?idle_in_transaction_session_timeout=5000", "DB_IDLE_IN_TRANSACTION_TIMEOUT": "2m"},
			poolURL: pooled + "?idle_in_transaction_session_timeout=5000", listened: pooled + "?idle_in_transaction_session_timeout=5000"},
		{vars: map[string]string{"DATABASE_URL": pooled, "DB_IDLE_IN_TRANSACTION_TIMEOUT": "-1s"},
			err: "DB_IDLE_IN_TRANSACTION_TIMEOUT"},
		{vars: map[string]string{"DB_PGBOUNCER": "true", "DATABASE_URL": pooled},
			err: "DATABASE_LISTEN_URL: must be a direct connection to PostgreSQL when DB_PGBOUNCER is true"},
		{vars: map[string]string{"DB_PGBOUNCER": "true", "DATABASE_URL": pooled, "DATABASE_LISTEN_URL": pooled},
			err: "DATABASE_LISTEN_URL: must be a direct connection"},
		{vars: map[string]string{"DB_PGBOUNCER": "true", "DATABASE_URL": pooled + "?default_query_exec_mode=cache_statement", "DATABASE_LISTEN_URL": direct},
			err: "DATABASE_URL: default_query_exec_mode=cache_statement keeps prepared statements across transactions"},
	} {
		c, err := config.Load(env(tt.vars))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Load(%v) = %v, want an error with %q", tt.vars, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Load(%v): %v", tt.vars, err)
			continue
		}
		if c.PoolURL() != tt.poolURL || c.DatabaseListenURL != tt.listened {
			t.Errorf("Load(%v): PoolURL %q, DatabaseListenURL %q; want %q, %q", tt.vars, c.PoolURL(), c.DatabaseListenURL, tt.poolURL, tt.listened)
		}
	}
}

// The public development secret checks sandbox callbacks only where the
// sandbox gateway runs; a server without it and without a secret of its
// own has no sandbox provider at all.
func TestDevelopmentSecretOnlyWithTheSandboxGateway(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(map[string]string{"SANDBOX_GATEWAY": "on"}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.SandboxSecretIsDefault || len(c.SandboxKeys) != 1 {
		t.Errorf("SANDBOX_GATEWAY=on without a secret: default %v, %d keys; want the development secret", c.SandboxSecretIsDefault, len(c.SandboxKeys))
	}
	c, err = config.Load(env(map[string]string{"SANDBOX_WEBHOOK_SECRET": secret("own")}))
	if err != nil {
		t.Fatal(err)
	}
	if c.SandboxSecretIsDefault || len(c.SandboxKeys) != 1 || string(c.SandboxKeys[0]) != "own" {
		t.Errorf("a secret of its own: default %v, keys %q", c.SandboxSecretIsDefault, c.SandboxKeys)
	}
}

// Order access tokens are derived from ORDER_TOKEN_SECRET, which the web
// role cannot run without: its public development default stands in only
// where the sandbox gateway runs.
func TestOrderTokenSecretRequiredByTheWebRole(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckWeb(); err == nil || !strings.HasPrefix(err.Error(), "ORDER_TOKEN_SECRET: ") {
		t.Errorf("CheckWeb without ORDER_TOKEN_SECRET: %v, want an error naming it", err)
	}
	c, err = config.Load(env(map[string]string{"SANDBOX_GATEWAY": "on"}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.OrderTokenKeyIsDefault || string(c.OrderTokenKey) != config.DevOrderTokenSecret || c.CheckWeb() != nil {
		t.Errorf("SANDBOX_GATEWAY=on without a secret: default %v, CheckWeb %v; want the development secret", c.OrderTokenKeyIsDefault, c.CheckWeb())
	}
	own := strings.Repeat("k", config.MinOrderTokenSecret)
	c, err = config.Load(env(map[string]string{"SANDBOX_GATEWAY": "on", "ORDER_TOKEN_SECRET": own}))
	if err != nil {
		t.Fatal(err)
	}
	if c.OrderTokenKeyIsDefault || string(c.OrderTokenKey) != own {
		t.Errorf("a secret of its own: default %v, key %q", c.OrderTokenKeyIsDefault, c.OrderTokenKey)
	}
}

// TestDefaultDBMaxConnsFollowsCores: the pool's default is four
// connections per core, at least four (docs/performance.md: the knee).
func TestDefaultDBMaxConnsFollowsCores(t *testing.T) {
	if want := max(4, 4*runtime.NumCPU()); config.DefaultDBMaxConns != want {
		t.Fatalf("DefaultDBMaxConns = %d on %d cores, want %d", config.DefaultDBMaxConns, runtime.NumCPU(), want)
	}
}

func TestLoadRefundApprovalAbove(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(map[string]string{"REFUND_APPROVAL_ABOVE": "IDR:1000000, USD:500.50"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"IDR": 1000000, "USD": 50050} // minor units
	if len(c.RefundApprovalAbove) != len(want) || c.RefundApprovalAbove["IDR"] != want["IDR"] || c.RefundApprovalAbove["USD"] != want["USD"] {
		t.Errorf("RefundApprovalAbove = %v, want %v", c.RefundApprovalAbove, want)
	}
	if c, err := config.Load(env(nil)); err != nil || len(c.RefundApprovalAbove) != 0 {
		t.Errorf("unset: %v, %v; want no threshold (off)", c.RefundApprovalAbove, err)
	}
}

// CATCH_UP_EVERY is off unless set, "0" is off, and a period is read.
func TestLoadCatchUpEvery(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"": 0, "0": 0, "6h": 6 * time.Hour, "1m": time.Minute} {
		c, err := config.Load(env(map[string]string{"CATCH_UP_EVERY": v}))
		if err != nil || c.CatchUpEvery != want {
			t.Errorf("CATCH_UP_EVERY=%q: %s, %v; want %s", v, c.CatchUpEvery, err, want)
		}
	}
}
