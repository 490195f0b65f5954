package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// MaxAttempts bounds how often Transaction runs fn when PostgreSQL reports
// a deadlock or a serialization failure.
const MaxAttempts = 4

// Transaction runs fn in one transaction at the default READ COMMITTED
// level. A deadlock (40P01) or serialization failure (40001) rolls back and
// runs fn again, up to MaxAttempts times, after a short random pause; then,
// like any error that means the database cannot answer now, it becomes an
// EUnavailable error (503). fn must therefore have no effect outside tx.
func Transaction(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return retried(ctx, func() error { return db.WithContext(ctx).Transaction(fn) })
}

// retried runs one try of a transaction until it succeeds, fails for
// another reason than a deadlock or a serialization failure, or has been
// tried MaxAttempts times; its error is classified.
func retried(ctx context.Context, try func() error) error {
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil || !IsRetryable(err) || attempt == MaxAttempts {
			return Classify(err)
		}
		pause := time.Duration(attempt) * time.Duration(5+rand.IntN(20)) * time.Millisecond
		select {
		case <-ctx.Done():
			return Classify(ctx.Err())
		case <-time.After(pause):
		}
	}
}

// Classify turns errors that a retry may fix (no connection, timeout,
// deadlock, shutdown) into an EUnavailable error that still wraps the
// cause. Errors that already carry a code, and everything else, pass
// through unchanged.
func Classify(err error) error {
	var coded *models.Error
	if err == nil || errors.As(err, &coded) {
		return err
	}
	if IsUnavailable(err) {
		return fmt.Errorf("%w: %w", models.Errorf(models.EUnavailable, "the database is unavailable; retry later"), err)
	}
	return err
}

// IsRetryable reports whether err is a deadlock (40P01) or a serialization
// failure (40001): the transaction may succeed when run again.
func IsRetryable(err error) bool {
	code := pgCode(err)
	return code == "40P01" || code == "40001"
}

// IsUnavailable reports whether err means the database could not do the
// work now but may later: no connection, a timeout, a shutdown, too many
// connections, or contention that outlasted the retries.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if IsRetryable(err) {
		return true
	}
	if code := pgCode(err); code != "" {
		return strings.HasPrefix(code, "08") || // connection exception
			strings.HasPrefix(code, "53") || // insufficient resources, too many connections
			strings.HasPrefix(code, "57") || // operator intervention: shutdown, statement timeout
			code == "55P03" // lock not available
	}
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) ||
		pgconn.Timeout(err) ||
		IsConnectionError(err)
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// IsConnectionError reports whether err says the connection itself failed
// (closed, reset, refused) rather than the statement or the deadline. A
// pool may hold several such dead connections after the database comes
// back; each is dropped when it fails.
func IsConnectionError(err error) bool {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) ||
		strings.HasPrefix(pgCode(err), "08")
}

// PgxTransaction runs fn in a transaction on one of db's connections
// through pgx's own API, for what database/sql cannot say: COPY. It is
// not retried; the caller decides what a failure means.
func PgxTransaction(ctx context.Context, db *gorm.DB, fn func(tx pgx.Tx) error) error {
	conn, err := takeConn(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close()
	return onPgx(conn, func(c *pgx.Conn) error { return pgx.BeginFunc(ctx, c, fn) })
}

// takeConn takes one connection of db's pool for the caller alone, until
// it closes it.
func takeConn(ctx context.Context, db *gorm.DB) (*sql.Conn, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	return sqlDB.Conn(ctx)
}

// onPgx runs fn on the pgx connection under conn.
func onPgx(conn *sql.Conn, fn func(c *pgx.Conn) error) error {
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("store: the driver's connection is a %T, not pgx's", driverConn)
		}
		return fn(c.Conn())
	})
}

// Snapshot runs fn, which only reads, in one read-only REPEATABLE READ
// transaction: every statement of fn sees the database as it was at its
// first, so that figures read by several statements (a payment and the
// refunds that hold part of it back) add up even while writers commit
// between them.
func Snapshot(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return Classify(db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY").Error; err != nil {
			return err
		}
		return fn(tx)
	}))
}
