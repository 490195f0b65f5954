package payments_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// TestPaidEventWakesTheRelays: the event that pays an order writes its
// invoice and email tasks, and once committed wakes the relays with a
// NOTIFY (none is sent inside the transaction: see migration 00010).
func TestPaidEventWakesTheRelays(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabaseURL(t)
	db := testenv.OpenDB(t, url)
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	t.Cleanup(pay.Close)
	f := &fixture{t: t, db: db, orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), pay: pay}
	orderID, _ := f.orderIn(models.OrderPending)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+outbox.Channel); err != nil {
		t.Fatal(err)
	}
	if out := f.deliver(orderID, "tx-wake", models.EventPaid, price); out.Result != models.ResultProcessed {
		t.Fatalf("paid event: %+v", out)
	}
	if _, err := conn.WaitForNotification(ctx); err != nil {
		t.Fatalf("no NOTIFY %s after the paid event: %v", outbox.Channel, err)
	}
}
