package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// sinkRequest is one POST an alert sink received.
type sinkRequest struct {
	id       string
	verified error // stdwebhooks.Verify's verdict
	accepted bool  // answered 2xx
	payload  alerts.Payload
}

// alertSink is an operational webhooks receiver: it checks each POST's
// signature and answers 500 to the first failFirst of them.
type alertSink struct {
	*httptest.Server
	mu        sync.Mutex
	key       []byte
	failFirst int
	got       []sinkRequest
}

func newAlertSink(t *testing.T, key []byte, failFirst int) *alertSink {
	s := &alertSink{key: key, failFirst: failFirst}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := sinkRequest{id: r.Header.Get(stdwebhooks.HeaderID),
			verified: stdwebhooks.Verify([][]byte{s.key}, r.Header, body, time.Now())}
		if err := json.Unmarshal(body, &req.payload); err != nil {
			t.Errorf("sink: the body is not a payload: %v: %s", err, body)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		req.accepted = len(s.got) >= s.failFirst
		s.got = append(s.got, req)
		if !req.accepted {
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *alertSink) requests() []sinkRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkRequest(nil), s.got...)
}

// TestAuditRedWebhookReceivedOnceSigned is the test: the stock is
// corrupted by hand, the audit runs twice, the sink fails the first POST,
// and the task is delivered once more after it succeeded; the sink still
// accepts audit.red exactly once, every POST under the same webhook-id and
// validly signed.
func TestAuditRedWebhookReceivedOnceSigned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := []byte("alert-signing-key-for-the-test-0")
	sink := newAlertSink(t, key, 1)
	ctx := context.Background()

	testenv.MustCreateProduct(t, e.db, "ALERT-MUG", price, 5)
	if err := e.db.Exec("UPDATE products SET stock = 3 WHERE sku = 'ALERT-MUG'").Error; err != nil {
		t.Fatal(err)
	}
	auditor := audit.WithoutJobs(e.db).RaisingAlerts(jobs.Tasks{})
	for run := 1; run <= 2; run++ {
		r, err := auditor.Run(ctx, 0)
		if err != nil || r.OK {
			t.Fatalf("audit run %d: ok=%v err=%v; want red", run, r.OK, err)
		}
	}
	var rows []models.OutboxMessage
	if err := e.db.Find(&rows, "task_type = ?", jobs.TaskAlertSend).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("alert:send outbox rows after two red runs: %d, want 1", len(rows))
	}

	sender := alerts.NewSender(e.db, sink.URL, key, time.Now)
	mux := jobs.NewMux(jobs.Deps{DB: e.db, Now: time.Now, Alerts: sender})
	w := e.startWorker(jobs.QueueDefault, mux)
	e.enqueue(rows[0], jobs.QueueDefault)
	runs := e.waitRuns(w, rows[0].TaskID, 2) // the failed POST, then its retry
	if runs[0] == nil || runs[1] != nil {
		t.Fatalf("runs: %v; want a failure, then a success", runs)
	}
	// The same task delivered again, as after a lost lease: nothing is sent.
	again := e.startWorker("alerts-again", mux)
	e.enqueue(rows[0], "alerts-again")
	if runs := e.waitRuns(again, rows[0].TaskID, 1); runs[0] != nil {
		t.Fatalf("the repeated delivery: %v", runs[0])
	}

	got := sink.requests()
	if len(got) != 2 {
		t.Fatalf("the sink got %d POSTs, want 2 (one refused, one accepted)", len(got))
	}
	accepted := 0
	for i, r := range got {
		if r.verified != nil {
			t.Errorf("POST %d: signature: %v", i+1, r.verified)
		}
		if r.id != got[0].id || r.id == "" {
			t.Errorf("POST %d: webhook-id %q, want the first's %q", i+1, r.id, got[0].id)
		}
		if r.payload.Type != alerts.AuditRed || r.payload.Data["violations"] == nil {
			t.Errorf("POST %d: payload %+v, want audit.red with its violations", i+1, r.payload)
		}
		if r.accepted {
			accepted++
		}
	}
	if accepted != 1 {
		t.Errorf("audit.red accepted %d times, want 1", accepted)
	}
	var a models.Alert
	if err := e.db.Take(&a, "type = ?", alerts.AuditRed).Error; err != nil {
		t.Fatal(err)
	}
	if a.Status != models.AlertSent || a.Attempts != 2 || a.SentAt == nil {
		t.Errorf("alert row: status %s, attempts %d, sent_at %v; want sent after 2 attempts", a.Status, a.Attempts, a.SentAt)
	}
}

// TestAlertSendFailingSinkIsRetriedUntilFinal: a sink that always fails
// gets the alert on every try, under one webhook-id, and the alert is
// marked failed when the job gives up.
func TestAlertSendFailingSinkIsRetriedUntilFinal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := []byte("alert-signing-key-for-the-test-1")
	sink := newAlertSink(t, key, 1000)
	ev := alerts.Event{Type: alerts.RefundFailed, Key: "42", At: time.Now(), Data: map[string]any{"order_id": "ORD-X"}}
	if err := e.db.Transaction(func(tx *gorm.DB) error { _, err := alerts.Raise(tx, jobs.Tasks{}, ev); return err }); err != nil {
		t.Fatal(err)
	}
	var row models.OutboxMessage
	if err := e.db.Take(&row, "task_id = ?", jobs.AlertArgs{EventID: ev.ID()}.Kind().ID(ev.ID())).Error; err != nil {
		t.Fatal(err)
	}
	mux := jobs.NewMux(jobs.Deps{DB: e.db, Now: time.Now, Alerts: alerts.NewSender(e.db, sink.URL, key, time.Now)})
	w := e.startWorker(jobs.QueueDefault, mux)
	if _, err := e.client.Enqueue(jobs.NewTask(row, retention), asynq.MaxRetry(2)); err != nil {
		t.Fatal(err)
	}
	e.waitRuns(w, row.TaskID, 3)
	e.waitState(jobs.QueueDefault, row.TaskID, asynq.TaskStateArchived)
	got := sink.requests()
	if len(got) != 3 {
		t.Fatalf("the sink got %d POSTs, want 3 (a try and two retries)", len(got))
	}
	for i, r := range got {
		if r.id != ev.ID() || r.verified != nil {
			t.Errorf("POST %d: webhook-id %q (want %q), signature: %v", i+1, r.id, ev.ID(), r.verified)
		}
	}
	var a models.Alert
	if err := e.db.Take(&a, "event_id = ?", ev.ID()).Error; err != nil {
		t.Fatal(err)
	}
	if a.Status != models.AlertFailed || a.Attempts != 3 || a.LastError == "" {
		t.Errorf("alert row: status %s, attempts %d, last error %q; want failed after 3", a.Status, a.Attempts, a.LastError)
	}
}
