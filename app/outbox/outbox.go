// Package outbox writes tasks into outbox_messages inside the caller's
// transaction, so a task exists exactly when the state change that causes
// it committed. A relay (jobs/relay.go) moves due rows to the queue.
package outbox

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/models"
)

// Add writes msgs in tx. A message whose task_id is already in the outbox
// is skipped: the task it names exists already. Each row carries the
// trace context of tx's context (nil with tracing off), so the relay and
// the worker continue the trace of what caused the task.
func Add(tx *gorm.DB, msgs ...models.OutboxMessage) (err error) {
	if len(msgs) == 0 {
		return nil
	}
	ctx, span := tracing.Start(tx.Statement.Context, "outbox.add", attribute.Int("sekali.outbox.rows", len(msgs)))
	defer func() { tracing.End(span, err) }()
	if _, err := addStatement(ctx, msgs).Exec(tx.WithContext(ctx)); err != nil {
		return fmt.Errorf("outbox.Add: %w", err)
	}
	return nil
}

// Queue is Add for a transaction that sends several statements in one
// round trip (store.Tx): it adds the statement that writes msgs to b.
func Queue(ctx context.Context, b *pgx.Batch, msgs ...models.OutboxMessage) {
	if len(msgs) == 0 {
		return
	}
	ctx, span := tracing.Start(ctx, "outbox.add", attribute.Int("sekali.outbox.rows", len(msgs)))
	// The span ends with the statement's own result, an error included.
	// When an earlier statement of b fails, this one never runs, and its
	// span is never ended, so never exported: the trace shows no add.
	addStatement(ctx, msgs).Queue(b).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		tracing.End(span, err)
		return err
	}
}

//go:embed sql/add.sql
var addSQL string

// addStatement writes msgs in one statement, a column of values each, with
// the trace context of ctx on the rows that have none.
func addStatement(ctx context.Context, msgs []models.OutboxMessage) store.Statement {
	tp := tracing.Traceparent(ctx)
	n := len(msgs)
	var (
		types, taskIDs, queues, statuses, lastErrors = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		payloads                                     = make([][]byte, n)
		processAt, createdAt                         = make([]time.Time, n), make([]time.Time, n)
		dispatchedAt                                 = make([]*time.Time, n)
		attempts                                     = make([]int32, n)
		traceparents                                 = make([]*string, n)
	)
	now := time.Now().UTC()
	for i, m := range msgs {
		types[i], payloads[i], taskIDs[i], queues[i] = m.TaskType, m.Payload, m.TaskID, m.Queue
		processAt[i], statuses[i], attempts[i], lastErrors[i] = m.ProcessAt, string(m.Status), int32(m.Attempts), m.LastError
		createdAt[i], dispatchedAt[i], traceparents[i] = m.CreatedAt, m.DispatchedAt, m.Traceparent
		if createdAt[i].IsZero() {
			createdAt[i] = now
		}
		if traceparents[i] == nil && tp != "" {
			traceparents[i] = &tp
		}
	}
	return store.Statement{SQL: addSQL, Args: []any{types, payloads, taskIDs, queues, processAt, statuses, attempts,
		lastErrors, createdAt, dispatchedAt, traceparents}}
}

// ClaimBatch locks up to n due pending rows (process_at has come), oldest
// first, skipping rows another relay has locked. The locks last until tx
// ends, so the caller marks them in the same transaction.
func ClaimBatch(tx *gorm.DB, n int) ([]models.OutboxMessage, error) {
	var msgs []models.OutboxMessage
	err := tx.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"}).
		Where("status = ? AND process_at <= now()", models.OutboxPending).
		Order("id").Limit(n).Find(&msgs).Error
	if err != nil {
		return nil, fmt.Errorf("outbox.ClaimBatch: %w", err)
	}
	return msgs, nil
}

// MarkDispatched records that the queue has the tasks of ids.
func MarkDispatched(tx *gorm.DB, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	err := tx.Model(&models.OutboxMessage{}).Where("id IN ?", ids).
		Updates(map[string]any{"status": models.OutboxDispatched, "dispatched_at": gorm.Expr("now()"), "attempts": gorm.Expr("attempts + 1")}).Error
	if err != nil {
		return fmt.Errorf("outbox.MarkDispatched: %w", err)
	}
	return nil
}

// MarkFailed records a failed attempt to hand row id to the queue; it stays
// pending.
func MarkFailed(tx *gorm.DB, id int64, lastError string) error {
	err := tx.Model(&models.OutboxMessage{}).Where("id = ?", id).
		Updates(map[string]any{"attempts": gorm.Expr("attempts + 1"), "last_error": lastError}).Error
	if err != nil {
		return fmt.Errorf("outbox.MarkFailed: %w", err)
	}
	return nil
}

// Filter selects outbox rows for the console's list.
type Filter struct {
	Status models.OutboxStatus // pending or dispatched; "" for both
	Type   string              // a task type
	TaskID string              // a prefix of the task id
	Before int64               // keyset cursor: ids below it
	Limit  int
}

// List returns the newest outbox rows matching f and the cursor of the
// next page (0 on the last).
func List(ctx context.Context, db *gorm.DB, f Filter) ([]models.OutboxMessage, int64, error) {
	q := db.WithContext(ctx).Model(&models.OutboxMessage{})
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Type != "" {
		q = q.Where("task_type = ?", f.Type)
	}
	if f.TaskID != "" {
		q = q.Where("task_id LIKE ?", store.LikePrefix(f.TaskID))
	}
	var rows []models.OutboxMessage
	next, err := store.Keyset(q, f.Before, f.Limit, &rows, func(m models.OutboxMessage) int64 { return m.ID })
	if err != nil {
		return nil, 0, fmt.Errorf("outbox.List: %w", err)
	}
	return rows, next, nil
}
