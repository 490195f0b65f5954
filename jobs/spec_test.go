package jobs_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// TestBusinessTasksPinned pins what each business task is, as the outbox
// writes it and the relay hands it to Asynq: type, task id, queue,
// payload JSON, time, retries and timeout. Renaming or moving a job must
// leave all of it alone — tasks already in Redis and rows already in the
// outbox carry these.
func TestBusinessTasksPinned(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("WIB", 7*3600))
	at := now.UTC().Format(time.UnixDate)
	for _, c := range []struct {
		row                       models.OutboxMessage
		typ, id, queue, payload   string
		maxRetry, timeout, procAt string
	}{
		{jobs.Row(jobs.InvoiceArgs{OrderID: "ORD-1"}, now), "invoice:generate", "invoice:generate:ORD-1", "critical",
			`{"order_id":"ORD-1"}`, "MaxRetry(25)", "Timeout(1m0s)", at},
		{jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: "ORD-1"}, now), "email:send", "email:send:order_paid:ORD-1", "default",
			`{"template":"order_paid","order_id":"ORD-1"}`, "MaxRetry(25)", "Timeout(2m0s)", at},
		{jobs.Row(jobs.ExpireArgs{OrderID: "ORD-1"}, now), "order:expire", "order:expire:ORD-1", "default",
			`{"order_id":"ORD-1"}`, "MaxRetry(25)", "Timeout(1m0s)", at},
		{models.OutboxMessage{TaskType: "unknown:type", TaskID: "unknown:type:x", Queue: "default", ProcessAt: now.UTC()},
			"unknown:type", "unknown:type:x", "default", "", "MaxRetry(10)", "Timeout(1m0s)", at},
	} {
		m := c.row
		if m.TaskType != c.typ || m.TaskID != c.id || m.Queue != c.queue || string(m.Payload) != c.payload ||
			!m.ProcessAt.Equal(now) || m.ProcessAt.Location() != time.UTC || (c.payload != "" && m.Status != models.OutboxPending) {
			t.Errorf("row %+v, want type %s, id %s, queue %s, payload %s, due %s UTC, pending", m, c.typ, c.id, c.queue, c.payload, now)
		}
		want := []string{`TaskID("` + c.id + `")`, `Queue("` + c.queue + `")`, "ProcessAt(" + c.procAt + ")",
			c.maxRetry, c.timeout, "Retention(1h0m0s)"}
		if got := optionStrings(jobs.EnqueueOptions(m, time.Hour)); !slices.Equal(got, want) {
			t.Errorf("%s: options %q, want %q", c.id, got, want)
		}
	}
}

// TestTasksWriteTheBusinessTasks: the rows Tasks hands the app packages
// are the pinned tasks above — a paid order's invoice and email carrying
// the callback's request id, the expiry due at the order's deadline, and
// a refund's send, due at once —
// and the console's filters offer exactly their types.
func TestTasksWriteTheBusinessTasks(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var ids, payloads []string
	for _, m := range (jobs.Tasks{}).Paid("ORD-1", "req-1", now) {
		ids, payloads = append(ids, m.TaskID), append(payloads, string(m.Payload))
	}
	if want := []string{"invoice:generate:ORD-1", "email:send:order_paid:ORD-1"}; !slices.Equal(ids, want) {
		t.Errorf("paid: tasks %q, want %q", ids, want)
	}
	if want := []string{`{"order_id":"ORD-1","request_id":"req-1"}`, `{"template":"order_paid","order_id":"ORD-1","request_id":"req-1"}`}; !slices.Equal(payloads, want) {
		t.Errorf("paid: payloads %q, want %q", payloads, want)
	}
	if m := (jobs.Tasks{}).Expire("ORD-1", now.Add(time.Hour)); m.TaskID != "order:expire:ORD-1" || !m.ProcessAt.Equal(now.Add(time.Hour)) {
		t.Errorf("expire: %s due %v, want order:expire:ORD-1 due an hour on", m.TaskID, m.ProcessAt)
	}
	if m := (jobs.Tasks{}).Refund(7, "ORD-1", "req-9", now); m.TaskID != "refund:send:7" || m.Queue != jobs.QueueCritical ||
		string(m.Payload) != `{"refund_request_id":7,"order_id":"ORD-1","request_id":"req-9"}` || !m.ProcessAt.Equal(now) {
		t.Errorf("refund: %s on %s, %s, due %v; want refund:send:7 on the critical queue, due now", m.TaskID, m.Queue, m.Payload, m.ProcessAt)
	}
	if m := (jobs.Tasks{}).Alert("audit.red:after-run-3", now); m.TaskID != "alert:send:audit.red:after-run-3" || m.Queue != jobs.QueueDefault ||
		string(m.Payload) != `{"event_id":"audit.red:after-run-3"}` || !m.ProcessAt.Equal(now) {
		t.Errorf("alert: %s on %s, %s, due %v; want alert:send:audit.red:after-run-3 on the default queue, due now", m.TaskID, m.Queue, m.Payload, m.ProcessAt)
	}
	types := (&jobs.Console{}).TaskTypes()
	if want := []string{"invoice:generate", "email:send", "order:expire", "refund:send", "alert:send"}; !slices.Equal(types, want) {
		t.Errorf("task types %q, want %q", types, want)
	}
}

// TestPeriodicTasksPinned pins the maintenance schedule and how each
// period's task is queued: on the maintenance queue, id <type>:<bucket>,
// three retries, a period's timeout and retention.
func TestPeriodicTasksPinned(t *testing.T) {
	t.Parallel()
	every := map[string]time.Duration{
		"sweep:stuck": time.Minute, "sweep:expired": time.Minute, "prune": time.Hour,
		"stats:rollup": time.Minute, "outbox:reconcile": time.Minute, "payments:poll": time.Minute,
		"alerts:watch": time.Minute, "gateway:janitor": time.Minute,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := &recordingQueue{want: len(every), done: cancel}
	before := time.Now().Unix()
	if err := jobs.NewScheduler(q, testenv.Logger(t), jobs.Periodic()).Run(ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Unix()
	if len(q.got) != len(every) {
		t.Fatalf("the scheduler enqueued %d tasks, want one of each of %d", len(q.got), len(every))
	}
	for _, e := range q.got {
		d, ok := every[e.typ]
		if !ok {
			t.Errorf("unexpected periodic task %s", e.typ)
			continue
		}
		delete(every, e.typ)
		per := int64(d.Seconds())
		idOK := false
		for s := before; s <= after; s++ { // the bucket of any second the run spanned
			idOK = idOK || e.opts[0] == `TaskID("`+e.typ+":"+strconv.FormatInt(s/per, 10)+`")`
		}
		want := []string{e.opts[0], `Queue("maintenance")`, "MaxRetry(3)", "Timeout(" + d.String() + ")", "Retention(" + d.String() + ")"}
		if !idOK || !slices.Equal(e.opts, want) {
			t.Errorf("%s: options %q, want %q with the id %s:<unix/%d>", e.typ, e.opts, want, e.typ, per)
		}
	}
}

// TestMuxServesEverySpec: the mux is built from the specs, so every task
// type above has a handler, and every queue they use is one the worker
// serves.
func TestMuxServesEverySpec(t *testing.T) {
	t.Parallel()
	mux := jobs.NewMux(jobs.Deps{Guard: &jobs.Guard{}, Maintenance: &jobs.Maintenance{}, Reconciler: &jobs.Reconciler{}})
	for typ, queue := range map[string]string{
		"invoice:generate": "critical", "email:send": "default", "order:expire": "default",
		"sweep:stuck": "maintenance", "sweep:expired": "maintenance", "prune": "maintenance",
		"stats:rollup": "maintenance", "outbox:reconcile": "maintenance", "payments:poll": "maintenance",
		"gateway:janitor": "maintenance",
	} {
		if _, pattern := mux.Handler(asynq.NewTask(typ, nil)); pattern != typ {
			t.Errorf("%s is routed to %q", typ, pattern)
		}
		if jobs.QueueWeights()[queue] == 0 {
			t.Errorf("%s runs on %s, which the worker does not serve", typ, queue)
		}
	}
}

// recordingQueue records what is enqueued and calls done once it has want.
type recordingQueue struct {
	want int
	done func()

	mu  sync.Mutex
	got []enqueued
}

type enqueued struct {
	typ  string
	opts []string
}

func (q *recordingQueue) EnqueueContext(_ context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.got = append(q.got, enqueued{task.Type(), optionStrings(opts)})
	if len(q.got) == q.want {
		q.done()
	}
	return &asynq.TaskInfo{}, nil
}

func optionStrings(opts []asynq.Option) []string {
	s := make([]string, len(opts))
	for i, o := range opts {
		s[i] = o.String()
	}
	return s
}

// With RECONCILE_AFTER under a minute the reconciler looks that often;
// otherwise the schedule is the default one, and nothing else changes.
func TestScheduleFollowsReconcileAfter(t *testing.T) {
	t.Parallel()
	every := func(schedule []jobs.Spec, taskType string) time.Duration {
		for _, s := range schedule {
			if s.Task.Type == taskType {
				return s.Every
			}
		}
		return 0
	}
	if got := every(jobs.Schedule(5*time.Second), jobs.TaskReconcile); got != 5*time.Second {
		t.Errorf("RECONCILE_AFTER=5s: the reconciler runs every %s, want 5s", got)
	}
	if got := every(jobs.Schedule(10*time.Minute), jobs.TaskReconcile); got != time.Minute {
		t.Errorf("RECONCILE_AFTER=10m: the reconciler runs every %s, want 1m", got)
	}
	if got := every(jobs.Schedule(5*time.Second), jobs.TaskSweepStuck); got != time.Minute {
		t.Errorf("the stuck sweep runs every %s, want 1m", got)
	}
	if every(jobs.Periodic(), jobs.TaskReconcile) != time.Minute {
		t.Error("Schedule changed Periodic()")
	}
}

// The catch-up is scheduled only with CATCH_UP_EVERY, every that long,
// and every worker serves it.
func TestCatchUpScheduledOnlyWhenSet(t *testing.T) {
	t.Parallel()
	find := func(schedule []jobs.Spec) (jobs.Spec, bool) {
		for _, s := range schedule {
			if s.Task.Type == jobs.TaskCatchUp {
				return s, true
			}
		}
		return jobs.Spec{}, false
	}
	if _, ok := find(jobs.WithCatchUp(jobs.Schedule(time.Minute), 0)); ok {
		t.Error("CATCH_UP_EVERY unset: the catch-up is scheduled")
	}
	if _, ok := find(jobs.Periodic()); ok {
		t.Error("the catch-up is in the default schedule")
	}
	if s, ok := find(jobs.WithCatchUp(jobs.Schedule(time.Minute), 6*time.Hour)); !ok || s.Every != 6*time.Hour || s.Task.Queue != jobs.QueueMaintenance {
		t.Errorf("CATCH_UP_EVERY=6h: %+v, %v; want every 6h on the maintenance queue", s, ok)
	}
	mux := jobs.NewMux(jobs.Deps{Guard: &jobs.Guard{}, Maintenance: &jobs.Maintenance{}, Reconciler: &jobs.Reconciler{}})
	if _, pattern := mux.Handler(asynq.NewTask(jobs.TaskCatchUp, nil)); pattern != jobs.TaskCatchUp {
		t.Errorf("%s is routed to %q", jobs.TaskCatchUp, pattern)
	}
}

// A catch-up an admin asked for on the console carries the admin to the
// run, through the outbox row's payload; the scheduled one (no payload)
// is asked by nobody, and a payload that does not decode is not retried.
func TestCatchUpTaskCarriesWhoAsked(t *testing.T) {
	t.Parallel()
	var got []string
	m := &jobs.Maintenance{CatchUpRun: func(_ context.Context, askedBy string) error {
		got = append(got, askedBy)
		return nil
	}}
	row := jobs.Tasks{}.CatchUp(time.Now(), "owner@example.com")
	for _, payload := range [][]byte{row.Payload, nil} {
		if err := m.CatchUp(context.Background(), asynq.NewTask(jobs.TaskCatchUp, payload)); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []string{"owner@example.com", ""}) {
		t.Errorf("runs asked by %q; want the admin's, then nobody's", got)
	}
	if err := m.CatchUp(context.Background(), asynq.NewTask(jobs.TaskCatchUp, []byte("{"))); !errors.Is(err, asynq.SkipRetry) {
		t.Errorf("a payload that does not decode: %v; want SkipRetry", err)
	}
}
