package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
)

// collectedSpan is one span an OTLP collector received.
type collectedSpan struct {
	Name, Role            string
	TraceID, ID, ParentID string
}

// otlpCollector is an OTLP/HTTP trace receiver: what a Jaeger or an
// OpenTelemetry Collector would be, keeping every span it is sent.
type otlpCollector struct {
	*httptest.Server
	mu    sync.Mutex
	spans []collectedSpan
}

func startCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			t.Errorf("collector: %s %s: not an OTLP trace export", r.Method, r.URL.Path)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, rs := range req.ResourceSpans {
			role := ""
			for _, a := range rs.Resource.Attributes {
				if a.Key == "sekali.role" {
					role = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, collectedSpan{Name: s.Name, Role: role, TraceID: hex.EncodeToString(s.TraceId),
						ID: hex.EncodeToString(s.SpanId), ParentID: hex.EncodeToString(s.ParentSpanId)})
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(nil)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *otlpCollector) collected() []collectedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]collectedSpan(nil), c.spans...)
}

// startRole runs `sekali serve --roles role` on the environment of a
// with OTEL_SERVICE_NAME sekali-role, and returns the function that stops
// it and waits until it has (its last spans sent). The web role sets
// a.URL.
func startRole(t *testing.T, a *testApp, role string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "OTEL_SERVICE_NAME" {
			return "sekali-" + role
		}
		return a.getenv(k)
	}
	outR, outW := io.Pipe()
	logs := logOutput(t)
	go func() {
		done <- run(ctx, []string{"sekali", "serve", "--roles", role}, getenv, outW, logs)
		outW.Close()
	}()
	var once sync.Once
	var err error
	stop = func() {
		once.Do(func() {
			cancel()
			if err = <-done; err != nil {
				t.Errorf("sekali serve --roles %s: %v", role, err)
			}
		})
	}
	t.Cleanup(stop)
	if role == "web" {
		a.URL = servingURL(t, outR, func() error { stop(); return err })
	} else {
		go io.Copy(io.Discard, outR)
	}
	return stop
}

// TestOnePaidOrderIsOneTrace: web, relay and worker run as three
// processes' roles, each exporting its spans over OTLP to one collector.
// The paid callback's request, its transaction and outbox rows, the
// relay's hand-over of each task, and the worker's task runs (the
// guard's claim, effect and fence check, the SMTP send) are one trace,
// each span the child of the one that caused it; the callback's
// delivery row keeps the trace id, and the order's story names it.
func TestOnePaidOrderIsOneTrace(t *testing.T) {
	t.Parallel()
	collector := startCollector(t)
	smtp := testenv.StartSMTP(t)
	const adminToken = "trace-admin-token"
	a := newTestApp(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "SMTP_URL": smtp.URL(), "METRICS_ADDR": "127.0.0.1:0",
		"ADMIN_API_TOKEN": adminToken,
	})
	stopWeb := startRole(t, a, "web")
	stopRelay := startRole(t, a, "relay")
	stopWorker := startRole(t, a, "worker")

	sku := a.newProduct(t, 120000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	a.jobsPay(t, id, 120000)
	testenv.Eventually(t, "the invoice and the sent email of "+id, func() bool {
		return a.count(t, "SELECT count(*) FROM invoices WHERE order_id = ?", id) == 1 &&
			a.count(t, "SELECT count(*) FROM outbound_emails WHERE key = ? AND status = 'sent'", mail.Key(mail.OrderPaid, id)) == 1
	})
	var traceID string
	if err := a.DB.Raw(`SELECT d.trace_id FROM callback_deliveries d JOIN payment_callbacks c ON c.id = d.callback_id
		WHERE c.order_id = ? AND d.outcome = 'processed'`, id).Scan(&traceID).Error; err != nil || len(traceID) != 32 {
		t.Fatalf("the paid delivery's trace_id = %q (%v); want 32 hex digits", traceID, err)
	}
	// The order's story names it.
	r := a.do(t, "GET", "/api/admin/orders/"+id, http.Header{"Authorization": {"Bearer " + adminToken}}, nil)
	if traces, _ := r.JSON["traces"].([]any); r.Status != 200 || len(traces) != 1 || traces[0] != traceID {
		t.Errorf("GET /api/admin/orders/%s: %d, traces %v; want [%s]", id, r.Status, r.JSON["traces"], traceID)
	}
	for _, stop := range []func(){stopWeb, stopRelay, stopWorker} {
		stop() // each sends its buffered spans as it stops
	}
	byID := map[string]collectedSpan{}
	var trace []collectedSpan
	for _, s := range collector.collected() {
		if s.TraceID == traceID {
			trace = append(trace, s)
			byID[s.ID] = s
		}
	}
	for _, s := range trace {
		t.Logf("%-8s %-40s parent %s", s.Role, s.Name, byID[s.ParentID].Name)
	}
	// want: each span of the paid order's trace, the role that made it,
	// and the name of its parent ("" for the root).
	want := []struct{ role, name, parent string }{
		{"web", "POST /callbacks/:provider", ""},
		{"web", "payments.apply", "POST /callbacks/:provider"},
		{"web", "outbox.add", "payments.apply"},
		{"relay", "outbox.dispatch " + jobs.TaskInvoiceGenerate, "outbox.add"},
		{"relay", "outbox.dispatch " + jobs.TaskEmailSend, "outbox.add"},
		{"worker", "task " + jobs.TaskInvoiceGenerate, "outbox.dispatch " + jobs.TaskInvoiceGenerate},
		{"worker", "task " + jobs.TaskEmailSend, "outbox.dispatch " + jobs.TaskEmailSend},
		{"worker", "guard.claim", "task " + jobs.TaskInvoiceGenerate},
		{"worker", "guard.effect", "task " + jobs.TaskInvoiceGenerate},
		{"worker", "guard.claim", "task " + jobs.TaskEmailSend},
		{"worker", "guard.prepare", "task " + jobs.TaskEmailSend},
		{"worker", "guard.fence_check", "guard.prepare"},
		{"worker", "mail.send", "guard.prepare"},
		{"worker", "guard.effect", "task " + jobs.TaskEmailSend},
		{"worker", "guard.fence", "guard.effect"},
	}
	for _, w := range want {
		found := false
		for _, s := range trace {
			parent := ""
			if s.ParentID != "" {
				p, ok := byID[s.ParentID]
				if !ok {
					continue // its parent is in another trace, or was not sent
				}
				parent = p.Name
			}
			if s.Role == w.role && s.Name == w.name && parent == w.parent {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("trace %s has no span %q by the %s role under %q", traceID, w.name, w.role, w.parent)
		}
	}
	roots := 0
	for _, s := range trace {
		if _, ok := byID[s.ParentID]; !ok {
			roots++
		}
	}
	if roots != 1 {
		t.Errorf("trace %s has %d spans without a parent in it; want the request alone", traceID, roots)
	}
}
