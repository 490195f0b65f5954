package payments_test

import (
	"context"
	"testing"
	"time"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// A list limited to a time window is ordered by that time, newest first,
// even when ids were given in another order (a batched delivery row is
// written after newer ones); paging through it with each page's cursor
// returns every row of the window once, and none outside it.
func TestDeliveriesInAWindowPageByTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC)
	// Inserted in this order, so ids follow it; minutes after base.
	minutes := []int{5, 1, 9, 3, 7, 2, 8, 30, -30}
	for _, m := range minutes {
		d := models.CallbackDelivery{Provider: "sandbox", ReceivedAt: base.Add(time.Duration(m) * time.Minute),
			Outcome: models.OutcomeInvalidSignature, ResponseCode: 401, RequestID: "window"}
		if err := f.db.Create(&d).Error; err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	before := int64(0)
	for page := 0; page < 10; page++ {
		rows, next, err := f.pay.ListDeliveries(context.Background(), payments.DeliveryFilter{
			From: base, To: base.Add(10 * time.Minute), Before: before, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, int(r.ReceivedAt.Sub(base).Minutes()))
		}
		if next == 0 {
			break
		}
		before = next
	}
	want := []int{9, 8, 7, 5, 3, 2, 1}
	if len(got) != len(want) {
		t.Fatalf("listed minutes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("listed minutes %v, want %v", got, want)
		}
	}
}
