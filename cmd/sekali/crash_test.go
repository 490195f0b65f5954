package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

var (
	buildOnce sync.Once
	binaryDir string // removed by TestMain
	binary    string
	buildErr  error
)

// sekaliBinary builds cmd/sekali once per test binary, for tests that
// need the real process (to kill it).
func sekaliBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binaryDir, buildErr = os.MkdirTemp("", "sekali-bin-")
		if buildErr != nil {
			return
		}
		binary = filepath.Join(binaryDir, "sekali")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// asynqRecoverable returns a count of the tasks in the Asynq queues of the
// Redis at addr whose lease expired more than 30 s ago: those that Asynq's
// recoverer hands back to a worker when it runs, which it does once a
// minute and when a worker starts. A test that killed a worker restarts
// its successor as soon as the count is not zero, so that the recovery
// comes at once rather than up to a minute later.
func asynqRecoverable(t *testing.T, addr string) func() int64 {
	leases := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { leases.Close() })
	return func() (n int64) {
		cutoff := strconv.FormatInt(time.Now().Add(-30*time.Second).Unix(), 10)
		for queue := range jobs.QueueWeights() {
			c, _ := leases.ZCount(context.Background(), "asynq:{"+queue+"}:lease", "-inf", cutoff).Result()
			n += c
		}
		return n
	}
}

// TestWorkerKilledMidJob runs the worker (and the relay) as a real
// `sekali serve --roles=worker,relay` process, kills it with SIGKILL at
// random moments while jobs are in flight, and restarts it. Asynq
// delivers the interrupted jobs again; the guard, the fence and the unique
// indexes must turn that into exactly one invoice and one distinct email
// per paid order.
//
// What bounds its duration: Asynq recovers the tasks of a dead worker
// only when their lease (30 s, not configurable) has been expired for
// 30 s more, checking once a minute and when a worker starts. So the test
// watches the leases in Redis and restarts the worker as soon as some can
// be recovered, to make that recovery happen at its start instead of up
// to a minute later.
func TestWorkerKilledMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("kills worker processes and waits out Asynq's minute-long recovery: make test runs it")
	}
	t.Parallel()
	const paidOrders, kills = 200, 4
	bin := sekaliBinary(t)
	dbURL := testenv.NewDatabaseURL(t)
	db := testenv.OpenDB(t, dbURL)
	redisServer := testenv.StartRedis(t)
	smtpServer := testenv.StartSMTP(t)
	smtpServer.DataDelay = 20 * time.Millisecond

	// 200 paid orders, made in-process: their invoice and email tasks wait in the outbox.
	testenv.MustCreateProduct(t, db, "CRASH", 10000, paidOrders)
	log := testenv.Logger(t)
	orderService := orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{})
	paymentService := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	t.Cleanup(paymentService.Close)
	ids := make([]string, paidOrders)
	for i := range ids {
		o, err := orderService.Create(context.Background(), orders.CreateRequest{
			CustomerEmail: fmt.Sprintf("crash%d@example.com", i), Items: []orders.ItemRequest{{SKU: "CRASH", Qty: 1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = o.ID
		body := testenv.SandboxBody(o.ID, "tx-"+o.ID, models.EventPaid, 10000)
		out := paymentService.Receive(context.Background(), payments.Delivery{Provider: sandbox.Name,
			Header: testenv.SandboxHeaders("evt-"+o.ID, body, time.Now()), Body: bytesReader(body), ContentType: "application/json"})
		if out.Result != models.ResultProcessed {
			t.Fatalf("paying %s: %+v", o.ID, out)
		}
	}

	env := append(os.Environ(),
		"DATABASE_URL="+dbURL, "REDIS_URL="+redisServer.URL(), "SMTP_URL="+smtpServer.URL(),
		"JOB_LOCK_TTL=5s", "JOB_CONCURRENCY=10", "DB_MAX_CONNS=12", "LOG_LEVEL=error", "METRICS_ADDR=127.0.0.1:0",
		"SANDBOX_WEBHOOK_SECRET="+testenv.SandboxSecret)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--roles=worker,relay")
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = logOutput(t), logOutput(t)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	worker := start()
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })

	// Kill it while jobs are running: wait for a job in flight, then a
	// random moment more.
	var lastKill time.Time
	for k := range kills {
		testenv.Eventually(t, "a job in flight", func() bool {
			var n int64
			db.Raw("SELECT count(*) FROM job_executions WHERE status = 'processing'").Scan(&n)
			return n > 0
		})
		time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond) // a random moment mid-work, on purpose
		worker.Process.Signal(syscall.SIGKILL)
		worker.Wait()
		lastKill = time.Now()
		t.Logf("kill %d at %s", k+1, lastKill.Format("15:04:05.000"))
		worker = start()
	}

	// Let Asynq recover the killed workers' tasks. It does so only for a
	// lease expired more than 30 s ago, once a minute and when a worker
	// starts: so whenever Redis holds such a lease, restart the worker and
	// its start recovers them — at most every 5 s, to let that start run.
	recoverable := asynqRecoverable(t, redisServer.Addr)
	var restarted time.Time
	testenv.Eventually(t, "every paid order invoiced and mailed", func() bool {
		if n := recoverable(); n > 0 && time.Since(restarted) > 5*time.Second {
			t.Logf("%d tasks of killed workers can be recovered: restarting the worker", n)
			worker.Process.Signal(syscall.SIGTERM)
			worker.Wait()
			worker, restarted = start(), time.Now()
		}
		var left int64
		db.Raw(`SELECT count(*) FROM orders o WHERE o.status = 'paid' AND (
		          NOT EXISTS (SELECT 1 FROM invoices i WHERE i.order_id = o.id) OR
		          NOT EXISTS (SELECT 1 FROM outbound_emails e WHERE e.key = 'order_paid:' || o.id AND e.status = 'sent'))`).Scan(&left)
		return left == 0
	})

	var invoices []models.Invoice
	db.Order("sequence").Find(&invoices)
	if len(invoices) != paidOrders {
		t.Fatalf("invoices = %d, want %d", len(invoices), paidOrders)
	}
	for i, inv := range invoices {
		if inv.Sequence != int64(i+1) {
			t.Fatalf("invoice sequence %d at position %d: numbers are not gapless", inv.Sequence, i+1)
		}
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[mail.MessageID(mail.Key(mail.OrderPaid, id))] = true
	}
	got := map[string]int{}
	for _, m := range smtpServer.Messages() {
		if !want[m.MessageID] {
			t.Fatalf("received a message with an unexpected Message-ID %q", m.MessageID)
		}
		got[m.MessageID]++
	}
	resent := 0
	for _, n := range got {
		resent += n - 1
	}
	if len(got) != paidOrders {
		t.Fatalf("distinct Message-IDs received = %d, want %d", len(got), paidOrders)
	}
	var retried int64
	db.Raw("SELECT count(*) FROM job_executions WHERE attempts > 1").Scan(&retried)
	if retried == 0 {
		t.Fatal("no job ran more than once: the kills did not land mid-job")
	}
	t.Logf("%d kills: %d jobs ran more than once; %d emails were sent again with the same Message-ID (allowed: killed between DATA and commit)",
		kills, retried, resent)

	var report bytesBuffer
	getenv := func(k string) string {
		return map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisServer.URL(), "SANDBOX_WEBHOOK_SECRET": testenv.SandboxSecret}[k]
	}
	if err := run(context.Background(), []string{"sekali", "verify", "--drain-timeout", "60s"}, getenv, &report, logOutput(t)); err != nil {
		t.Fatalf("verify after the kills: %v\n%s", err, report.String())
	}
}
