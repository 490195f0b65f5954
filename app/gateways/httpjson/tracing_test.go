package httpjson_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/tracing"
)

// TestCallIsASpanOfItsCaller: a call to a gateway's API made inside a
// trace is a client span under the caller's span, named by method and
// host, and the trace context is not sent to the gateway; outside a
// trace no span is made.
func TestCallIsASpanOfItsCaller(t *testing.T) {
	t.Parallel()
	headers := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	spans := tracetest.NewInMemoryExporter()
	tp := tracing.NewProvider(sdktrace.NewSimpleSpanProcessor(spans), "", "worker", 1)
	client := httpjson.NewClient(httpjson.DefaultTimeout)

	ctx, job := tp.Tracer("test").Start(context.Background(), "task refund:send")
	if _, _, err := httpjson.Post(ctx, client, srv.URL+"/v1/refunds", "sk_test", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	job.End()
	if h := <-headers; h.Get("Traceparent") != "" {
		t.Errorf("the gateway was sent traceparent %q", h.Get("Traceparent"))
	}
	var call tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if strings.HasPrefix(s.Name, "gateway ") {
			call = s
		}
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if call.Name != "gateway POST "+host || call.SpanKind != trace.SpanKindClient ||
		call.Parent.SpanID() != job.SpanContext().SpanID() {
		t.Errorf("call span %q kind %s under %s; want gateway POST %s, client, under the job's span", call.Name, call.SpanKind, call.Parent.SpanID(), host)
	}

	spans.Reset()
	if _, _, err := httpjson.Get(context.Background(), client, srv.URL+"/v1/status", "sk_test"); err != nil {
		t.Fatal(err)
	}
	<-headers
	if n := len(spans.GetSpans()); n != 0 {
		t.Errorf("a call outside any trace made %d spans", n)
	}
}
