package stats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// The rollup counts closed minutes once, however often and from however
// many workers it runs; DeliveriesSince adds the minutes it has not
// reached, counted live, so the figures are whole at any moment.
func TestRollupCountsEachMinuteOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 30, 0, time.UTC)
	add := func(n int, at time.Time, outcome string) {
		rows := make([]models.CallbackDelivery, n)
		for i := range rows {
			rows[i] = models.CallbackDelivery{Provider: "sandbox", ReceivedAt: at, Outcome: outcome, ResponseCode: 200}
		}
		if err := db.Create(&rows).Error; err != nil {
			t.Fatal(err)
		}
	}
	add(3, now.Add(-10*time.Minute), models.OutcomeProcessed)
	add(5, now.Add(-10*time.Minute), models.OutcomeDuplicate)
	add(2, now.Add(-time.Minute), models.OutcomeDuplicate)  // too recent to roll up: counted live
	add(4, now.Add(-30*time.Hour), models.OutcomeDuplicate) // older than the longest window

	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			<-start
			if _, err := stats.Rollup(ctx, db, now); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	var counts []models.DeliveryCount
	db.Order("outcome").Find(&counts)
	if len(counts) != 2 || counts[0].Deliveries != 5 || counts[1].Deliveries != 3 {
		t.Fatalf("rolled-up counts %+v, want the closed minute's 5 duplicates and 3 processed, once", counts)
	}
	got, err := stats.DeliveriesSince(ctx, db, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	total := map[string]int64{}
	for _, mc := range got {
		total[mc.Outcome] += mc.Deliveries
	}
	if total[models.OutcomeProcessed] != 3 || total[models.OutcomeDuplicate] != 7 {
		t.Errorf("DeliveriesSince = %v, want 3 processed and 7 duplicates (5 rolled up, 2 live)", total)
	}
	// A minute later the recent rows are rolled up too, and nothing is
	// counted twice.
	if _, err := stats.Rollup(ctx, db, now.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, _ = stats.DeliveriesSince(ctx, db, now.Add(-24*time.Hour))
	total = map[string]int64{}
	for _, mc := range got {
		total[mc.Outcome] += mc.Deliveries
	}
	if total[models.OutcomeDuplicate] != 7 {
		t.Errorf("after the next rollup: %v duplicates, want 7", total[models.OutcomeDuplicate])
	}
}
