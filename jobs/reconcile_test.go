package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/jobs"
)

// Redis forgets the tasks the relay handed over before any worker ran
// them (a restart without persistence). The outbox rows say dispatched;
// without the reconciler, no invoice and no email would ever come. With
// it, every invoice and every email happens exactly once and the audit is
// green.
func TestReconcilerRecoversTasksRedisLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 20
	var paid []string
	for range n {
		paid = append(paid, e.paidOrder())
	}
	relay := jobs.NewRelay(e.db, e.client, e.log, retention, "", metrics.New())
	if _, err := relay.RelayOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.count("SELECT count(*) FROM outbox_messages WHERE status = 'dispatched'"); got != 2*n {
		t.Fatalf("%d rows dispatched, want %d (an invoice and an email per order)", got, 2*n)
	}
	e.redis.Stop() // Redis dies with every task in it…
	e.redis.Start()

	r := jobs.NewReconciler(e.db, e.client, e.log, retention, time.Minute, metrics.New())
	// Within RECONCILE_AFTER nothing counts as lost yet.
	if got, err := r.Once(context.Background()); got != 0 || err != nil {
		t.Fatalf("pass before RECONCILE_AFTER: %d re-dispatched, %v; want 0", got, err)
	}
	r.After = 0
	got, err := r.Once(context.Background())
	if got != 2*n || err != nil {
		t.Fatalf("pass after RECONCILE_AFTER: %d re-dispatched, %v; want %d", got, err, 2*n)
	}
	// A second pass finds the tasks in the queue again: nothing to do.
	if again, err := r.Once(context.Background()); again != 0 || err != nil {
		t.Errorf("second pass: %d re-dispatched, %v; want 0", again, err)
	}
	// Forty tasks handed over again make one alert, not forty.
	if got := e.count("SELECT count(*) FROM alerts WHERE type = ?", alerts.ReconcilerSent); got != 1 {
		t.Errorf("%d reconciler.resent alerts, want 1", got)
	}
	if _, err := relay.RelayOnce(context.Background()); err != nil { // the alert's send task
		t.Fatal(err)
	}
	e.normalWorker("default")
	e.normalWorker("critical")
	for _, id := range paid {
		eventually(t, "the invoice and the email of "+id, func() bool {
			return e.count("SELECT count(*) FROM invoices WHERE order_id = ?", id) == 1 &&
				e.count("SELECT count(*) FROM outbound_emails WHERE key = ? AND status = 'sent'", mail.Key(mail.OrderPaid, id)) == 1
		})
	}
	if _, sent := e.mailer.calls(); len(sent) != n {
		t.Errorf("%d messages sent, want %d", len(sent), n)
	}
	report, err := audit.New(e.db).Run(context.Background(), 10*time.Second)
	if err != nil || !report.OK {
		t.Fatalf("audit: %+v, %v", report.Violations, err)
	}
	// Done jobs are not candidates any more.
	if again, err := r.Once(context.Background()); again != 0 || err != nil {
		t.Errorf("pass after the jobs ran: %d, %v; want 0", again, err)
	}
}
