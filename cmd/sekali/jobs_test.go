package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// jobsPay delivers a paid callback for the whole amount of order id.
func (a *testApp) jobsPay(t *testing.T, id string, amount int64) {
	t.Helper()
	r := a.callback(t, "evt_paid_"+id, testenv.SandboxBody(id, "tx-"+id, models.EventPaid, amount))
	if r.Status != 200 || r.str("result") != "processed" {
		t.Fatalf("paid callback for %s: %d %s", id, r.Status, r.Body)
	}
}

// TestRedisOutageDelaysJobsNeverLosesThem: with Redis down, paid
// callbacks still succeed (PostgreSQL is the source of truth) and their
// tasks wait in the outbox; once Redis is back every job runs exactly
// once.
func TestRedisOutageDelaysJobsNeverLosesThem(t *testing.T) {
	t.Parallel()
	rs := testenv.StartRedis(t)
	a := startApp(t, map[string]string{"REDIS_URL": rs.URL()})
	const n, price = 20, 75000
	sku := a.newProduct(t, price, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = a.createOrder(t, map[string]int{sku: 1})
	}

	rs.Stop()
	got := newResults()
	concurrently(n, func(i int) {
		got.add(a.callback(t, "evt_outage_"+ids[i], testenv.SandboxBody(ids[i], fmt.Sprintf("tx-outage-%d", i), models.EventPaid, price)))
	})
	if got.counts["processed"] != n || got.status[200] != n {
		t.Fatalf("paid callbacks with Redis down: results %v, statuses %v; want %d processed, all 200", got.counts, got.status, n)
	}
	const jobRows = "task_type IN ('invoice:generate', 'email:send')"
	testenv.Eventually(t, "the relay to fail to hand a row to Redis", func() bool {
		return a.count(t, "SELECT count(*) FROM outbox_messages WHERE "+jobRows+" AND last_error <> ''") > 0
	})
	if p := a.count(t, "SELECT count(*) FROM outbox_messages WHERE "+jobRows+" AND status = 'pending'"); p != 2*n {
		t.Fatalf("pending invoice+email outbox rows with Redis down = %d, want %d", p, 2*n)
	}
	if c := a.count(t, "SELECT count(*) FROM invoices"); c != 0 {
		t.Fatalf("invoices with Redis down = %d, want 0", c)
	}

	rs.Start()
	start := time.Now()
	testenv.Eventually(t, "an invoice and a sent email for every paid order", func() bool {
		return a.count(t, "SELECT count(*) FROM invoices") == n &&
			a.count(t, "SELECT count(*) FROM outbound_emails WHERE status = 'sent'") == n
	})
	t.Logf("all jobs done %s after Redis came back", time.Since(start).Round(time.Millisecond))
	a.verify(t)

	for _, prefix := range []string{"invoice:generate:", "email:send:order_paid:"} {
		var j struct{ Rows, Succeeded, Attempts int64 }
		err := a.DB.Raw(`SELECT count(*) AS rows, count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
			coalesce(sum(attempts), 0) AS attempts FROM job_executions WHERE idempotency_key LIKE ?`, prefix+"%").Scan(&j).Error
		if err != nil {
			t.Fatal(err)
		}
		if j.Rows != n || j.Succeeded != n || j.Attempts != n {
			t.Errorf("%s jobs: %d rows, %d succeeded, %d attempts in all; want %d, each run once", prefix, j.Rows, j.Succeeded, j.Attempts, n)
		}
	}
	var inv struct{ Count, Orders, Lo, Hi int64 }
	if err := a.DB.Raw("SELECT count(*) AS count, count(DISTINCT order_id) AS orders, min(sequence) AS lo, max(sequence) AS hi FROM invoices").Scan(&inv).Error; err != nil {
		t.Fatal(err)
	}
	if inv.Count != n || inv.Orders != n || inv.Lo != 1 || inv.Hi != n {
		t.Errorf("invoices: %+v; want %d for %d orders numbered 1..%d", inv, n, n, n)
	}
	if s := a.count(t, "SELECT coalesce(sum(attempts), 0) FROM outbound_emails WHERE status = 'sent'"); s != n {
		t.Errorf("email send attempts = %d, want %d (one each)", s, n)
	}
	// Nothing lost: every row dispatched, and the failure was recorded.
	if d := a.count(t, "SELECT count(*) FROM outbox_messages WHERE "+jobRows+" AND status = 'dispatched'"); d != 2*n {
		t.Errorf("dispatched invoice+email outbox rows = %d, want %d", d, 2*n)
	}
	if r := a.count(t, "SELECT count(*) FROM outbox_messages WHERE "+jobRows+" AND attempts > 1"); r == 0 {
		t.Errorf("no outbox row shows a failed attempt before its dispatch")
	}
}

// TestPaidOrderGetsInvoiceAndEmailWithinSeconds: a paid order shows its
// invoice and has its email sent a few seconds after its callback.
func TestPaidOrderGetsInvoiceAndEmailWithinSeconds(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	sku := a.newProduct(t, 120000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	a.jobsPay(t, id, 120000)
	start := time.Now()
	testenv.Eventually(t, "the invoice and the sent email of "+id, func() bool {
		return a.count(t, "SELECT count(*) FROM invoices WHERE order_id = ?", id) == 1 &&
			a.count(t, "SELECT count(*) FROM outbound_emails WHERE key = ? AND status = 'sent'", mail.Key(mail.OrderPaid, id)) == 1
	})
	t.Logf("paid callback to invoice and sent email: %s", time.Since(start).Round(time.Millisecond))

	var number string
	if err := a.DB.Raw("SELECT number FROM invoices WHERE order_id = ?", id).Scan(&number).Error; err != nil {
		t.Fatal(err)
	}
	r := a.do(t, "GET", a.orderURL(id), nil, nil)
	inv, _ := r.JSON["invoice"].(map[string]any)
	if r.Status != 200 || inv == nil || inv["number"] != number {
		t.Fatalf("GET /api/orders/%s: %d, invoice %v; want invoice %s", id, r.Status, r.JSON["invoice"], number)
	}
}

// TestOperatorRequeueOfDoneInvoiceJobIsIgnored: an operator runs a
// succeeded invoice task again — the retained completed task, then a new
// task under the same id after the old one is gone, as after its
// retention expired. The worker runs it and the guard acks it as a
// duplicate: no second invoice, the job row untouched.
func TestOperatorRequeueOfDoneInvoiceJobIsIgnored(t *testing.T) {
	t.Parallel()
	rs := testenv.StartRedis(t)
	a := startApp(t, map[string]string{"REDIS_URL": rs.URL()})
	rdb := rs.Client()
	insp := asynq.NewInspectorFromRedisClient(rdb) // shares rdb, closed by testenv
	client := asynq.NewClientFromRedisClient(rdb)

	sku := a.newProduct(t, 99000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	a.jobsPay(t, id, 99000)
	key := jobs.TaskInvoiceGenerate + ":" + id

	taskState := func() string {
		info, err := insp.GetTaskInfo(jobs.QueueCritical, key)
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
			return "gone"
		case err != nil:
			t.Fatalf("task %s: %v", key, err)
		case info.LastErr != "":
			t.Fatalf("task %s: %s, last error %q", key, info.State, info.LastErr)
		}
		return info.State.String()
	}
	waitCompleted := func(what string) {
		t.Helper()
		testenv.Eventually(t, what+" to complete", func() bool { return taskState() == "completed" })
	}
	var job models.JobExecution
	readJob := func() models.JobExecution {
		t.Helper()
		var j models.JobExecution
		if err := a.DB.Take(&j, "idempotency_key = ?", key).Error; err != nil {
			t.Fatal(err)
		}
		return j
	}
	var number string
	check := func(what string) {
		t.Helper()
		j := readJob()
		if j.Status != models.JobSucceeded || j.Attempts != job.Attempts || j.Fence != job.Fence ||
			!j.FinishedAt.Equal(*job.FinishedAt) || j.ResultHash != job.ResultHash {
			t.Fatalf("%s: job row %+v, want it as it was: %+v", what, j, job)
		}
		var numbers []string
		if err := a.DB.Raw("SELECT number FROM invoices WHERE order_id = ?", id).Scan(&numbers).Error; err != nil {
			t.Fatal(err)
		}
		if len(numbers) != 1 || numbers[0] != number || a.count(t, "SELECT count(*) FROM invoices") != 1 {
			t.Fatalf("%s: invoices of %s = %v, want only %s", what, id, numbers, number)
		}
	}

	waitCompleted("the first run of " + key)
	job = readJob()
	if job.Status != models.JobSucceeded || job.Attempts != 1 || job.FinishedAt == nil {
		t.Fatalf("job after its first run: %+v", job)
	}
	if err := a.DB.Raw("SELECT number FROM invoices WHERE order_id = ?", id).Scan(&number).Error; err != nil || number == "" {
		t.Fatalf("invoice of %s: %q, %v", id, number, err)
	}
	// This app's own series: no other test counts into them.
	dups := func() float64 {
		return a.metric(t, `sekali_job_runs_total{outcome="duplicate_ignored",type="invoice:generate"}`)
	}
	dupsBefore := dups()

	// 1. The completed task is retained: run it again.
	if err := insp.RunTask(jobs.QueueCritical, key); err != nil {
		t.Fatalf("RunTask %s: %v", key, err)
	}
	waitCompleted("the re-run of the retained task")
	check("after re-running the retained task")

	// 2. The id is free again (retention over): a new task, same id.
	if err := insp.DeleteTask(jobs.QueueCritical, key); err != nil {
		t.Fatalf("DeleteTask %s: %v", key, err)
	}
	if s := taskState(); s != "gone" {
		t.Fatalf("task %s after DeleteTask: %s", key, s)
	}
	var row models.OutboxMessage
	if err := a.DB.Take(&row, "task_id = ?", key).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(jobs.NewTask(row, time.Hour)); err != nil {
		t.Fatalf("enqueue %s again: %v", key, err)
	}
	waitCompleted("the new task with the same id")
	check("after a new task with the same id")

	if d := dups() - dupsBefore; d != 2 {
		t.Errorf("duplicate_ignored runs of invoice jobs went up by %v, want 2: the retained task's re-run and the new task's run", d)
	}
	a.verify(t)
}
