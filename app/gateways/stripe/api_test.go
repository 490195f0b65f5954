package stripe

import (
	"bufio"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/models"
)

// The calls Sekali makes to Stripe's API, with the params Sekali builds
// for them, are ones Stripe's OpenAPI spec allows: stripe-mock checks
// each request against the spec and refuses what it does not allow, as
// the last call shows.
func TestAPICallsAcceptedByStripeMock(t *testing.T) {
	t.Parallel()
	mock := stripeMock(t)
	a, err := newAPI("sk_test_mock", mock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	sp, err := sessionParams(gatewaytest.PageRequest("page:ORD-M-1:1"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := a.createSession(ctx, sp)
	if err != nil || cs.ID == "" {
		t.Fatalf("create a Checkout Session: id %q, %v", cs.ID, err)
	}

	r := gatewaycalls.RefundRequest{OrderID: "ORD-M-1", Key: "refund:ORD-M-1:1", Charge: "pi_1", Amount: 50000, Currency: "IDR",
		Reason: "damaged", Attempt: 1}
	re, err := a.createRefund(ctx, createParams(r, 5000000))
	if err != nil || re.ID == "" || re.Charge == nil || re.Charge.Object != "charge" {
		t.Fatalf("create a refund, its charge expanded: id %q, charge %+v, %v", re.ID, re.Charge, err)
	}
	again, err := a.refund(ctx, re.ID, retrieveParams())
	if err != nil || again.Charge == nil || again.Charge.Object != "charge" {
		t.Fatalf("read the refund, its charge expanded: charge %+v, %v", again.Charge, err)
	}
	n := 0
	for re, err := range a.refunds(ctx, listParams("pi_1")) {
		if err != nil {
			t.Fatalf("list the PaymentIntent's refunds: %v", err)
		}
		if re.Charge == nil || re.Charge.Object != "charge" {
			t.Errorf("listed refund %s: charge not expanded", re.ID)
		}
		n++
	}
	if n == 0 {
		t.Error("stripe-mock listed no refund")
	}

	// The status poll's plain requests: the search, then, with no
	// succeeded PaymentIntent in stripe-mock's fixtures, the sessions
	// since the order (its id says when). Its GET /v1/events, read only
	// after a succeeded PaymentIntent, is not reached.
	sc, err := NewStatusClient("sk_test_mock", mock)
	if err != nil {
		t.Fatal(err)
	}
	if ev, found, err := sc.Status(ctx, models.NewOrderID(time.Now())); err != nil {
		t.Errorf("status poll: %+v, %v, %v", ev, found, err)
	}

	bad := createParams(r, 5000000)
	bad.AddExtra("not_a_parameter", "1")
	_, err = a.createRefund(ctx, bad)
	if se := (*stripego.Error)(nil); !errors.As(err, &se) || se.HTTPStatusCode != http.StatusBadRequest {
		t.Errorf("a parameter the spec does not have: %v, want stripe-mock's 400", err)
	}
}

// stripeMock builds stripe-mock (a tool of this module, in go.mod) and
// starts it on free ports; it is stopped when the test ends. Its output
// is shown if the test fails.
func stripeMock(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stripe-mock")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/stripe/stripe-mock").CombinedOutput(); err != nil {
		t.Fatalf("go build stripe-mock: %v\n%s", err, out)
	}
	// HTTPS too on a free port: it listens on 12112 unless told.
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var output strings.Builder
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(addr)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			output.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
				addr <- a
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		cmd.Wait()
		if t.Failed() {
			mu.Lock()
			t.Logf("stripe-mock's output:\n%s", output.String())
			mu.Unlock()
		}
	})
	a, ok := <-addr
	if !ok {
		t.Fatal("stripe-mock ended before it listened")
	}
	return "http://" + a
}

// Catching up's GET /v1/events — delivery_success=false, created[gte],
// types[] of every type Sekali acts on, limit 100 — is a request
// Stripe's OpenAPI spec allows: stripe-mock accepts it.
func TestMissedEventsRequestAcceptedByStripeMock(t *testing.T) {
	t.Parallel()
	sc, err := NewStatusClient("sk_test_mock", stripeMock(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, pages, err := sc.Missed(t.Context(), time.Now().Add(-72*time.Hour)); err != nil || pages < 1 {
		t.Errorf("list the events not delivered: %d pages, %v", pages, err)
	}
	if len(EventTypes) > 20 {
		t.Errorf("%d event types: Stripe's types[] takes at most 20", len(EventTypes))
	}
}
