package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sekali/sekali/app/tracing"
)

// TestOffIsFree: with tracing off (no provider, so no span in the
// context) what the callback path calls starts no span, stores no trace
// context and allocates nothing.
func TestOffIsFree(t *testing.T) {
	tp, shutdown, err := tracing.Setup(context.Background(), tracing.Config{}, "web")
	if err != nil || tp != nil {
		t.Fatalf("Setup with nothing set = %v, %v; want no provider", tp, err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if allocs := testing.AllocsPerRun(100, func() { offPath(ctx) }); allocs != 0 {
		t.Errorf("the off path allocates %v times per callback; want 0", allocs)
	}
	if _, span := tracing.Start(ctx, "x"); span.IsRecording() || span.SpanContext().IsValid() {
		t.Errorf("Start without a trace made a span")
	}
}

// orderID is a run-time string, as the callback path's attributes are.
var orderID = "ORD-01JTRACE"

// offPath is what one callback's path calls of this package when
// tracing is off: TraceID (its delivery row), the pipeline's and the
// outbox's spans with their attributes, and Traceparent (its outbox
// rows).
func offPath(ctx context.Context) {
	_ = tracing.TraceID(ctx)
	ctx, apply := tracing.Start(ctx, "payments.apply", attribute.String("sekali.provider", "sandbox"),
		attribute.String("sekali.order_id", orderID))
	ctx, add := tracing.Start(ctx, "outbox.add", attribute.Int("sekali.outbox.rows", 2))
	_ = tracing.Traceparent(ctx)
	tracing.End(add, nil)
	tracing.End(apply, nil)
}

// TestTraceparentRoundTrip: a traceparent written in one process joins
// the next one's spans to the same trace, as children of the span that
// wrote it; an unsampled trace writes none.
func TestTraceparentRoundTrip(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := tracing.NewProvider(sdktrace.NewSimpleSpanProcessor(spans), "", "test", 1)
	ctx, root := tp.Tracer("test").Start(context.Background(), "root")
	_, child := tracing.Start(ctx, "child")
	tracing.End(child, errors.New("boom"))
	tp2 := tracing.NewProvider(sdktrace.NewSimpleSpanProcessor(spans), "", "test", 1)
	_, next := tp2.Tracer("test").Start(tracing.Join(context.Background(), tracing.Traceparent(ctx)), "next")
	next.End()
	root.End()

	got := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		got[s.Name] = s
	}
	if got["child"].Parent.SpanID() != got["root"].SpanContext.SpanID() || got["child"].Status.Code != codes.Error {
		t.Errorf("child: parent %s status %v; want root's span and an error", got["child"].Parent.SpanID(), got["child"].Status)
	}
	if got["next"].SpanContext.TraceID() != got["root"].SpanContext.TraceID() || got["next"].Parent.SpanID() != got["root"].SpanContext.SpanID() {
		t.Errorf("next span is in trace %s under %s; want root's trace, under root", got["next"].SpanContext.TraceID(), got["next"].Parent.SpanID())
	}
	if tracing.TraceID(ctx) != got["root"].SpanContext.TraceID().String() {
		t.Errorf("TraceID = %q; want root's", tracing.TraceID(ctx))
	}

	never := tracing.NewProvider(sdktrace.NewSimpleSpanProcessor(spans), "", "test", 0)
	ctx, span := never.Tracer("test").Start(context.Background(), "unsampled")
	defer span.End()
	if tp := tracing.Traceparent(ctx); tp != "" || tracing.TraceID(ctx) != "" {
		t.Errorf("an unsampled trace gives traceparent %q and trace id %q; want none", tp, tracing.TraceID(ctx))
	}
	if tracing.TraceID(tracing.Join(context.Background(), "garbage")) != "" {
		t.Errorf("a malformed traceparent joined a trace")
	}
}

// BenchmarkOffPath is what tracing adds to one callback when it is off.
func BenchmarkOffPath(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		offPath(ctx)
	}
}

// TestBoundTraceState: a tracestate is cut to at most
// MaxTraceStateMembers members and MaxTraceStateBytes, members too long
// to keep dropped first, the rest kept from the left.
func TestBoundTraceState(t *testing.T) {
	long := "big=" + strings.Repeat("x", tracing.MaxTraceStateMember)
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("k%d=v", i))
	}
	wide := strings.Repeat("w", 120)
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"a=1, b=2", "a=1,b=2"},
		{long + ",a=1", "a=1"},
		{strings.Join(many, ","), strings.Join(many[:tracing.MaxTraceStateMembers], ",")},
		{"a=" + wide + ",b=" + wide + ",c=" + wide, "a=" + wide + ",b=" + wide},
	} {
		got := tracing.BoundTraceState(c.in)
		if got != c.want {
			t.Errorf("BoundTraceState(%.40q…) = %q; want %q", c.in, got, c.want)
		}
		if len(got) > tracing.MaxTraceStateBytes {
			t.Errorf("BoundTraceState kept %d bytes", len(got))
		}
	}
}
