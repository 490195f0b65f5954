package config

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/sekali/sekali/app/tracing"
)

// tracing reads the standard OTEL_* variables of the OpenTelemetry SDK
// that Sekali honours (docs/operations.md#tracing). Unset, tracing is
// off and costs nothing.
func (r *reader) tracing() tracing.Config {
	c := tracing.Config{
		Exporter:    r.choice("OTEL_TRACES_EXPORTER", "", "", "otlp", "none"),
		Endpoint:    r.otlpEndpoint(),
		ServiceName: r.str("OTEL_SERVICE_NAME", "sekali"),
		SampleRatio: 1,
	}
	if r.boolean("OTEL_SDK_DISABLED", false) {
		c.Exporter = "none"
	}
	if c.Exporter == "otlp" && c.Endpoint == "" {
		r.fail("OTEL_TRACES_EXPORTER", "otlp needs OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)")
	}
	// Only OTLP over HTTP is built in: it needs no gRPC stack.
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		r.choice(name, "http/protobuf", "http/protobuf")
	}
	if v := r.str("OTEL_TRACES_SAMPLER_ARG", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			r.fail("OTEL_TRACES_SAMPLER_ARG", "%q is not a ratio from 0 to 1", v)
		} else {
			c.SampleRatio = f
		}
	}
	// Whose traceparent a request follows: nobody's unless named.
	if !strings.EqualFold(r.str("TRACEPARENT_FROM", "none"), "none") {
		c.ParentsFrom = r.networks("TRACEPARENT_FROM")
	}
	h, err := tracing.ParseHeaders(r.getenv("OTEL_EXPORTER_OTLP_HEADERS"))
	if err != nil {
		r.fail("OTEL_EXPORTER_OTLP_HEADERS", "%v", err) // never the value: it holds keys
	}
	c.Headers = h
	return c
}

// otlpEndpoint is the URL traces are sent to: the traces endpoint as
// given, or the base endpoint with /v1/traces, as the OTLP exporter
// specification says.
func (r *reader) otlpEndpoint() string {
	if v := r.optionalURL("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http", "https"); v != "" {
		return v
	}
	if v := r.optionalURL("OTEL_EXPORTER_OTLP_ENDPOINT", "http", "https"); v != "" {
		return strings.TrimSuffix(v, "/") + "/v1/traces"
	}
	return ""
}

// tracingLog is the tracing settings as LogValue shows them: the
// headers only counted.
func tracingLog(c tracing.Config) slog.Attr {
	return slog.Group("otel", slog.Bool("on", c.On()), slog.String("endpoint", redactURL(c.Endpoint)),
		slog.String("service_name", c.ServiceName), slog.Float64("sample_ratio", c.SampleRatio),
		slog.String("traceparent_from", fmt.Sprint(c.ParentsFrom)), slog.Int("headers", len(c.Headers)))
}
