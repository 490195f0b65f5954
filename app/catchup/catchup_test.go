package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/sekali/sekali/app/catchup"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// A run asks a gateway about the open orders and pays the one whose
// notification was lost, once; it is recorded, and the next run starts
// from it (less the overlap). A run whose gateway cannot be asked is
// recorded with its error, and does not move the start: the run after it
// looks from the last complete run again.
func TestRunAppliesLostPaymentsAndRemembersWhereItStarted(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	orderService := orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{})
	testenv.MustCreateProduct(t, db, "CATCH", 50000, 5)
	o, err := orderService.Create(t.Context(), orders.CreateRequest{CustomerEmail: "budi@example.id",
		Items: []orders.ItemRequest{{SKU: "CATCH", Qty: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	g := sandboxgwtest.New(t, "")
	base := sandboxgwtest.Serve(t, g)
	g.Faults().LoseNotifications(true)
	plan := sandboxgwtest.Must(g.ParsePlan(string(models.EventPaid), "1", sandboxgw.ModeSequential, sandbox.Name))
	g.Start(o, plan)
	testenv.Eventually(t, "the notification to be lost", func() bool {
		ds := g.Deliveries(o.ID)
		return len(ds) == 1 && ds[0].Result == "lost"
	})

	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	t.Cleanup(pay.Close)
	now := time.Now().UTC()
	clock := func() time.Time { return now }
	good := catchup.New(db, log, clock, pay, nil, []payments.StatusClient{sandbox.NewStatusClient(base, testenv.SandboxKey)}, nil)
	if since, err := good.Since(t.Context()); err != nil || !since.Equal(now.Add(-catchup.DefaultSince).Truncate(time.Second)) {
		t.Errorf("before any run: since %s, %v; want %s ago", since, err, catchup.DefaultSince)
	}
	run, err := good.Run(t.Context(), time.Time{}, models.CatchUpByJob, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Gateways) != 1 || run.Gateways[0] != (models.CatchUpCount{Provider: sandbox.Name, Asked: 1, Found: 1, Applied: 1}) {
		t.Errorf("the run: %+v; want the sandbox asked about the one open order, found and applied", run.Gateways)
	}
	var paid models.Order
	if err := db.Take(&paid, "id = ?", o.ID).Error; err != nil || paid.Status != models.OrderPaid {
		t.Fatalf("the order after the run: %s, %v; want paid", paid.Status, err)
	}
	again, err := good.Run(t.Context(), time.Time{}, models.CatchUpByJob, "")
	if err != nil || catchup.Applied(again) != 0 || !again.Since.Equal(now.Add(-5*time.Minute).Truncate(time.Second)) {
		t.Errorf("the second run: since %s, applied %d, %v; want from the first's start less 5 minutes, nothing applied", again.Since, catchup.Applied(again), err)
	}

	// A gateway that does not answer, about an order still open.
	if _, err := orderService.Create(t.Context(), orders.CreateRequest{CustomerEmail: "sari@example.id",
		Items: []orders.ItemRequest{{SKU: "CATCH", Qty: 1}}}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour)
	down := catchup.New(db, log, func() time.Time { return later }, pay, nil,
		[]payments.StatusClient{sandbox.NewStatusClient("http://127.0.0.1:1", testenv.SandboxKey)}, nil)
	failed, err := down.Run(t.Context(), time.Time{}, models.CatchUpByCommand, "")
	if err == nil || failed.Error == "" || failed.FinishedAt == nil || failed.Gateways[0].Error == "" {
		t.Errorf("a run whose gateway is down: %+v, %v; want it finished with the gateway's error", failed, err)
	}
	var stored models.CatchUpRun
	if err := db.Take(&stored, failed.ID).Error; err != nil || stored.Error != failed.Error || len(stored.Gateways) != 1 {
		t.Errorf("the failed run's row: %+v, %v", stored, err)
	}
	if since, _ := down.Since(context.Background()); !since.Equal(now.Add(-5 * time.Minute).Truncate(time.Second)) {
		t.Errorf("after a failed run: since %s; want the last complete run's start less 5 minutes", since)
	}
	// Exactly MaxSince back, as `sekali catch-up --since 720h` computes
	// it a moment before the run starts, is taken; the admin who asked
	// on the console is kept on the run.
	widest, _ := down.Run(t.Context(), later.Add(-catchup.MaxSince-time.Second), models.CatchUpByJob, "owner@example.com")
	if widest.ID == 0 || !widest.Since.Equal(later.Add(-catchup.MaxSince)) {
		t.Errorf("since %s ago, a second before the run: %+v; want a run from %s ago", catchup.MaxSince, widest, catchup.MaxSince)
	}
	var asked models.CatchUpRun
	if err := db.Take(&asked, widest.ID).Error; err != nil || asked.AskedBy != "owner@example.com" {
		t.Errorf("the asked run's row: asked by %q, %v; want owner@example.com", asked.AskedBy, err)
	}
	if _, err := good.Run(t.Context(), now.Add(-catchup.MaxSince-time.Hour), models.CatchUpByCommand, ""); models.ErrorCode(err) != models.EInvalid {
		t.Errorf("since beyond %s: %v, want %s", catchup.MaxSince, err, models.EInvalid)
	}
}
