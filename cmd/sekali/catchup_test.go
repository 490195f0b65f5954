package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/catchup"
	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// TestCatchUpAppliesLostPaymentsOnce: the sandbox gateway, answering as
// the API of every paid gateway of the registry, loses every
// notification (an outage longer than the gateways' retries) while an
// order is paid at each. `sekali catch-up` — twice at once, then again —
// finds each payment (among the events a gateway lists as not
// delivered, or by the status of the open orders) and every order is
// paid once: one payment each, and the audit green.
func TestCatchUpAppliesLostPaymentsOnce(t *testing.T) {
	t.Parallel()
	a, paid := lostPayments(t, nil)
	catchUp := func() string {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"sekali", "catch-up", "--since=1h"}, a.getenv, &out, logOutput(t)); err != nil {
			t.Errorf("sekali catch-up: %v\n%s", err, out.String())
		}
		return out.String()
	}
	var outs [2]string
	concurrently(2, func(i int) { outs[i] = catchUp() })
	third := catchUp()
	t.Log(outs[0], outs[1], third)
	for _, out := range append(outs[:], third) {
		for _, provider := range paid {
			if !strings.Contains(out, provider) {
				t.Errorf("the summary names no %s:\n%s", provider, out)
			}
		}
	}
	if !strings.Contains(third, "applied 0: ok") {
		t.Errorf("the third run applied something again:\n%s", third)
	}

	paidOnce(t, a, paid)
	var runs []models.CatchUpRun
	if err := a.DB.Order("id").Find(&runs).Error; err != nil {
		t.Fatal(err)
	}
	applied := map[string]int{}
	for _, r := range runs {
		if r.FinishedAt == nil || r.Error != "" || r.Trigger != models.CatchUpByCommand {
			t.Errorf("run %d: %+v, want finished by the command without an error", r.ID, r)
		}
		for _, g := range r.Gateways {
			applied[g.Provider] += g.Applied
		}
	}
	if len(runs) != 3 {
		t.Errorf("%d catch-up runs recorded, want 3", len(runs))
	}
	for _, provider := range paid {
		if applied[provider] != 1 {
			t.Errorf("%s: %d applied over the runs, want exactly 1", provider, applied[provider])
		}
	}
	a.verify(t)
}

// lostPayments starts `sekali serve` (with extra in its environment)
// against a sandbox gateway of this test's that answers as the API of
// every gateway of the registry that has an emulation and loses every
// notification, and pays an order at each: it returns the app and the
// orders, each with the gateway it was paid at, still pending. Each
// gateway's settings come from the registry, so that deleting one from
// it leaves this building.
func lostPayments(t *testing.T, extra map[string]string) (*testApp, map[string]string) {
	t.Helper()
	e := echo.New()
	api := httptest.NewServer(e) // its routes are mounted below, before anything asks
	t.Cleanup(api.Close)
	vars := gateways.EmulatedEnv(api.URL) // each gateway's API at its emulation
	env := config.Env{Getenv: func(k string) string { return vars[k] }}
	env.PaymentGateway = config.DefaultPaymentGateway
	set, err := gateways.Configure(env)
	if err != nil {
		t.Fatal(err)
	}
	gateway := sandboxgw.New(nil, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
	t.Cleanup(gateway.Close)
	for _, sender := range set.Senders() {
		gateway.Speak(sender)
	}
	for _, em := range set.Emulators() {
		gateway.Emulate(em)
	}
	gateway.Mount(e)
	maps.Copy(vars, extra)
	a := startApp(t, vars)
	sku := a.newProduct(t, 75000, 10)

	gateway.Faults().LoseNotifications(true)
	paid := map[string]string{} // order → the gateway it was paid at
	for _, em := range set.Emulators() {
		provider := em.Provider()
		id := a.createOrder(t, map[string]int{sku: 1})
		o := a.order(t, id)
		plan, err := gateway.ParsePlan(string(models.EventPaid), "1", sandboxgw.ModeSequential, provider)
		if err != nil {
			t.Fatal(err)
		}
		gateway.Start(&o, plan)
		testenv.Eventually(t, provider+"'s notification to be lost", func() bool {
			ds := gateway.Deliveries(id)
			return len(ds) == 1 && ds[0].Result == "lost"
		})
		paid[id] = provider
	}
	if len(paid) != len(gateways.All)-1 {
		t.Fatalf("paid at %d emulated gateways, want every gateway of the registry but the sandbox", len(paid))
	}
	for id := range paid {
		if o := a.order(t, id); o.Status != models.OrderPending {
			t.Fatalf("order %s is %s before catching up; its notification was lost, so want pending", id, o.Status)
		}
	}
	return a, paid
}

// paidOnce fails the test unless every order of paid is paid, with one
// payment of its gateway.
func paidOnce(t *testing.T, a *testApp, paid map[string]string) {
	t.Helper()
	for id, provider := range paid {
		if o := a.order(t, id); o.Status != models.OrderPaid {
			t.Errorf("order paid at %s: %s after catching up, want paid", provider, o.Status)
		}
		if n := a.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND provider = $2", id, provider); n != 1 {
			t.Errorf("order paid at %s has %d payments, want 1", provider, n)
		}
	}
}

// TestCatchUpTaskRunsOnTheWorker: the payments:catch-up task, as the
// scheduler enqueues it with CATCH_UP_EVERY, runs the catch-up on the
// worker of `sekali serve`: the lost payments are applied, once, by a run
// recorded as the job's. An operator sees it on the console and asks for
// another there, which the worker runs too, applying nothing again.
func TestCatchUpTaskRunsOnTheWorker(t *testing.T) {
	t.Parallel()
	a, paid := lostPayments(t, nil)
	queue := asynq.NewClient(sandboxgwtest.Must(asynq.ParseRedisURI(a.env["REDIS_URL"])))
	t.Cleanup(func() { queue.Close() })
	if _, err := queue.Enqueue(asynq.NewTask(jobs.TaskCatchUp, nil), asynq.Queue(jobs.QueueMaintenance)); err != nil {
		t.Fatal(err)
	}
	a.eventually(t, 1, "SELECT count(*) FROM catch_up_runs WHERE trigger = 'job' AND finished_at IS NOT NULL AND error = ''")
	paidOnce(t, a, paid)
	a.verify(t)

	// The operator sees the run on the console: by the schedule (the
	// task came with no admin), done, and what it applied (one lost
	// payment per gateway).
	b := loggedInBrowser(t, a)
	if st := b.open("/admin/catch-up"); st != http.StatusOK {
		t.Fatalf("GET /admin/catch-up: %d", st)
	}
	row := strings.Join(strings.Fields(b.text("tbody tr")), " ")
	for _, want := range []string{"the schedule", "done"} {
		if !strings.Contains(row, want) {
			t.Errorf("the run's row %q does not say %q", row, want)
		}
	}
	if got := b.text("tbody tr td:nth-child(7)"); got != fmt.Sprint(len(paid)) {
		t.Errorf("the run's row says %q applied, want %d", got, len(paid))
	}

	// Asked again from the console: the task goes through the outbox to
	// the worker, and the new run finds nothing left to apply.
	if st := b.follow("ask for a catch-up", chromedp.Click(chromedp.CSS(`form[action="/admin/catch-up"] button[type="submit"]`))); st != http.StatusOK || b.location() != "/admin/catch-up" {
		t.Fatalf("ask for a catch-up: %d at %s", st, b.location())
	}
	if got := b.text(".flash"); !strings.HasPrefix(got, "Asked") {
		t.Errorf("the page after asking says %q", got)
	}
	a.eventually(t, 2, "SELECT count(*) FROM catch_up_runs WHERE trigger = 'job' AND finished_at IS NOT NULL AND error = ''")
	if n := a.count(t, "SELECT count(*) FROM catch_up_runs WHERE id = (SELECT max(id) FROM catch_up_runs) AND gateways @> '[{\"applied\": 0}]' AND NOT gateways @> '[{\"applied\": 1}]'"); n != 1 {
		t.Error("the run asked from the console applied something again")
	}
	paidOnce(t, a, paid)
	if st := b.open("/admin/catch-up"); st != http.StatusOK {
		t.Fatalf("GET /admin/catch-up: %d", st)
	}
	if by := b.text("tbody tr td:nth-child(4)"); !strings.Contains(by, "on the console") {
		t.Errorf("the run asked on the console is by %q; want the admin who asked, on the console", by)
	}
	b.screenshot("catch-up")
}

// TestCatchUpAsksWhereServeDoes: `sekali catch-up` run with serve's
// environment — the sandbox gateway on, Midtrans's key, no API URL nor
// SANDBOX_CALLBACK_URL — asks Midtrans's emulation where serve's web
// role answers (HTTP_ADDR, here a stand-in that records what it is
// asked), never Midtrans's own sandbox; and --since 720h, the most the
// help allows, is taken and run.
func TestCatchUpAsksWhereServeDoes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(web.Close)
	env := map[string]string{
		"DATABASE_URL":        testenv.NewDatabaseURL(t),
		"SANDBOX_GATEWAY":     "true",
		"HTTP_ADDR":           strings.TrimPrefix(web.URL, "http://"),
		"MIDTRANS_SERVER_KEY": "SB-Mid-server-catchup0123456789",
	}
	db := testenv.OpenDB(t, env["DATABASE_URL"])
	testenv.MustCreateProduct(t, db, "WHERE", 50000, 5)
	o, err := orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}).Create(t.Context(),
		orders.CreateRequest{CustomerEmail: "budi@example.id", Items: []orders.ItemRequest{{SKU: "WHERE", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(t.Context(), []string{"sekali", "catch-up", "--since=720h"}, func(k string) string { return env[k] }, &out, logOutput(t))
	t.Logf("sekali catch-up: %v\n%s", err, out.String()) // the stand-in answers 404: the run may report it
	mu.Lock()
	defer mu.Unlock()
	if want := "/sandbox/midtrans/v2/" + o.ID + "/status"; !slices.Contains(asked, want) {
		t.Errorf("serve's address was asked %q; want Midtrans's status of the open order at its emulation, %s", asked, want)
	}
	var last models.CatchUpRun
	if err := db.Order("id DESC").Take(&last).Error; err != nil || last.StartedAt.Sub(last.Since) != catchup.MaxSince {
		t.Errorf("--since 720h: run %+v, %v; want one run that looked back %s", last, err, catchup.MaxSince)
	}
}
