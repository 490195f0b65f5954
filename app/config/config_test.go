package config_test

import (
	"bytes"
	"encoding/base64"
	"log/slog"
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
	"SMTP_URL", "LOG_LEVEL",
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
		// Literal values from SPEC §8, not the package's constants.
		checks := []struct {
			what      string
			got, want any
		}{
			{"DatabaseURL", c.DatabaseURL, "postgres://postgres:postgres@127.0.0.1:5432/sekali?sslmode=disable"},
			{"DBMaxConns", c.DBMaxConns, 20},
			{"RedisURL", c.RedisURL, "redis://127.0.0.1:6379/0"},
			{"HTTPAddr", c.HTTPAddr, ":8080"},
			{"OrderTTL", c.OrderTTL, 15 * time.Minute},
			{"AdminEmail", c.AdminEmail, "admin@example.com"},
			{"AdminPassword", c.AdminPassword, ""},
			{"AdminAPIToken", c.AdminAPIToken, ""},
			{"SMTPURL", c.SMTPURL, ""},
			{"SandboxSecretIsDefault", c.SandboxSecretIsDefault, true},
			{"len(SandboxKeys)", len(c.SandboxKeys), 1},
			{"LogLevel", c.LogLevel, slog.LevelInfo},
			{"RequestTimeout > 0", c.RequestTimeout > 0, true},
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
		{"SandboxSecretIsDefault", c.SandboxSecretIsDefault, false},
		{"len(SandboxKeys)", len(c.SandboxKeys), 1},
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
		{"DB_MAX_CONNS", "-3", ""},
		{"DB_MAX_CONNS", "abc", ""},
		{"DB_MAX_CONNS", "2.5", ""},
		{"ORDER_TTL", "soon", ""},
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
	)
	sandboxSecret := secret(sandboxKey)
	vars := map[string]string{
		"DATABASE_URL":           "postgres://app:" + dbPassword + "@db.internal:5432/shop",
		"REDIS_URL":              "redis://:" + redisPassword + "@cache.internal:6379/1",
		"SMTP_URL":               "smtp://mailer:" + smtpPassword + "@mail.internal:587",
		"ADMIN_PASSWORD":         adminPassword,
		"ADMIN_API_TOKEN":        apiToken,
		"SANDBOX_WEBHOOK_SECRET": sandboxSecret,
	}
	c, err := config.Load(env(vars))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	secrets := []string{
		adminPassword, apiToken, dbPassword, redisPassword, smtpPassword, sandboxKey, sandboxSecret,
		strings.TrimPrefix(sandboxSecret, "whsec_"), // also how a []byte key is written in JSON
	}
	for name, v := range map[string]any{"value": c, "pointer": &c} {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", v)
		out := buf.String()
		// The line must actually carry the config, or the checks below prove nothing.
		for _, want := range []string{"db.internal", "cache.internal", "mail.internal", "admin_password"} {
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
