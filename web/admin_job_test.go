package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// jobRow writes a job row and its dispatched outbox row, as a job that
// ran looks (no worker runs in these tests; the queue holds no task).
func (c *console) jobRow(key string, status models.JobStatus) {
	c.t.Helper()
	now := time.Now().UTC()
	err := c.db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&models.JobExecution{IdempotencyKey: key, QueueName: jobs.QueueCritical, ExternalJobID: key,
			BusinessKey: "ORD-X", Status: status, Attempts: 1, Fence: 1, WorkerID: "w1", StartedAt: now, LastError: "boom"}).Error; err != nil {
			return err
		}
		return tx.Create(&models.OutboxMessage{TaskType: jobs.TaskInvoiceGenerate, Payload: []byte(`{}`), TaskID: key,
			Queue: jobs.QueueCritical, ProcessAt: now, Status: models.OutboxDispatched, DispatchedAt: &now}).Error
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// apiPost sends a JSON body to the admin API with its token.
func (c *console) apiPost(path, body string) page {
	return c.do(http.DefaultClient, "POST", path, strings.NewReader(body), http.Header{
		"Authorization": {"Bearer " + apiToken}, "Accept": {"application/json"}, "Content-Type": {"application/json"},
	})
}

func (c *console) jobStatus(key string) models.JobStatus {
	c.t.Helper()
	var j models.JobExecution
	if err := c.db.Take(&j, "idempotency_key = ?", key).Error; err != nil {
		c.t.Fatal(err)
	}
	return j.Status
}

func (c *console) countRows(query string, args ...any) int64 {
	c.t.Helper()
	var n int64
	if err := c.db.Raw(query, args...).Scan(&n).Error; err != nil {
		c.t.Fatal(err)
	}
	return n
}

// A discard from the console's job page and from the admin API: the
// reason is required (422), a succeeded job is refused (409) and an
// unknown one is a 404, each refusal logged; a discard is logged with
// its actor and reason, and the job page says who and why.
func TestDiscardAJob(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	failed, viaAPI, done := "invoice:generate:ORD-F1", "invoice:generate:ORD-F2", "invoice:generate:ORD-DONE"
	c.jobRow(failed, models.JobFailed)
	c.jobRow(viaAPI, models.JobFailed)
	c.jobRow(done, models.JobSucceeded)

	if p := c.post("/admin/jobs/"+failed+"/discard", url.Values{"reason": {"  "}}); p.StatusCode != 422 {
		t.Errorf("discard without a reason: %d, want 422", p.StatusCode)
	}
	if got := c.jobStatus(failed); got != models.JobFailed {
		t.Fatalf("a refused discard left the job %s", got)
	}
	p := c.post("/admin/jobs/"+failed+"/discard", url.Values{"reason": {"invoiced by hand"}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/admin/jobs/"+failed {
		t.Fatalf("discard: %d Location=%q\n%s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
	doc := c.get(p.Header.Get("Location")).Doc(t)
	if text := doc.Find(".flash.warn").Text(); !strings.Contains(text, adminEmail) || !strings.Contains(text, "invoiced by hand") {
		t.Errorf("the job page after the discard says %q", text)
	}
	if doc.Find("form#discard").Length() != 0 {
		t.Error("a discarded job still offers a discard")
	}
	if got := c.jobStatus(failed); got != models.JobDiscarded {
		t.Errorf("job %s after the discard, want discarded", got)
	}
	if n := c.countRows(`SELECT count(*) FROM admin_actions WHERE action = 'discard job' AND target = ? AND result = 'ok'
		AND admin_email = ? AND detail = 'invoiced by hand'`, failed, adminEmail); n != 1 {
		t.Errorf("%d action log entries for the console's discard, want 1", n)
	}
	if n := c.countRows("SELECT count(*) FROM outbox_messages WHERE task_id = ? AND status = 'discarded'", failed); n != 1 {
		t.Error("the outbox row is not discarded")
	}

	// The admin API.
	for _, tt := range []struct {
		key, body string
		status    int
		code      string
	}{
		{viaAPI, `{}`, 422, models.EMissingField},
		{viaAPI, `{"reason": "` + strings.Repeat("x", models.MaxDiscardReason+1) + `"}`, 422, models.EInvalid},
		{done, `{"reason": "x"}`, 409, models.EInvalidTransition},
		{failed, `{"reason": "again"}`, 409, models.EInvalidTransition},
		{"invoice:generate:ORD-NONE", `{"reason": "x"}`, 404, models.ENotFound},
	} {
		p := c.apiPost("/api/admin/jobs/"+tt.key+"/discard", tt.body)
		var problem struct{ Code string }
		json.Unmarshal([]byte(p.Body), &problem)
		if p.StatusCode != tt.status || problem.Code != tt.code {
			t.Errorf("discard %s with %.40s: %d %s; want %d %s", tt.key, tt.body, p.StatusCode, problem.Code, tt.status, tt.code)
		}
	}
	if got := c.jobStatus(done); got != models.JobSucceeded {
		t.Errorf("a succeeded job became %s", got)
	}
	if n := c.countRows("SELECT count(*) FROM admin_actions WHERE action = 'discard job' AND result = 'refused'"); n != 6 {
		t.Errorf("%d refused discards logged, want 6 (one from the console, five from the API)", n)
	}
	p = c.apiPost("/api/admin/jobs/"+viaAPI+"/discard", `{"reason": "duplicate of a manual invoice"}`)
	var v struct {
		Job        struct{ Status string }
		Discarded  struct{ By, Reason string }
		CanDiscard bool `json:"can_discard"`
	}
	if err := json.Unmarshal([]byte(p.Body), &v); err != nil || p.StatusCode != 200 {
		t.Fatalf("API discard: %d %s", p.StatusCode, p.Body)
	}
	if v.Job.Status != "discarded" || v.Discarded.By != "api" || v.Discarded.Reason != "duplicate of a manual invoice" || v.CanDiscard {
		t.Errorf("API discard answered %+v", v)
	}
}

// A bulk discard asks first, with how many match; it needs a reason;
// then it discards exactly the failed jobs that match, each logged, and
// logs the whole once.
func TestBulkDiscard(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	for _, k := range []string{"invoice:generate:ORD-1", "invoice:generate:ORD-2", "invoice:generate:ORD-3"} {
		c.jobRow(k, models.JobFailed)
	}
	c.jobRow("invoice:generate:ORD-OK", models.JobSucceeded)
	c.jobRow("email:send:order_paid:ORD-1", models.JobFailed)

	doc := c.get("/admin/jobs/discard-matching?type=invoice:generate").Doc(t)
	if got := doc.Find("h1").Text(); got != "Discard 3 job(s)?" {
		t.Errorf("confirmation: %q", got)
	}
	form := url.Values{"type": {"invoice:generate"}, "status": {""}, "key": {""}}
	if p := c.post("/admin/jobs/discard-matching", form); p.StatusCode != 422 {
		t.Errorf("bulk discard without a reason: %d, want 422", p.StatusCode)
	}
	if n := c.countRows("SELECT count(*) FROM job_executions WHERE status = 'discarded'"); n != 0 {
		t.Fatalf("%d jobs discarded without a reason", n)
	}
	form.Set("reason", "the invoicing provider was replaced")
	p := c.post("/admin/jobs/discard-matching", form)
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("bulk discard: %d %s", p.StatusCode, p.Body)
	}
	if flash := c.get(p.Header.Get("Location")).Doc(t).Find("#flash").Text(); !strings.Contains(flash, "3 discarded") {
		t.Errorf("flash %q", flash)
	}
	if n := c.countRows("SELECT count(*) FROM job_executions WHERE status = 'discarded' AND idempotency_key LIKE 'invoice:generate:ORD-_'"); n != 3 {
		t.Errorf("%d invoice jobs discarded, want 3", n)
	}
	if c.jobStatus("invoice:generate:ORD-OK") != models.JobSucceeded || c.jobStatus("email:send:order_paid:ORD-1") != models.JobFailed {
		t.Error("a job outside the filter, or a succeeded one, changed")
	}
	if n := c.countRows("SELECT count(*) FROM admin_actions WHERE action = 'discard job' AND result = 'ok' AND detail = 'the invoicing provider was replaced'"); n != 3 {
		t.Errorf("%d per-job entries in the action log, want 3", n)
	}
	if n := c.countRows("SELECT count(*) FROM admin_actions WHERE action = 'bulk discard' AND result = 'ok' AND target = 'type=invoice%3Agenerate'"); n != 1 {
		var got []models.AdminAction
		c.db.Find(&got, "action = 'bulk discard'")
		t.Errorf("bulk entries %+v, want one ok for type=invoice:generate", got)
	}
	if got := c.get("/admin/jobs/discard-matching?type=invoice:generate").Doc(t).Find("h1").Text(); got != "Discard 0 job(s)?" {
		t.Errorf("confirmation after the discard: %q", got)
	}
}

// The job page lists every attempt of a job that failed, then succeeded
// (the real guard writes them), with a timeline; the jobs list and the
// order's page link to it; its JSON is the same view.
func TestJobPageListsEveryAttempt(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "ATTEMPTS", 1000, 5)
	o := c.newOrder("ATTEMPTS", 1)
	key := "order:expire:" + o.ID // the order's own task, so its page lists the job
	g := jobs.NewGuard(c.db, testenv.NewRedis(t), testenv.Logger(t), "worker-7", 30*time.Second, metrics.New())
	j := jobs.Job{Key: key, Type: jobs.TaskOrderExpire, Queue: jobs.QueueDefault, Payload: []byte(`{"order_id":"` + o.ID + `"}`), Attempt: 1}
	boom := errors.New("the warehouse did not answer")
	if _, err := g.Run(context.Background(), j, nil, func(context.Context, *gorm.DB, jobs.Job) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("first run: %v", err)
	}
	j.Attempt = 2
	if _, err := g.Run(context.Background(), j, nil, func(context.Context, *gorm.DB, jobs.Job) (string, error) { return "ok", nil }); err != nil {
		t.Fatalf("second run: %v", err)
	}

	p := c.api("/api/admin/jobs/" + key)
	var v struct {
		Job      struct{ Status string }
		Attempts []struct {
			Fence      int64
			Worker     string     `json:"worker_id"`
			Started    time.Time  `json:"started_at"`
			Finished   *time.Time `json:"finished_at"`
			DurationMS *int64     `json:"duration_ms"`
			Outcome    string
			Error      string
		}
		Timeline []struct{ What string }
		Outbox   *struct{ Status string }
	}
	if err := json.Unmarshal([]byte(p.Body), &v); err != nil || p.StatusCode != 200 {
		t.Fatalf("job JSON: %d %s", p.StatusCode, p.Body)
	}
	if v.Job.Status != "succeeded" || len(v.Attempts) != 2 || v.Outbox == nil {
		t.Fatalf("job JSON: %+v", v)
	}
	second, first := v.Attempts[0], v.Attempts[1]
	if first.Fence != 1 || first.Outcome != "failed" || !strings.Contains(first.Error, boom.Error()) || first.Worker != "worker-7" ||
		first.Finished == nil || first.DurationMS == nil {
		t.Errorf("first attempt %+v", first)
	}
	if second.Fence != 2 || second.Outcome != "succeeded" || second.Error != "" || second.Finished == nil || second.Started.Before(first.Started) {
		t.Errorf("second attempt %+v", second)
	}
	var story []string
	for _, e := range v.Timeline {
		story = append(story, e.What)
	}
	want := []string{"written to the outbox", "attempt with fence 1 claimed by worker-7", "attempt with fence 1: failed",
		"attempt with fence 2 claimed by worker-7", "attempt with fence 2: succeeded"}
	if strings.Join(story, "; ") != strings.Join(want, "; ") {
		t.Errorf("timeline %q, want %q", story, want)
	}

	doc := c.get("/admin/jobs/" + key).Doc(t)
	if n := doc.Find("table tbody tr").Length(); n != 2 {
		t.Errorf("the page lists %d attempts, want 2", n)
	}
	if !strings.Contains(doc.Find("table tbody").Text(), boom.Error()) {
		t.Error("the page does not show the failed attempt's error")
	}
	if doc.Find("form#discard").Length() != 0 {
		t.Error("a succeeded job offers a discard")
	}
	for _, from := range []string{"/admin/jobs", "/admin/orders/" + o.ID} {
		if c.get(from).Doc(t).Find(`a[href="/admin/jobs/`+key+`"]`).Length() == 0 {
			t.Errorf("%s does not link to the job page", from)
		}
	}
	if p := c.get("/admin/jobs/invoice:generate:ORD-NONE"); p.StatusCode != 404 {
		t.Errorf("an unknown job's page: %d, want 404", p.StatusCode)
	}
}
