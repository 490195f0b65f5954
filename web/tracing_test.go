package web_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// TestCallbackTraceReachesItsOutboxRows: with tracing on, a paid
// callback is a server span whose children are the pipeline's
// transaction and, under it, the outbox write; from a trusted peer
// (TRACEPARENT_FROM) it joins the trace its traceparent header names,
// keeping a bounded share of its tracestate; each outbox row carries the
// traceparent of the outbox span (what the relay and worker continue),
// and the delivery row keeps the trace id. With tracing off none of it
// is stored.
func TestCallbackTraceReachesItsOutboxRows(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := tracing.NewProvider(sdktrace.NewSimpleSpanProcessor(spans), "", "web", 1)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	srv, svc, db := callbackServer(t, tp, trustPeer)
	id := newOrders(t, svc, 1)[0]

	// The trusted peer's request names a trace of its own: the callback
	// joins it. Its tracestate, the W3C maximum of 32 members, is cut
	// to the bounds.
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	deliverWith(t, srv, "evt_traced", sandboxPaid(id), "processed",
		http.Header{"Traceparent": {caller}, "Tracestate": {bigTraceState()}})

	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byName[s.Name] = s
	}
	request, apply, add := byName["POST /callbacks/:provider"], byName["payments.apply"], byName["outbox.add"]
	if request.Name == "" || apply.Name == "" || add.Name == "" {
		t.Fatalf("spans %v: want the request, payments.apply and outbox.add", names(spans.GetSpans()))
	}
	traceID := request.SpanContext.TraceID()
	if traceID.String() != "0af7651916cd43dd8448eb211c80319c" || request.Parent.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("request span in trace %s under %s; want the caller's trace and span", traceID, request.Parent.SpanID())
	}
	for _, s := range spans.GetSpans() {
		if ts := s.SpanContext.TraceState(); ts.Len() > tracing.MaxTraceStateMembers || len(ts.String()) > tracing.MaxTraceStateBytes || ts.Len() == 0 {
			t.Errorf("span %s carries a tracestate of %d members, %d bytes; want 1 to %d members, at most %d bytes",
				s.Name, ts.Len(), len(ts.String()), tracing.MaxTraceStateMembers, tracing.MaxTraceStateBytes)
		}
	}
	if request.SpanKind != trace.SpanKindServer {
		t.Errorf("request span kind %s; want server", request.SpanKind)
	}
	for _, link := range []struct{ child, parent tracetest.SpanStub }{{apply, request}, {add, apply}} {
		if link.child.SpanContext.TraceID() != traceID || link.child.Parent.SpanID() != link.parent.SpanContext.SpanID() {
			t.Errorf("%s is under %s of trace %s; want under %s", link.child.Name, link.child.Parent.SpanID(),
				link.child.SpanContext.TraceID(), link.parent.Name)
		}
	}

	var rows []models.OutboxMessage
	db.Where("task_id LIKE ? AND task_type <> ?", "%"+id, jobs.TaskOrderExpire).Find(&rows) // the expiry came with the order
	want := fmt.Sprintf("00-%s-%s-01", traceID, add.SpanContext.SpanID())
	if len(rows) != 2 {
		t.Fatalf("%d outbox rows for %s; want the invoice's and the email's", len(rows), id)
	}
	for _, r := range rows {
		if r.Traceparent == nil || *r.Traceparent != want {
			t.Errorf("outbox row %s traceparent %v; want %s", r.TaskID, r.Traceparent, want)
		}
	}
	var stored string
	db.Raw("SELECT trace_id FROM callback_deliveries WHERE outcome = 'processed'").Scan(&stored)
	if stored != traceID.String() {
		t.Errorf("delivery trace_id %q; want %s", stored, traceID)
	}

	// The span records the answer's status, also when a handler's error
	// decides it (the one error handler answers inside the span).
	if got := statusOf(request); got != http.StatusOK {
		t.Errorf("request span status code %d; want 200", got)
	}
	spans.Reset()
	req := httptest.NewRequest("POST", "/callbacks/sandbox", bytesReader(sandboxPaid(id)))
	req.Header = testenv.SandboxHeaders("evt_forged", []byte("another body"), time.Now())
	srv.ServeHTTP(httptest.NewRecorder(), req)
	if ss := spans.GetSpans(); len(ss) != 1 || statusOf(ss[0]) != http.StatusUnauthorized || ss[0].Status.Code == codes.Error {
		t.Errorf("a forged delivery's spans %v; want the request's alone, 401, not an error of ours", names(ss))
	}

	t.Run("off", func(t *testing.T) {
		t.Parallel()
		srv, svc, db := callbackServer(t, nil)
		id := newOrders(t, svc, 1)[0]
		deliverWith(t, srv, "evt_untraced", sandboxPaid(id), "processed", http.Header{"Traceparent": {caller}})
		if n := count(t, db, "SELECT count(*) FROM outbox_messages WHERE traceparent IS NOT NULL"); n != 0 {
			t.Errorf("%d outbox rows carry a traceparent with tracing off", n)
		}
		if n := count(t, db, "SELECT count(*) FROM callback_deliveries WHERE trace_id <> ''"); n != 0 {
			t.Errorf("%d delivery rows name a trace with tracing off", n)
		}
	})
}

// TestUntrustedTraceparentIsNotFollowed: a traceparent from a peer
// outside TRACEPARENT_FROM (here the test's 192.0.2.1, with 10.0.0.0/8
// trusted and an X-Forwarded-For that names it) is not read. With
// sampling at 0, a hundred requests that say "sampled" (-01), with the
// largest tracestate, export no span; with every trace sampled, a
// refused, unsigned callback's delivery row keeps a trace id of
// Sekali's own, not the caller's, and its span has no parent.
func TestUntrustedTraceparentIsNotFollowed(t *testing.T) {
	t.Parallel()
	const callerTrace = "0af7651916cd43dd8448eb211c80319c"
	caller := http.Header{"Traceparent": {"00-" + callerTrace + "-b7ad6b7169203331-01"},
		"Tracestate": {bigTraceState()}, "X-Forwarded-For": {"10.0.0.1"}}
	trustOther := func(c *config.Config) {
		_, n, _ := net.ParseCIDR("10.0.0.0/8")
		c.Tracing.ParentsFrom = []*net.IPNet{n}
		c.TrustedProxies = []*net.IPNet{n}
	}
	forged := func(srv http.Handler, i int) {
		req := httptest.NewRequest("POST", "/callbacks/sandbox", bytesReader(sandboxPaid("ORD-NONE")))
		req.Header = testenv.SandboxHeaders(fmt.Sprintf("evt_forged_%d", i), []byte("another body"), time.Now())
		maps.Copy(req.Header, caller)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("forged delivery %d: %d %s; want 401", i, rec.Code, rec.Body)
		}
	}

	t.Run("sampling 0", func(t *testing.T) {
		t.Parallel()
		spans := tracetest.NewSpanRecorder()
		tp := tracing.NewProvider(spans, "", "web", 0)
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		srv, _, _ := callbackServer(t, tp, trustOther)
		for i := range 100 {
			forged(srv, i)
		}
		if n := len(spans.Ended()); n != 0 {
			t.Errorf("100 untrusted requests marked sampled exported %d spans at sampling 0; want none", n)
		}
	})

	t.Run("refused keeps its own trace id", func(t *testing.T) {
		t.Parallel()
		spans := tracetest.NewSpanRecorder()
		tp := tracing.NewProvider(spans, "", "web", 1)
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		srv, _, db := callbackServer(t, tp, trustOther)
		forged(srv, 0)
		testenv.Eventually(t, "the refused delivery's row", func() bool {
			return count(t, db, "SELECT count(*) FROM callback_deliveries WHERE response_code = 401") == 1
		})
		var stored string
		db.Raw("SELECT trace_id FROM callback_deliveries WHERE response_code = 401").Scan(&stored)
		if stored == "" || stored == callerTrace {
			t.Errorf("the refused delivery keeps trace id %q (the caller's: %s); want one of Sekali's own", stored, callerTrace)
		}
		ended := spans.Ended()
		if len(ended) != 1 || ended[0].Parent().IsValid() || ended[0].SpanContext().TraceID().String() != stored ||
			ended[0].SpanContext().TraceState().Len() != 0 {
			t.Errorf("spans %d; want one, the row's trace's root, with no tracestate", len(ended))
		}
	})
}

// TestTrustedParentDecidesSampling: a trusted peer's parent keeps its
// sampling decision both ways. Sampling every trace, a request whose
// trusted parent says "not sampled" (-00) exports nothing; the same
// from an untrusted peer is a trace of Sekali's own, sampled.
func TestTrustedParentDecidesSampling(t *testing.T) {
	t.Parallel()
	notSampled := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}}
	for _, tc := range []struct {
		name    string
		trusted bool
		want    int
	}{{"trusted", true, 0}, {"untrusted", false, 1}} {
		spans := tracetest.NewSpanRecorder()
		tp := tracing.NewProvider(spans, "", "web", 1)
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		var settings []func(*config.Config)
		if tc.trusted {
			settings = append(settings, trustPeer)
		}
		srv, _, _ := callbackServer(t, tp, settings...)
		req := httptest.NewRequest("GET", "/healthz", nil)
		maps.Copy(req.Header, notSampled)
		srv.ServeHTTP(httptest.NewRecorder(), req)
		if got := len(spans.Ended()); got != tc.want {
			t.Errorf("%s parent not sampled, sampling every trace: %d spans exported; want %d", tc.name, got, tc.want)
		}
	}
}

// trustPeer trusts the traceparent of httptest's peer, 192.0.2.1.
func trustPeer(c *config.Config) {
	_, n, _ := net.ParseCIDR("192.0.2.1/32")
	c.Tracing.ParentsFrom = []*net.IPNet{n}
}

// bigTraceState is a tracestate header of the W3C's maximum of 32
// members: one too large to keep, then 31 of 36 bytes (1.1 KB in all).
func bigTraceState() string {
	members := []string{"big=" + strings.Repeat("x", tracing.MaxTraceStateMember)}
	for i := range 31 {
		members = append(members, fmt.Sprintf("v%02d=%s", i, strings.Repeat("y", tracing.MaxTraceStateMember/4)))
	}
	return strings.Join(members, ",")
}

func sandboxPaid(orderID string) []byte {
	return testenv.SandboxBody(orderID, "tx-"+orderID, models.EventPaid, 1000)
}

func count(t *testing.T, db *gorm.DB, query string) int64 {
	t.Helper()
	var n int64
	if err := db.Raw(query).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func statusOf(s tracetest.SpanStub) int64 {
	for _, a := range s.Attributes {
		if a.Key == "http.response.status_code" {
			return a.Value.AsInt64()
		}
	}
	return 0
}

func names(ss tracetest.SpanStubs) []string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return n
}

// BenchmarkCallbackTracing is the callback path with tracing off (no
// provider: what an unset OTEL_* gives), on but sampling no trace
// (OTEL_TRACES_SAMPLER_ARG=0), and on (every trace sampled, batched to
// an exporter that drops them: the SDK's own cost, not the network's),
// for a repeated delivery (answered from memory: the path where any
// overhead shows most) and a new paid event (the whole transaction).
// cpu-ns/op is this process's user and system CPU per request.
func BenchmarkCallbackTracing(b *testing.B) {
	modes := []struct {
		name string
		tp   func() *sdktrace.TracerProvider
	}{
		{"off", nil},
		{"unsampled", func() *sdktrace.TracerProvider {
			return tracing.NewProvider(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()), "", "web", 0)
		}},
		{"on", func() *sdktrace.TracerProvider {
			return tracing.NewProvider(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()), "", "web", 1)
		}},
	}
	for _, path := range []string{"duplicate", "new"} {
		for _, m := range modes {
			b.Run(path+"/"+m.name, func(b *testing.B) {
				var tp trace.TracerProvider
				if m.tp != nil {
					sdk := m.tp()
					b.Cleanup(func() { sdk.Shutdown(context.Background()) })
					tp = sdk
				}
				srv, svc, _ := callbackServer(b, tp)
				var bodies [][]byte
				var events []string
				if path == "duplicate" {
					id := newOrders(b, svc, 1)[0]
					deliver(b, srv, "evt_dup", sandboxPaid(id), "processed")
					bodies, events = [][]byte{sandboxPaid(id)}, []string{"evt_dup"}
				} else {
					for i, id := range newOrders(b, svc, b.N) {
						bodies, events = append(bodies, sandboxPaid(id)), append(events, fmt.Sprintf("evt_new_%d", i))
					}
				}
				want := map[string]string{"duplicate": "duplicate", "new": "processed"}[path]
				b.ReportAllocs()
				cpu := cpuTime()
				b.ResetTimer()
				for i := range b.N {
					j := i % len(bodies)
					deliver(b, srv, events[j], bodies[j], want)
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the user and system CPU this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
