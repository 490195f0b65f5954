package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// TestRefundSurvivesAKillAfterTheGatewayActed: an admin refunds half of
// a Stripe payment; `sekali serve`, a real process, sends the refund to
// Stripe (the sandbox gateway's emulation, in this test's process); the
// gateway makes the refund and holds its answer, and the process is
// killed with SIGKILL right then — after the gateway refunded, before
// Sekali recorded anything but "sent". Restarted, the refund's job runs
// again and repeats the call with the same Idempotency-Key: the gateway
// answers with the refund it made. Exactly one refund at the gateway,
// one refunds row, the order partially_refunded, the audit green.
func TestRefundSurvivesAKillAfterTheGatewayActed(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker process and waits for Asynq's minute-long recovery: make test runs it")
	}
	t.Parallel()
	const (
		key        = "sk_test_sekali_refund_kill"
		adminToken = "admin-token-refund-kill-0123456789"
		price      = 80000
		pi         = "pi_refund_kill"
	)
	bin := sekaliBinary(t)
	dbURL := testenv.NewDatabaseURL(t)
	db := testenv.OpenDB(t, dbURL)
	log := testenv.Logger(t)
	orderService := orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{})

	// The gateway sends no notification of the refund here: the only way
	// Sekali can learn of it is the answer to its repeated call.
	gateway := sandboxgw.New(orderService, testenv.SandboxKey, "http://127.0.0.1:1", log)
	gateway.Emulate(stripe.NewEmulator(key))
	t.Cleanup(gateway.Close)
	e := echo.New()
	gateway.Mount(e)
	stripeAPI := httptest.NewServer(e)
	t.Cleanup(stripeAPI.Close)
	apiURL := stripeAPI.URL + stripe.EmulatorPath

	// An order paid through Stripe: its payment_intent.succeeded, signed
	// and applied by the callback pipeline.
	testenv.MustCreateProduct(t, db, "RKILL", price, 5)
	o, err := orderService.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: "RKILL", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	const whsec = "whsec_refund_kill"
	provider, err := stripe.NewProvider(whsec)
	if err != nil {
		t.Fatal(err)
	}
	sender, err := stripe.NewSender(whsec)
	if err != nil {
		t.Fatal(err)
	}
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, provider)
	t.Cleanup(pay.Close)
	header, body, err := payments.Notification(sender, payments.Fact{EventID: "evt_refund_kill_paid", OrderID: o.ID,
		TransactionID: pi, Status: models.EventPaid, Amount: price, Currency: "IDR"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if out := pay.Receive(context.Background(), payments.Delivery{Provider: stripe.Name, Header: header,
		Body: bytes.NewReader(body), ContentType: "application/json"}); out.Result != models.ResultProcessed {
		t.Fatalf("paying the order: %+v", out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the process listens there, before and after the kill
	redisServer := testenv.StartRedis(t)
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "REDIS_URL="+redisServer.URL(), "HTTP_ADDR="+addr,
		"METRICS_ADDR=127.0.0.1:0", "LOG_LEVEL=warn", "ORDER_TOKEN_SECRET="+testenv.OrderTokenSecret, "ADMIN_API_TOKEN="+adminToken, "JOB_LOCK_TTL=3s",
		"STRIPE_SECRET_KEY="+key, "STRIPE_API_URL="+apiURL, "STRIPE_WEBHOOK_SECRET="+whsec)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--roles=web,worker,relay")
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

	server := start()
	gateway.Faults().TimeOutAfterActing(1)
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/admin/orders/"+o.ID+"/refunds",
		bytes.NewReader([]byte(`{"amount": 40000, "reason": "half of it came broken"}`)))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Idempotency-Key", "refund-kill-0123456789abcdef")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var record struct {
		ID    int64  `json:"id"`
		Phase string `json:"phase"`
	}
	json.NewDecoder(res.Body).Decode(&record)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || record.ID == 0 {
		t.Fatalf("refund: %d %+v; want 202 with the record", res.StatusCode, record)
	}
	testenv.Eventually(t, "the gateway made the refund and holds its answer", func() bool { return gateway.Faults().Held() == 1 })
	var r models.GatewayRequest
	if err := db.Take(&r, record.ID).Error; err != nil || r.Phase != models.GatewaySent {
		t.Fatalf("before the kill: %+v, %v; want the refund sent", r, err)
	}
	server.Process.Signal(syscall.SIGKILL)
	server.Wait()
	if n := stripeRefundsOf(t, apiURL, key, pi); n != 1 {
		t.Fatalf("the gateway has %d refunds before the restart, want the one it made", n)
	}
	var rows int64
	db.Model(&models.Refund{}).Where("order_id = ?", o.ID).Count(&rows)
	if rows != 0 {
		t.Fatalf("%d refunds recorded before the restart, want none", rows)
	}

	server = start()
	t.Cleanup(func() { server.Process.Signal(syscall.SIGTERM); server.Wait() })
	// The dead worker's task comes back when Asynq's recoverer finds its
	// lease expired (a minute after the kill: jobs.md, "Asynq's lease"),
	// after the refund's own lease (20 s) has passed; the job then repeats
	// the call with the same key. The recoverer looks once a minute and
	// when a worker starts: restarting the process as soon as the task can
	// be recovered makes it come back then, not up to a minute later.
	recoverable := asynqRecoverable(t, redisServer.Addr)
	restarted := time.Now()
	testenv.Eventually(t, "the refund done after the restart", func() bool {
		if n := recoverable(); n > 0 && time.Since(restarted) > 5*time.Second {
			t.Logf("%d tasks of the killed process can be recovered: restarting", n)
			server.Process.Signal(syscall.SIGTERM)
			server.Wait()
			server, restarted = start(), time.Now()
		}
		return db.Take(&r, record.ID).Error == nil && r.Phase == models.GatewayDone
	})
	if r.Attempts < 2 || r.ProviderObjectID == "" {
		t.Errorf("after the restart: %+v; want done after two attempts or more, with the gateway's refund", r)
	}
	if n := stripeRefundsOf(t, apiURL, key, pi); n != 1 {
		t.Errorf("the gateway has %d refunds of the payment, want exactly 1", n)
	}
	var p models.Payment
	var ord models.Order
	db.Model(&models.Refund{}).Where("order_id = ?", o.ID).Count(&rows)
	db.Take(&p, "order_id = ?", o.ID)
	db.Take(&ord, "id = ?", o.ID)
	if rows != 1 || p.RefundedAmount != 40000 || ord.Status != models.OrderPartiallyRefunded {
		t.Errorf("%d refunds rows, refunded %d, order %s; want one refund of 40000, partially_refunded", rows, p.RefundedAmount, ord.Status)
	}
	testenv.Eventually(t, "the refund job to succeed", func() bool {
		var j models.JobExecution
		return db.Take(&j, "idempotency_key = ?", jobs.TaskRefundSend+":"+strconv.FormatInt(record.ID, 10)).Error == nil && j.Status == models.JobSucceeded
	})
	report, err := audit.New(db).Run(context.Background(), 0)
	if err != nil || !report.OK {
		t.Errorf("audit: %+v, %v", report.Violations, err)
	}
}

// stripeRefundsOf counts the refunds of a PaymentIntent at the emulated
// Stripe API.
func stripeRefundsOf(t *testing.T, base, key, paymentIntent string) int {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/v1/refunds?limit=100&payment_intent="+paymentIntent, nil)
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
			PaymentIntent string `json:"payment_intent"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatalf("refunds: %v", err)
	}
	n := 0
	for _, r := range list.Data {
		if r.PaymentIntent == paymentIntent {
			n++
		}
	}
	return n
}
