package audit_test

import (
	"context"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// TestAuditRedRaisedOncePerRedSpell: eight red runs at once raise
// audit.red once, with one send task; a green run ends the spell, and the
// next red run raises a new occurrence.
func TestAuditRedRaisedOncePerRedSpell(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	auditor := audit.WithoutJobs(db).RaisingAlerts(jobs.Tasks{})
	setStock := func(stock int) {
		t.Helper()
		if err := db.Exec("UPDATE products SET stock = ? WHERE sku = 'RED-MUG'", stock).Error; err != nil {
			t.Fatal(err)
		}
	}
	alertsNow := func() (ids []string, tasks int64) {
		t.Helper()
		if err := db.Model(&models.Alert{}).Where("type = ?", alerts.AuditRed).Order("id").Pluck("event_id", &ids).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Model(&models.OutboxMessage{}).Where("task_type = ?", jobs.TaskAlertSend).Count(&tasks).Error; err != nil {
			t.Fatal(err)
		}
		return ids, tasks
	}

	testenv.MustCreateProduct(t, db, "RED-MUG", 75000, 5)
	if r, err := auditor.Run(ctx, 0); err != nil || !r.OK {
		t.Fatalf("first run: ok=%v err=%v; want green", r.OK, err)
	}
	setStock(2) // by hand: the movements no longer add up

	const runs = 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for range runs {
		wg.Go(func() {
			<-start
			r, err := auditor.Run(ctx, 0)
			if err == nil && r.OK {
				t.Error("a run with the stock corrupted was green")
			}
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ids, tasks := alertsNow()
	if len(ids) != 1 || tasks != 1 {
		t.Fatalf("after %d red runs at once: alerts %v, %d send tasks; want one of each", runs, ids, tasks)
	}

	setStock(5)
	if r, err := auditor.Run(ctx, 0); err != nil || !r.OK {
		t.Fatalf("repaired: ok=%v err=%v; want green", r.OK, err)
	}
	setStock(4)
	if r, err := auditor.Run(ctx, 0); err != nil || r.OK {
		t.Fatalf("corrupted again: ok=%v err=%v; want red", r.OK, err)
	}
	ids, tasks = alertsNow()
	if len(ids) != 2 || ids[0] == ids[1] || tasks != 2 {
		t.Fatalf("after red, green, red: alerts %v, %d send tasks; want two occurrences", ids, tasks)
	}

	// An auditor that raises no alerts (a test's, a tool's) records its
	// verdict only.
	if r, err := audit.WithoutJobs(db).Run(ctx, 0); err != nil || r.OK {
		t.Fatalf("plain run: ok=%v err=%v", r.OK, err)
	}
	if ids, _ := alertsNow(); len(ids) != 2 {
		t.Fatalf("an auditor without alerts raised one: %v", ids)
	}
}
