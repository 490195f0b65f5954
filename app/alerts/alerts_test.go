package alerts_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

func raise(t *testing.T, db *gorm.DB, e alerts.Event) bool {
	t.Helper()
	var raised bool
	err := db.Transaction(func(tx *gorm.DB) error {
		var err error
		raised, err = alerts.Raise(tx, jobs.Tasks{}, e)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return raised
}

func alertRow(t *testing.T, db *gorm.DB, eventID string) models.Alert {
	t.Helper()
	var a models.Alert
	if err := db.Take(&a, "event_id = ?", eventID).Error; err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRaiseOncePerOccurrence: the same type and key raise one row and one
// send task; another key is another occurrence.
func TestRaiseOncePerOccurrence(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	e := alerts.Event{Type: alerts.ConflictBurst, Key: alerts.WindowKey(time.Now()), At: time.Now(), Data: map[string]any{"conflicts": 7}}
	if !raise(t, db, e) || raise(t, db, e) {
		t.Fatal("want the first Raise to raise and the second not")
	}
	other := e
	other.Key = alerts.WindowKey(time.Now().Add(alerts.Window))
	if !raise(t, db, other) {
		t.Fatal("the next window's burst was not raised")
	}
	var alertsN, tasks int64
	db.Model(&models.Alert{}).Count(&alertsN)
	db.Model(&models.OutboxMessage{}).Where("task_type = ?", jobs.TaskAlertSend).Count(&tasks)
	if alertsN != 2 || tasks != 2 {
		t.Fatalf("%d alerts, %d send tasks; want 2 of each", alertsN, tasks)
	}
	if a := alertRow(t, db, e.ID()); a.Status != models.AlertPending || a.Type != alerts.ConflictBurst {
		t.Errorf("row: %+v; want pending conflict_burst", a)
	}
	if _, err := alerts.Raise(db, jobs.Tasks{}, alerts.Event{Type: alerts.AuditRed, At: time.Now()}); err == nil {
		t.Error("an event without a key was raised")
	}
}

// TestDeliverOutcomes: without an address an alert is marked unsent and
// nothing is posted; a redirect is a failure; the last try's failure marks
// it failed, and a rerun that succeeds still sends it, once.
func TestDeliverOutcomes(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	var answer atomic.Int32
	var posts atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		if code := int(answer.Load()); code == http.StatusFound {
			http.Redirect(w, r, "/elsewhere", code)
		} else {
			w.WriteHeader(code)
		}
	}))
	t.Cleanup(sink.Close)

	off := alerts.Event{Type: alerts.RefundFailed, Key: "1", At: time.Now()}
	raise(t, db, off)
	unset := alerts.NewSender(db, "", nil, time.Now)
	for range 2 {
		if st, err := unset.Deliver(ctx, off.ID(), false); st != models.AlertUnsent || err != nil {
			t.Fatalf("without an address: %s, %v; want unsent", st, err)
		}
	}
	if a := alertRow(t, db, off.ID()); a.Attempts != 1 || a.LastError == "" {
		t.Errorf("unsent row: %+v; want one attempt saying why", a)
	}

	on := alerts.Event{Type: alerts.RefundFailed, Key: "2", At: time.Now()}
	raise(t, db, on)
	s := alerts.NewSender(db, sink.URL, []byte("k"), time.Now)
	answer.Store(http.StatusFound)
	if st, err := s.Deliver(ctx, on.ID(), false); st != models.AlertPending || err == nil {
		t.Fatalf("a redirect: %s, %v; want a failure, still pending", st, err)
	}
	answer.Store(http.StatusServiceUnavailable)
	if st, err := s.Deliver(ctx, on.ID(), true); st != models.AlertFailed || err == nil {
		t.Fatalf("the last try failing: %s, %v; want failed", st, err)
	}
	answer.Store(http.StatusOK)
	for range 2 {
		if st, err := s.Deliver(ctx, on.ID(), false); st != models.AlertSent || err != nil {
			t.Fatalf("a rerun: %s, %v; want sent", st, err)
		}
	}
	if a := alertRow(t, db, on.ID()); a.Attempts != 3 || a.SentAt == nil || a.LastError != "" || posts.Load() != 3 {
		t.Errorf("row %+v after %d POSTs; want sent after 3 attempts, and no POST after it was sent", a, posts.Load())
	}
	if _, err := s.Deliver(ctx, "refund.failed:404", false); models.ErrorCode(err) != models.ENotFound {
		t.Errorf("an unknown alert: %v; want not found", err)
	}
}
