package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// TestPaymentPageSurvivesAKillAfterTheGatewayActed: `sekali serve`, a real
// process, asks Stripe (the sandbox gateway's emulation, in this test's
// process) for an order's Checkout Session; the gateway makes it and
// holds its answer, and the process is killed with SIGKILL right then —
// after the gateway acted, before Sekali recorded anything but "sent".
// Restarted, the next Pay repeats the call with the same Idempotency-Key:
// the gateway answers with the session it made, so there is exactly one
// session at the gateway, one done gateway_requests row (two attempts),
// and the audit is green.
func TestPaymentPageSurvivesAKillAfterTheGatewayActed(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a server process and waits out its lease: make test runs it")
	}
	t.Parallel()
	const key = "sk_test_sekali_kill"
	bin := sekaliBinary(t)
	dbURL := testenv.NewDatabaseURL(t)
	db := testenv.OpenDB(t, dbURL)
	log := testenv.Logger(t)
	orderService := orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{})

	gateway := sandboxgw.New(orderService, testenv.SandboxKey, "http://127.0.0.1:1", log)
	gateway.Emulate(stripe.NewEmulator(key))
	t.Cleanup(gateway.Close)
	e := echo.New()
	gateway.Mount(e)
	stripeAPI := httptest.NewServer(e)
	t.Cleanup(stripeAPI.Close)

	testenv.MustCreateProduct(t, db, "KILL", 75000, 5)
	o, err := orderService.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: "KILL", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the process listens there, before and after the kill
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "REDIS_URL="+testenv.StartRedis(t).URL(), "HTTP_ADDR="+addr,
		"METRICS_ADDR=127.0.0.1:0", "LOG_LEVEL=warn", "ORDER_TOKEN_SECRET="+testenv.OrderTokenSecret, "PAYMENT_GATEWAY=stripe", "STRIPE_SECRET_KEY="+key,
		"STRIPE_API_URL="+stripeAPI.URL+stripe.EmulatorPath)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--roles=web")
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = logOutput(t), logOutput(t)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "sekali serves", func() bool {
			r, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				r.Body.Close()
			}
			return err == nil && r.StatusCode == 200
		})
		return cmd
	}
	pay := func(ctx context.Context) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/api/orders/"+o.ID+"/payment", nil)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+o.AccessToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		var v struct {
			RedirectURL string `json:"redirect_url"`
		}
		b, _ := io.ReadAll(res.Body)
		json.Unmarshal(b, &v)
		return res.StatusCode, v.RedirectURL, nil
	}

	server := start()
	gateway.Faults().TimeOutAfterActing(1)
	go pay(context.Background()) // its connection dies with the process
	testenv.Eventually(t, "the gateway made the session and holds its answer", func() bool { return gateway.Faults().Held() == 1 })
	var r models.GatewayRequest
	if err := db.Take(&r, "order_id = ?", o.ID).Error; err != nil || r.Phase != models.GatewaySent {
		t.Fatalf("before the kill: %+v, %v; want the request sent", r, err)
	}
	server.Process.Signal(syscall.SIGKILL)
	server.Wait()

	server = start()
	t.Cleanup(func() { server.Process.Signal(syscall.SIGTERM); server.Wait() })
	// The dead process's lease (20 s) may not have passed yet: Pay answers
	// "try again" until it has. Wait for the lease's end first, rather than
	// press Pay every 10 ms until then.
	var held models.GatewayRequest
	if err := db.Take(&held, "order_id = ?", o.ID).Error; err != nil || held.LockedUntil == nil {
		t.Fatalf("after the kill: %+v, %v; want the row held under a lease", held, err)
	}
	testenv.Eventually(t, "the killed process's lease to run out", func() bool { return time.Now().After(*held.LockedUntil) })
	var status int
	var url string
	testenv.Eventually(t, "Pay to answer with the page", func() bool {
		status, url, err = pay(context.Background())
		return err == nil && status == http.StatusOK
	})
	if !strings.Contains(url, "/sandbox/pay/"+o.ID) {
		t.Errorf("after the restart: %d %q, want the session's page", status, url)
	}
	if err := db.Take(&r, "order_id = ?", o.ID).Error; err != nil || r.Phase != models.GatewayDone || r.Attempts < 2 {
		t.Errorf("after the restart: %+v, %v; want done after two attempts or more", r, err)
	}
	if n := stripeSessionsOf(t, stripeAPI.URL+stripe.EmulatorPath, key, o.ID); n != 1 {
		t.Errorf("the gateway has %d Checkout Sessions of the order, want exactly 1", n)
	}
	if r.ProviderObjectID == "" {
		t.Error("the row names no session")
	}
	report, err := audit.New(db).Run(context.Background(), 0)
	if err != nil || !report.OK {
		t.Errorf("audit: %+v, %v", report.Violations, err)
	}
}

// stripeSessionsOf counts the Checkout Sessions of an order at the
// emulated Stripe API.
func stripeSessionsOf(t *testing.T, base, key, orderID string) int {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/v1/checkout/sessions?limit=100", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct {
		Data []struct {
			Metadata map[string]string `json:"metadata"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(fmt.Errorf("sessions: %w", err))
	}
	n := 0
	for _, s := range list.Data {
		if s.Metadata["order_id"] == orderID {
			n++
		}
	}
	return n
}
