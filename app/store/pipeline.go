package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
)

// Statement is one SQL statement and its arguments, written with
// PostgreSQL's own $1, $2, … placeholders. GORM sends such a text as it is
// (it rewrites only ? and @name), and so does a pgx batch: one statement
// serves a transaction that sends it alone (Exec) and one that sends it
// with others in one round trip (Queue). Its text must therefore hold no
// ? and no @.
type Statement struct {
	SQL  string
	Args []any
}

// Exec runs st in tx through GORM and returns how many rows it changed.
func (st Statement) Exec(tx *gorm.DB) (int64, error) {
	res := tx.Exec(st.SQL, st.Args...)
	return res.RowsAffected, res.Error
}

// Queue adds st to b; its result is read by b's caller (pgx's
// QueuedQuery.Exec, Query or QueryRow).
func (st Statement) Queue(b *pgx.Batch) *pgx.QueuedQuery {
	return b.Queue(st.SQL, st.Args...)
}

// Tx is a transaction on one connection of the pool whose statements go
// to PostgreSQL several at a time: each Send is one round trip for all
// the statements of its batch, and the first one carries BEGIN. On two
// shared cores a round trip costs CPU time in both processes (a write, a
// wake-up on each side), not only wall time, so the callback's hot path
// sends its nine statements in two (docs/performance.md). DB gives
// GORM on the same transaction for the statements of the rarer paths,
// one round trip each.
type Tx struct {
	ctx       context.Context
	conn      *sql.Conn
	db        *gorm.DB
	begun     bool
	committed bool
}

// Pipelined runs fn in a Tx at the default READ COMMITTED level. fn's
// first call must be Send (or Commit), which begins the transaction. When
// fn returns nil the transaction commits — with the statements of Commit,
// if fn called it, else alone; when it returns an error it rolls back.
// Deadlocks and serialization failures run fn again, and errors that mean
// the database cannot answer now become EUnavailable, as in Transaction.
func Pipelined(ctx context.Context, db *gorm.DB, fn func(tx *Tx) error) error {
	return retried(ctx, func() error { return pipelinedOnce(ctx, db, fn) })
}

func pipelinedOnce(ctx context.Context, db *gorm.DB, fn func(tx *Tx) error) (err error) {
	conn, err := takeConn(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close() // a connection left inside a transaction is discarded by pgx's ResetSession
	g := db.WithContext(ctx)
	g.Statement.ConnPool = connInTx{conn}
	tx := &Tx{ctx: ctx, conn: conn, db: g}
	defer func() {
		if p := recover(); p != nil {
			tx.rollback()
			panic(p)
		}
	}()
	if err = fn(tx); err != nil {
		tx.rollback()
		return err
	}
	if !tx.committed {
		if err = tx.Commit(nil); err != nil {
			tx.rollback()
		}
	}
	return err
}

// Send runs the statements of b in one round trip (after BEGIN, the first
// time) and reads their results through b's functions. An error in one
// statement ends the round trip there; the transaction then only rolls
// back.
func (t *Tx) Send(b *pgx.Batch) error {
	if t.committed {
		return errors.New("store.Tx: Send after Commit")
	}
	if !t.begun {
		first := &pgx.Batch{}
		first.Queue("BEGIN")
		first.QueuedQueries = append(first.QueuedQueries, b.QueuedQueries...)
		b = first
		t.begun = true
	}
	return onPgx(t.conn, func(c *pgx.Conn) error { return c.SendBatch(t.ctx, b).Close() })
}

// Commit runs the statements of b and COMMIT in one round trip. A result
// of b that its function finds wrong comes too late to undo them, so b
// holds only statements that fail by themselves when they cannot do
// their work (orders.NewMove's, for one): a failed statement ends the
// round trip before COMMIT. A nil b commits alone.
func (t *Tx) Commit(b *pgx.Batch) error {
	if b == nil {
		b = &pgx.Batch{}
	}
	b.Queue("COMMIT")
	err := t.Send(b)
	t.committed = err == nil
	return err
}

// DB is GORM on the transaction's connection, for statements sent one at
// a time. It may be used only between the first Send and Commit.
func (t *Tx) DB() *gorm.DB {
	if !t.begun || t.committed {
		panic("store.Tx: DB outside the transaction")
	}
	return t.db
}

// rollbackTimeout bounds a ROLLBACK sent after the caller's context has
// ended: a connection that cannot roll back within it is closed by pgx,
// and the pool drops it.
const rollbackTimeout = 5 * time.Second

// rollback ends a transaction that failed, even when its context was
// cancelled. When the connection is broken there is nothing to end: pgx
// has closed it, and the pool drops it.
func (t *Tx) rollback() {
	if !t.begun || t.committed {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), rollbackTimeout)
	defer cancel()
	_, _ = t.conn.ExecContext(ctx, "ROLLBACK")
}

// connInTx is the held connection as GORM sees it: inside a transaction.
// GORM's Transaction called on Tx.DB then makes a savepoint, as in any
// transaction, instead of sending a BEGIN (and COMMIT) of its own.
type connInTx struct{ *sql.Conn }

func (connInTx) Commit() error   { return errors.New("store.Tx: commit with Tx.Commit") }
func (connInTx) Rollback() error { return errors.New("store.Tx: roll back by returning an error") }
