package sandboxgw_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// The QA panel's plan: each field checked, with a 422 that says which.
// (The gateway end to end is tested in web/sandbox_test.go and the
// browser test of the shop.)
func TestParsePlan(t *testing.T) {
	t.Parallel()
	g := sandboxgw.New(nil, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
	midtrans, err := gateways.NewSender(midtrans.Name, "SB-Mid-server-PLAN0123456789")
	if err != nil {
		t.Fatal(err)
	}
	xendit, err := gateways.NewSender(xendit.Name, "xnd-callback-token-plan-0123")
	if err != nil {
		t.Fatal(err)
	}
	g.Speak(midtrans)
	g.Speak(xendit)
	if f := g.Formats(); len(f) != 3 || f[0] != "sandbox" {
		t.Errorf("formats %v, want sandbox first, then midtrans and xendit", f)
	}
	if _, err := g.ParsePlan("failed", "2", "out_of_order", "midtrans"); err != nil {
		t.Errorf("a Midtrans failure out of order: %v", err)
	}
	good, err := g.ParsePlan("paid", "10", "concurrent", "sandbox")
	if err != nil || good.Copies != 10 || good.Outcome != models.EventPaid || good.Mode != sandboxgw.ModeConcurrent {
		t.Fatalf("a good plan: %+v, %v", good, err)
	}
	for _, bad := range [][4]string{
		{"refunded", "1", "sequential", "sandbox"},
		{"paid", "0", "sequential", "sandbox"},
		{"paid", "101", "sequential", "sandbox"},
		{"paid", "ten", "sequential", "sandbox"},
		{"paid", "1", "backwards", "sandbox"},
		{"paid", "1", "sequential", "stripe"},   // not configured
		{"paid", "1", "lost", "midtrans"},       // the status endpoint speaks sandbox only
		{"failed", "1", "sequential", "xendit"}, // Xendit has no failed invoice
		{"paid", "1", "out_of_order", "xendit"}, // out of order sends a failure
	} {
		if _, err := g.ParsePlan(bad[0], bad[1], bad[2], bad[3]); models.ErrorCode(err) != models.EInvalid {
			t.Errorf("ParsePlan%v = %v, want invalid_request", bad, err)
		}
	}
}

// Close gives up the retries: a server that stops does not wait out the
// schedule of a delivery nobody will answer. Here the only retry would
// come after an hour; Close must return long before.
func TestCloseStopsRetries(t *testing.T) {
	t.Parallel()
	sekali := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer sekali.Close()
	g := sandboxgw.New(nil, testenv.SandboxKey, sekali.URL, testenv.Logger(t))
	g.Retries = []time.Duration{time.Hour}
	order := &models.Order{ID: "ORD-CLOSE", TotalAmount: 1000, Currency: "IDR"}
	g.Start(order, sandboxgw.Plan{Outcome: models.EventPaid, Copies: 1, Mode: sandboxgw.ModeSequential, Provider: sandbox.Name})
	testenv.Eventually(t, "the first delivery answered 503", func() bool {
		return len(g.Deliveries(order.ID)) == 1
	})

	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testenv.Budget(t)):
		t.Fatal("Close waited for the retry an hour away")
	}
	if d := g.Deliveries(order.ID); len(d) != 1 || d[0].Status != http.StatusServiceUnavailable {
		t.Errorf("deliveries after Close: %+v, want the one 503", d)
	}
}
