package outbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// kind is a task type and its queue, as the outbox stores them.
type kind struct{ Type, Queue string }

var (
	invoiceKind = kind{Type: "test:invoice", Queue: "critical"}
	emailKind   = kind{Type: "test:email", Queue: "default"}
)

// task is a pending outbox row of kind k for key, due at processAt.
func task(k kind, key string, processAt time.Time) models.OutboxMessage {
	return models.OutboxMessage{TaskType: k.Type, Payload: []byte(`{"order_id":"` + key + `"}`), TaskID: k.Type + ":" + key,
		Queue: k.Queue, ProcessAt: processAt.UTC(), Status: models.OutboxPending}
}

// mustAdd adds msgs in a transaction of their own and returns their ids.
func mustAdd(t *testing.T, db *gorm.DB, msgs ...models.OutboxMessage) []int64 {
	t.Helper()
	if err := db.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		var row models.OutboxMessage
		if err := db.Take(&row, "task_id = ?", m.TaskID).Error; err != nil {
			t.Fatalf("row of %s: %v", m.TaskID, err)
		}
		ids[i] = row.ID
	}
	return ids
}

func allRows(t *testing.T, db *gorm.DB) []models.OutboxMessage {
	t.Helper()
	var rows []models.OutboxMessage
	if err := db.Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

func idsOf(msgs []models.OutboxMessage) []int64 {
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// listen opens a connection of its own to databaseURL and LISTENs on
// channels; the connection is closed when the test ends.
func listen(t *testing.T, databaseURL string, channels ...string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, c := range channels {
		if _, err := conn.Exec(context.Background(), "LISTEN "+pgx.Identifier{c}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// nextNotification waits, at most the test's budget, for the next
// notification on conn.
func nextNotification(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Budget(t))
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return n.Channel
}

// Add writes each message as a pending row with its type, queue, payload
// and due time. A later Add of a task whose task_id is in the outbox
// already, or a second message with the same task_id in one Add, is
// skipped without an error: the first row stays as it was. Add of nothing
// does nothing.
func TestAddSkipsTaskIDAlreadyInOutbox(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	due := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	mustAdd(t, db, task(invoiceKind, "ORD-1", due), task(emailKind, "ORD-1", due))

	again := task(invoiceKind, "ORD-1", due.Add(time.Hour))
	again.Payload = []byte(`{"order_id":"changed"}`)
	dup := task(emailKind, "ORD-2", due)
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := outbox.Add(tx); err != nil {
			return err
		}
		return outbox.Add(tx, again, dup, dup)
	})
	if err != nil {
		t.Fatalf("Add of task ids already there: %v; want them skipped", err)
	}
	rows := allRows(t, db)
	if len(rows) != 3 {
		t.Fatalf("%d rows (%+v), want 3", len(rows), rows)
	}
	first := rows[0]
	if first.TaskID != "test:invoice:ORD-1" || first.TaskType != "test:invoice" || first.Queue != jobs.QueueCritical ||
		string(first.Payload) != `{"order_id":"ORD-1"}` || !first.ProcessAt.Equal(due) || first.Status != models.OutboxPending ||
		first.Attempts != 0 || first.LastError != "" || first.DispatchedAt != nil {
		t.Errorf("first row %+v; want the first Add's task, pending, due %s", first, due)
	}
	if rows[1].TaskID != "test:email:ORD-1" || rows[1].Queue != jobs.QueueDefault || rows[2].TaskID != "test:email:ORD-2" {
		t.Errorf("rows %s, %s; want test:email:ORD-1 on default, then test:email:ORD-2", rows[1].TaskID, rows[2].TaskID)
	}
}

// Add writes in the caller's transaction: when that transaction rolls
// back, the task does not exist.
func TestAddIsPartOfCallersTransaction(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	errAbort := errors.New("the state change failed")
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := outbox.Add(tx, task(invoiceKind, "ORD-1", time.Now())); err != nil {
			return err
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatal(err)
	}
	if rows := allRows(t, db); len(rows) != 0 {
		t.Errorf("%d rows after the rollback, want 0", len(rows))
	}
}

// ClaimBatch returns only pending rows whose process_at has come, in id
// order (the order they were written, not their due time), at most n:
// neither a row due later nor a dispatched row.
func TestClaimBatchReturnsDuePendingRowsOldestFirst(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	now := time.Now()
	ids := mustAdd(t, db,
		task(invoiceKind, "due-1", now.Add(-time.Hour)),
		task(invoiceKind, "later", now.Add(time.Hour)),
		task(invoiceKind, "due-2-earlier", now.Add(-2*time.Hour)),
		task(invoiceKind, "dispatched", now.Add(-time.Hour)),
		task(invoiceKind, "due-3", now.Add(-time.Minute)),
		task(invoiceKind, "due-4", now.Add(-time.Minute)),
	)
	if err := outbox.MarkDispatched(db, []int64{ids[3]}); err != nil {
		t.Fatal(err)
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		three, err := outbox.ClaimBatch(tx, 3)
		if err != nil {
			return err
		}
		if got, want := idsOf(three), []int64{ids[0], ids[2], ids[4]}; !slices.Equal(got, want) {
			t.Errorf("ClaimBatch(3) = ids %v, want %v", got, want)
		}
		all, err := outbox.ClaimBatch(tx, 10)
		if err != nil {
			return err
		}
		if got, want := idsOf(all), []int64{ids[0], ids[2], ids[4], ids[5]}; !slices.Equal(got, want) {
			t.Errorf("ClaimBatch(10) = ids %v, want %v", got, want)
		}
		if len(all) > 0 && (all[0].TaskID != "test:invoice:due-1" || string(all[0].Payload) != `{"order_id":"due-1"}`) {
			t.Errorf("claimed row %+v; want the whole row of due-1", all[0])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Two transactions claiming at once, each holding its locks until both
// have claimed, get disjoint rows (SKIP LOCKED): each gets its full batch,
// no id twice, and together the oldest 2n due rows. Once both have ended
// their locks are gone and every row is claimable again.
func TestClaimBatchConcurrentTransactionsGetDisjointRows(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	past := time.Now().Add(-time.Hour)
	var msgs []models.OutboxMessage
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		msgs = append(msgs, task(invoiceKind, k, past))
	}
	ids := mustAdd(t, db, msgs...)

	const n = 4
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Budget(t))
	defer cancel()
	claimed := make([][]int64, 2)
	var both sync.WaitGroup // both transactions have claimed
	both.Add(2)
	bothClaimed := make(chan struct{})
	go func() { both.Wait(); close(bothClaimed) }()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			<-start
			err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				msgs, err := outbox.ClaimBatch(tx, n)
				claimed[i] = idsOf(msgs)
				both.Done()
				if err != nil {
					return err
				}
				select { // hold the locks until the other has claimed too
				case <-bothClaimed:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			if err != nil {
				t.Errorf("transaction %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()

	if len(claimed[0]) != n || len(claimed[1]) != n {
		t.Errorf("claimed %v and %v; want %d rows each", claimed[0], claimed[1], n)
	}
	union := append(slices.Clone(claimed[0]), claimed[1]...)
	slices.Sort(union)
	if len(slices.Compact(slices.Clone(union))) != len(union) {
		t.Errorf("claimed %v and %v: a row was claimed twice", claimed[0], claimed[1])
	}
	if !slices.Equal(union, ids[:2*n]) {
		t.Errorf("claimed together %v, want the oldest %d: %v", union, 2*n, ids[:2*n])
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		all, err := outbox.ClaimBatch(tx, 100)
		if got := idsOf(all); err == nil && !slices.Equal(got, ids) {
			t.Errorf("after both ended, ClaimBatch = %v, want every row %v", got, ids)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// MarkFailed counts an attempt and records its error; the row stays
// pending and claimable. MarkDispatched counts an attempt, marks the rows
// dispatched with a dispatch time, keeps the last error, and takes them
// out of ClaimBatch. Rows not named are untouched; marking no ids is a
// no-op.
func TestMarkDispatchedAndMarkFailed(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	past := time.Now().Add(-time.Hour)
	ids := mustAdd(t, db, task(invoiceKind, "a", past), task(invoiceKind, "b", past), task(invoiceKind, "c", past))
	a, b, c := ids[0], ids[1], ids[2]

	err := db.Transaction(func(tx *gorm.DB) error {
		if err := outbox.MarkFailed(tx, a, "enqueue: connection refused"); err != nil {
			return err
		}
		if err := outbox.MarkFailed(tx, a, "enqueue: i/o timeout"); err != nil {
			return err
		}
		return outbox.MarkDispatched(tx, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := allRows(t, db)
	if r := rows[0]; r.Status != models.OutboxPending || r.Attempts != 2 || r.LastError != "enqueue: i/o timeout" || r.DispatchedAt != nil {
		t.Errorf("after two failures: %+v; want pending, 2 attempts, the last error", r)
	}
	for _, r := range rows[1:] {
		if r.Status != models.OutboxPending || r.Attempts != 0 || r.LastError != "" || r.DispatchedAt != nil {
			t.Errorf("a row not marked: %+v; want it untouched", r)
		}
	}

	err = db.Transaction(func(tx *gorm.DB) error {
		claimed, err := outbox.ClaimBatch(tx, 10)
		if err != nil {
			return err
		}
		if got := idsOf(claimed); !slices.Equal(got, ids) {
			t.Errorf("ClaimBatch after failures = %v, want %v: a failed row stays claimable", got, ids)
		}
		return outbox.MarkDispatched(tx, []int64{a, b})
	})
	if err != nil {
		t.Fatal(err)
	}
	rows = allRows(t, db)
	if r := rows[0]; r.Status != models.OutboxDispatched || r.Attempts != 3 || r.LastError != "enqueue: i/o timeout" || r.DispatchedAt == nil {
		t.Errorf("a failed then dispatched: %+v; want dispatched, 3 attempts, the last error kept, a dispatch time", r)
	}
	if r := rows[1]; r.Status != models.OutboxDispatched || r.Attempts != 1 || r.LastError != "" || r.DispatchedAt == nil {
		t.Errorf("b dispatched: %+v; want dispatched, 1 attempt, a dispatch time", r)
	}
	if r := rows[2]; r.Status != models.OutboxPending || r.Attempts != 0 || r.DispatchedAt != nil {
		t.Errorf("c not marked: %+v; want it untouched", r)
	}
	err = db.Transaction(func(tx *gorm.DB) error {
		claimed, err := outbox.ClaimBatch(tx, 10)
		if got := idsOf(claimed); err == nil && !slices.Equal(got, []int64{c}) {
			t.Errorf("ClaimBatch after dispatch = %v, want only %d", got, c)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// List returns rows newest first, filtered by status, task type and task
// id prefix (LIKE wildcards in the prefix taken literally), and pages by
// id: each page's cursor is the last id it shows, the next page starts
// below it, and the last page's cursor is 0.
func TestListFiltersAndPages(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)
	ids := mustAdd(t, db,
		task(invoiceKind, "ORD-1", past), // 0
		task(emailKind, "ORD-1", past),   // 1
		task(invoiceKind, "ORD-2", past), // 2
		task(emailKind, "ORD-2", past),   // 3
		task(invoiceKind, "OR_-9", past), // 4: a LIKE wildcard in the id
		task(invoiceKind, "ORD-3", past), // 5
	)
	if err := outbox.MarkDispatched(db, []int64{ids[0], ids[1]}); err != nil {
		t.Fatal(err)
	}
	rev := func(is ...int) []int64 { // ids of rows is, newest first
		out := make([]int64, len(is))
		for j, i := range is {
			out[len(is)-1-j] = ids[i]
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    outbox.Filter
		want []int64
	}{
		{"all", outbox.Filter{}, rev(0, 1, 2, 3, 4, 5)},
		{"pending", outbox.Filter{Status: models.OutboxPending}, rev(2, 3, 4, 5)},
		{"dispatched", outbox.Filter{Status: models.OutboxDispatched}, rev(0, 1)},
		{"type", outbox.Filter{Type: "test:email"}, rev(1, 3)},
		{"pending of a type", outbox.Filter{Status: models.OutboxPending, Type: "test:invoice"}, rev(2, 4, 5)},
		{"task id prefix", outbox.Filter{TaskID: "test:invoice:ORD-"}, rev(0, 2, 5)},
		{"task id prefix with a wildcard", outbox.Filter{TaskID: "test:invoice:OR_"}, rev(4)},
		{"no match", outbox.Filter{TaskID: "nothing"}, rev()},
	} {
		rows, next, err := outbox.List(ctx, db, c.f)
		if got := idsOf(rows); err != nil || next != 0 || !slices.Equal(got, c.want) {
			t.Errorf("%s: List = %v, next %d, %v; want %v, next 0", c.name, got, next, err, c.want)
		}
	}

	var pages [][]int64
	f := outbox.Filter{Limit: 4}
	for range 4 {
		rows, next, err := outbox.List(ctx, db, f)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, idsOf(rows))
		if next == 0 {
			break
		}
		if next != rows[len(rows)-1].ID {
			t.Errorf("cursor %d, want the last id shown, %d", next, rows[len(rows)-1].ID)
		}
		f.Before = next
	}
	if want := [][]int64{rev(2, 3, 4, 5), rev(0, 1)}; !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("pages of 4: %v, want %v", pages, want)
	}
	rows, next, err := outbox.List(ctx, db, outbox.Filter{Status: models.OutboxPending, Limit: 2, Before: ids[5]})
	if got := idsOf(rows); err != nil || next != ids[3] || !slices.Equal(got, rev(3, 4)) {
		t.Errorf("pending below %d, 2 a page: %v, next %d, %v; want %v, next %d", ids[5], got, next, err, rev(3, 4), ids[3])
	}
}

// Notify sends a notification on outbox.Channel, which a LISTEN there
// receives.
func TestNotifyWakesListener(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabaseURL(t)
	db := testenv.OpenDB(t, url)
	conn := listen(t, url, outbox.Channel)
	if err := outbox.Notify(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	if ch := nextNotification(t, conn); ch != outbox.Channel {
		t.Errorf("notified on %q, want %q", ch, outbox.Channel)
	}
}

// A Notifier's Wake leads to a notification on outbox.Channel. Wake never
// blocks, however often it is called and even after Close; Close returns.
func TestNotifierWakeSendsNotification(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabaseURL(t)
	db := testenv.OpenDB(t, url)
	conn := listen(t, url, outbox.Channel)
	n := outbox.NewNotifier(db, testenv.Logger(t))
	for range 1000 {
		n.Wake()
	}
	if ch := nextNotification(t, conn); ch != outbox.Channel {
		t.Errorf("notified on %q, want %q", ch, outbox.Channel)
	}
	n.Close()
	n.Wake()
	n.Wake()
}

// Add itself sends no notification (callers wake the relays after
// commit, so that commits do not queue on the notification lock; see
// migration 00010): a listener on
// outbox.Channel and on another channel, notified on the other channel
// after Add's transaction committed, receives that notification first —
// PostgreSQL delivers notifications in commit order.
func TestAddDoesNotNotify(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabaseURL(t)
	db := testenv.OpenDB(t, url)
	const marker = "outbox_test_marker"
	conn := listen(t, url, outbox.Channel, marker)
	mustAdd(t, db, task(invoiceKind, "ORD-1", time.Now()))
	if err := db.Exec("SELECT pg_notify(?, '')", marker).Error; err != nil {
		t.Fatal(err)
	}
	if ch := nextNotification(t, conn); ch != marker {
		t.Errorf("first notification on %q, want %q: Add notified", ch, marker)
	}
}

// Queue's span ends with its statement's result: a row the table refuses
// (a traceparent over 128 bytes) fails the round trip, and the exported
// span carries that error.
func TestQueueSpanEndsWithItsError(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	spans := tracetest.NewInMemoryExporter()
	tp := tracing.NewProvider(sdktrace.NewSimpleSpanProcessor(spans), "", "web", 1)
	ctx, root := tp.Tracer("test").Start(context.Background(), "callback")
	defer root.End()

	tooLong := strings.Repeat("0", 200)
	refused := task(invoiceKind, "ORD-SPAN", time.Now())
	refused.Traceparent = &tooLong
	err := store.Pipelined(ctx, db, func(tx *store.Tx) error {
		b := &pgx.Batch{}
		outbox.Queue(ctx, b, refused)
		return tx.Send(b)
	})
	if err == nil {
		t.Fatal("a row over the traceparent bound was written")
	}
	var add []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == "outbox.add" {
			add = append(add, s)
		}
	}
	if len(add) != 1 || add[0].Status.Code != codes.Error {
		t.Fatalf("outbox.add spans %+v, want one, ended with the statement's error", add)
	}
	if n := len(allRows(t, db)); n != 0 {
		t.Errorf("%d outbox rows after the failed round trip", n)
	}
}
