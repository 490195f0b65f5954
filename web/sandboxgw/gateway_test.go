package sandboxgw_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// The QA panel's plan: each field checked, with a 422 that says which.
// (The gateway end to end is tested in web/sandbox_test.go and the
// browser test of the shop.) The formats of the other gateways of the
// registry are offered once the sandbox gateway speaks them, after its
// own; lost is the sandbox format's alone (its status endpoint answers
// in it); a failure, and out of order (which sends one after the
// payment), only in a format that can say it. (What each gateway's
// format can say is tested with its sender, app/gateways.)
func TestParsePlan(t *testing.T) {
	t.Parallel()
	g := sandboxgw.New(nil, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
	good, err := g.ParsePlan("paid", "10", "concurrent", "sandbox")
	if err != nil || good.Copies != 10 || good.Outcome != models.EventPaid || good.Mode != sandboxgw.ModeConcurrent {
		t.Fatalf("a good plan: %+v, %v", good, err)
	}
	if _, err := g.ParsePlan("paid", "1", "lost", "sandbox"); err != nil {
		t.Errorf("lost in the sandbox format: %v", err)
	}
	invalid := func(g *sandboxgw.Sandbox, why string, plan ...string) {
		t.Helper()
		if _, err := g.ParsePlan(plan[0], plan[1], plan[2], plan[3]); models.ErrorCode(err) != models.EInvalid {
			t.Errorf("ParsePlan%v (%s) = %v, want invalid_request", plan, why, err)
		}
	}
	invalid(g, "not an outcome the gateway reports", "refunded", "1", "sequential", "sandbox")
	invalid(g, "no copy", "paid", "0", "sequential", "sandbox")
	invalid(g, "too many copies", "paid", "101", "sequential", "sandbox")
	invalid(g, "not a number", "paid", "ten", "sequential", "sandbox")
	invalid(g, "not a mode", "paid", "1", "backwards", "sandbox")
	for _, e := range gateways.All[1:] {
		for _, fails := range []bool{true, false} {
			g := sandboxgw.New(nil, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
			invalid(g, "not spoken", "paid", "1", "sequential", e.Name)
			g.Speak(stubSender{provider: e.Name, fails: fails})
			if f := g.Formats(); !slices.Equal(f, []string{"sandbox", e.Name}) {
				t.Errorf("formats %v, want sandbox first, then %s", f, e.Name)
			}
			if _, err := g.ParsePlan("paid", "3", "concurrent", e.Name); err != nil {
				t.Errorf("a payment in %s's format: %v", e.Name, err)
			}
			invalid(g, "the status endpoint speaks sandbox only", "paid", "1", "lost", e.Name)
			if fails {
				if _, err := g.ParsePlan("failed", "2", "out_of_order", e.Name); err != nil {
					t.Errorf("a failure out of order in %s's format: %v", e.Name, err)
				}
				continue
			}
			invalid(g, "a format without failures", "failed", "1", "sequential", e.Name)
			invalid(g, "out of order sends a failure", "paid", "1", "out_of_order", e.Name)
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
