package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web"
)

// benchServer is the real handler on a fresh database, without a network
// in between, so the figures are the handler's and the database's.
func benchServer(b *testing.B) (*web.Server, *orders.Service) {
	srv, svc, _ := callbackServer(b, nil)
	return srv, svc
}

// callbackServer is benchServer tracing its requests with tp (nil: off),
// and its database.
func callbackServer(b testing.TB, tp trace.TracerProvider, settings ...func(*config.Config)) (*web.Server, *orders.Service, *gorm.DB) {
	db := testenv.NewDB(b)
	log := slog.New(slog.DiscardHandler)
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	cfg.SandboxKeys = [][]byte{testenv.SandboxKey}
	for _, set := range settings {
		set(&cfg)
	}
	orderService := orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{})
	paymentService := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider(cfg.SandboxKeys))
	paymentService.KeepBodies = cfg.DeliveryBodyRetention > 0 // as serve.go sets it: bodies are kept by default
	b.Cleanup(paymentService.Close)
	srv := web.NewServer(log, cfg, web.Deps{
		Orders:   orderService,
		Payments: paymentService,
		Keys:     idempotency.New(db, time.Now, cfg.RequestTimeout),
		Tracer:   tp,
	})
	testenv.MustCreateProduct(b, db, "BENCH", 1000, 1_000_000_000)
	return srv, orderService, db
}

func newOrders(b testing.TB, svc *orders.Service, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		o, err := svc.Create(context.Background(), orders.CreateRequest{
			CustomerEmail: "bench@example.com", Items: []orders.ItemRequest{{SKU: "BENCH", Qty: 1}},
		})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = o.ID
	}
	return ids
}

func deliver(b testing.TB, srv http.Handler, eventID string, body []byte, want string) {
	deliverWith(b, srv, eventID, body, want, nil)
}

// deliverWith is deliver with header's fields added (a traceparent).
func deliverWith(b testing.TB, srv http.Handler, eventID string, body []byte, want string, header http.Header) {
	req := httptest.NewRequest("POST", "/callbacks/sandbox", bytesReader(body))
	req.Header = testenv.SandboxHeaders(eventID, body, time.Now())
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != 200 || !contains(rec.Body.String(), `"result":"`+want+`"`) {
		b.Fatalf("delivery %s: %d %s", eventID, rec.Code, rec.Body)
	}
}

// BenchmarkCallbackNewEvent is one first delivery of a paid event: the
// whole reserve-and-apply transaction.
func BenchmarkCallbackNewEvent(b *testing.B) {
	srv, svc := benchServer(b)
	ids := newOrders(b, svc, b.N)
	bodies := make([][]byte, b.N)
	for i, id := range ids {
		bodies[i] = testenv.SandboxBody(id, "tx-"+id, models.EventPaid, 1000)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		deliver(b, srv, fmt.Sprintf("evt_new_%d", i), bodies[i], "processed")
	}
}

// BenchmarkCallbackDuplicate is a repeated delivery of an applied event.
func BenchmarkCallbackDuplicate(b *testing.B) {
	srv, svc := benchServer(b)
	id := newOrders(b, svc, 1)[0]
	body := testenv.SandboxBody(id, "tx-dup", models.EventPaid, 1000)
	deliver(b, srv, "evt_dup", body, "processed")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		deliver(b, srv, "evt_dup", body, "duplicate")
	}
}
