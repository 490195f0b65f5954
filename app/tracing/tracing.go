// Package tracing is Sekali's OpenTelemetry: the tracer provider the OTEL_*
// settings ask for (a no-op one when they ask for none), spans that
// follow the provider of the span they start under, and the W3C
// traceparent that carries a trace through an outbox row and a task.
//
// No global provider is set: the roles that start traces (the HTTP
// server, the relay, the worker) are handed one, and every span below
// them is started from the provider of its parent span, found in the
// context. With tracing off the context holds no span, and each Start is
// a context lookup that returns a no-op span.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of Sekali's own spans.
const Scope = "github.com/sekali/sekali"

// Config is what the OTEL_* settings ask for (app/config reads them).
type Config struct {
	// Exporter is OTEL_TRACES_EXPORTER: "otlp" or "none". Empty means
	// otlp when an endpoint is set, else none.
	Exporter string
	// Endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (a full URL, used as
	// is) or OTEL_EXPORTER_OTLP_ENDPOINT (a base URL; /v1/traces is
	// added), as the OTLP specification says.
	Endpoint string
	// ServiceName is OTEL_SERVICE_NAME; "sekali" when empty.
	ServiceName string
	// SampleRatio is OTEL_TRACES_SAMPLER_ARG, the share of the traces
	// Sekali starts that are sampled: 1 samples every trace. A request
	// starts one unless its peer is in ParentsFrom.
	SampleRatio float64
	// ParentsFrom is TRACEPARENT_FROM: the networks of the peers whose
	// traceparent a request follows, sampling decision included (a
	// proxy or a service of the operator's). None by default: every
	// request starts a trace of Sekali's own.
	ParentsFrom []*net.IPNet
	// Headers are OTEL_EXPORTER_OTLP_HEADERS (an API key of a hosted
	// collector): sent, never logged.
	Headers map[string]string
}

// On says whether c asks for traces to be exported.
func (c Config) On() bool {
	return c.Exporter == "otlp" || (c.Exporter == "" && c.Endpoint != "")
}

// Setup returns the tracer provider c asks for, and the function that
// flushes and stops it. With tracing off the provider is nil — every
// role takes nil for "start no traces" — and shutdown does nothing. role names the process's part (web, worker,
// relay, all) on every span, as service.instance.role.
func Setup(ctx context.Context, c Config, role string) (trace.TracerProvider, func(context.Context) error, error) {
	if !c.On() {
		return nil, func(context.Context) error { return nil }, nil
	}
	if c.Endpoint == "" {
		return nil, nil, errors.New("tracing: OTEL_TRACES_EXPORTER=otlp needs OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(c.Endpoint)}
	if len(c.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(c.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	tp := NewProvider(sdktrace.NewBatchSpanProcessor(exp), c.ServiceName, role, c.SampleRatio)
	return tp, tp.Shutdown, nil
}

// NewProvider is an SDK provider that hands spans to sp, named
// serviceName (or "sekali"), sampling ratio of the traces it starts and
// every trace a sampled parent started. A parent is only ever one of
// Sekali's own (an outbox row, a task header) or a trusted peer's
// (ExtractTrusted): a request from anyone else starts a trace, so the
// ratio decides. Tests give it an in-memory exporter.
func NewProvider(sp sdktrace.SpanProcessor, serviceName, role string, ratio float64) *sdktrace.TracerProvider {
	if serviceName == "" {
		serviceName = "sekali"
	}
	res := resource.NewSchemaless(semconv.ServiceName(serviceName), attribute.String("sekali.role", role))
	return sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
}

// Start starts a span named name under the span in ctx, from that span's
// provider: a no-op span when ctx holds none (tracing off, or a caller
// that started no trace).
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, parent // nothing to join: no allocation, no span
	}
	// A copy, so that attrs does not escape: with tracing off the
	// caller's attributes then cost no allocation.
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceID is the id of the trace ctx is in, as 32 hex digits; "" when it
// is in none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

var w3c = propagation.TraceContext{}

// Traceparent is the W3C traceparent of the span in ctx, to carry the
// trace to another process (an outbox row, a task header); "" when ctx
// is in no sampled trace, so nothing is stored with tracing off.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"]
}

// Join returns ctx carrying the remote span that traceparent names, so
// spans started under it join that trace; ctx itself when traceparent is
// empty or malformed (a row written with tracing off).
func Join(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// ExtractTrusted is Join for the headers of a request from a trusted
// peer (Config.ParentsFrom): its traceparent, and its tracestate bounded
// (BoundTraceState). A request from any other peer is not extracted at
// all, so that neither its trace id nor its sampling decision is taken.
func ExtractTrusted(ctx context.Context, h http.Header) context.Context {
	c := propagation.MapCarrier{"traceparent": h.Get("traceparent")}
	if ts := BoundTraceState(h.Get("tracestate")); ts != "" {
		c["tracestate"] = ts
	}
	return w3c.Extract(ctx, c)
}

// A trusted parent's tracestate is copied onto every span of its
// request, so it is bounded: at most MaxTraceStateMembers members of
// at most MaxTraceStateMember bytes each, MaxTraceStateBytes in all.
const (
	MaxTraceStateMembers = 8
	MaxTraceStateMember  = 128
	MaxTraceStateBytes   = 256
)

// BoundTraceState is the tracestate header ts within the bounds above:
// members larger than MaxTraceStateMember are dropped (as the W3C
// specification suggests, they go first), then members from the right
// until the rest fit. Only the first 32 members (the specification's
// maximum) are looked at.
func BoundTraceState(ts string) string {
	var b strings.Builder
	kept := 0
	for i := 0; i < 32 && ts != "" && kept < MaxTraceStateMembers; i++ {
		var m string
		m, ts, _ = strings.Cut(ts, ",")
		m = strings.TrimSpace(m)
		if m == "" || len(m) > MaxTraceStateMember {
			continue
		}
		sep := min(kept, 1) // the comma before every member but the first
		if b.Len()+sep+len(m) > MaxTraceStateBytes {
			break
		}
		if sep > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m)
		kept++
	}
	return b.String()
}

// ParseHeaders reads OTEL_EXPORTER_OTLP_HEADERS: key=value pairs
// separated by commas, values URL-encoded as the specification says.
func ParseHeaders(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	h := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, errors.New("want key=value pairs separated by commas")
		}
		v, err := url.QueryUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		h[k] = v
	}
	return h, nil
}
