package config_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/config"
)

// TestLoadTracing reads the OTEL_* variables: unset is off; an endpoint
// turns OTLP on, the base URL getting the traces path; the traces
// endpoint is taken as it is; none and OTEL_SDK_DISABLED turn it off.
func TestLoadTracing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		env      map[string]string
		on       bool
		endpoint string
	}{
		{"unset", nil, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318/"}, true, "http://jaeger:4318/v1/traces"},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b.example/otlp/traces"}, true, "https://b.example/otlp/traces"},
		{"none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318", "OTEL_TRACES_EXPORTER": "none"}, false, "http://jaeger:4318/v1/traces"},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318", "OTEL_SDK_DISABLED": "true"}, false, "http://jaeger:4318/v1/traces"},
	} {
		cfg, err := config.Load(env(c.env))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if cfg.Tracing.On() != c.on || cfg.Tracing.Endpoint != c.endpoint {
			t.Errorf("%s: on %v endpoint %q; want %v %q", c.name, cfg.Tracing.On(), cfg.Tracing.Endpoint, c.on, c.endpoint)
		}
		if cfg.Tracing.ServiceName != "sekali" || cfg.Tracing.SampleRatio != 1 || cfg.Tracing.ParentsFrom != nil {
			t.Errorf("%s: service %q ratio %v parents from %v; want sekali, 1 and nobody", c.name,
				cfg.Tracing.ServiceName, cfg.Tracing.SampleRatio, cfg.Tracing.ParentsFrom)
		}
	}
	cfg, err := config.Load(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SERVICE_NAME": "shop",
		"OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%3Dcret, x-team = pay",
		"TRACEPARENT_FROM": "10.1.0.0/16, 192.0.2.9"}))
	if err != nil {
		t.Fatal(err)
	}
	if tr := cfg.Tracing; tr.ServiceName != "shop" || tr.SampleRatio != 0.25 || tr.Headers["api-key"] != "s=cret" || tr.Headers["x-team"] != "pay" ||
		fmt.Sprint(tr.ParentsFrom) != "[10.1.0.0/16 192.0.2.9/32]" {
		t.Errorf("tracing %+v; want service shop, ratio 0.25, both headers decoded and two trusted networks", tr)
	}
	for _, none := range []string{"none", "NONE", " "} {
		if cfg, err := config.Load(env(map[string]string{"TRACEPARENT_FROM": none})); err != nil || cfg.Tracing.ParentsFrom != nil {
			t.Errorf("TRACEPARENT_FROM=%q: %v, %v; want nobody trusted", none, cfg.Tracing.ParentsFrom, err)
		}
	}
}

// TestLoadTracingBadValues: each bad OTEL_* value is named, and the
// headers, which hold keys, are never repeated nor logged.
func TestLoadTracingBadValues(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{
		"OTEL_TRACES_EXPORTER":        "jaeger",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "jaeger:4318",
		"OTEL_TRACES_SAMPLER_ARG":     "2",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_HEADERS":  "secret-without-a-key",
		"TRACEPARENT_FROM":            "all",
	} {
		_, err := config.Load(env(map[string]string{name: value}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v; want an error naming it", name, value, err)
		}
		if name == "OTEL_EXPORTER_OTLP_HEADERS" && strings.Contains(err.Error(), value) {
			t.Errorf("the error repeats the headers: %v", err)
		}
	}
	if _, err := config.Load(env(map[string]string{"OTEL_TRACES_EXPORTER": "otlp"})); err == nil ||
		!strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("otlp without an endpoint: %v; want an error naming the endpoint", err)
	}
	cfg, err := config.Load(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=hunter2"}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", cfg)
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), `"headers":1`) {
		t.Errorf("logged config %s; want the headers counted, never shown", buf.String())
	}
}
