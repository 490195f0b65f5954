// Package store opens Sekali's PostgreSQL database, applies its migrations
// and runs transactions the way every package needs them: at READ
// COMMITTED, retried a bounded number of times on deadlock or serialization
// failure, with "the database is unavailable" turned into an error that
// answers 503.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Open connects to databaseURL with a pool of at most maxConns
// connections. A request that cannot get a connection waits only until its
// context's deadline.
func Open(ctx context.Context, databaseURL string, maxConns int, log *slog.Logger) (*gorm.DB, error) {
	dsn, err := withDefaultParams(databaseURL)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{
		SkipDefaultTransaction: true, // single statements need no transaction of their own
		Logger:                 newLogger(log),
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("store.Open: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("store.Open: %w", err)
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// Close closes db's pool.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks that the database answers (for /readyz).
func Ping(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// withDefaultParams adds a connect timeout, so that a database that does
// not answer fails a connection attempt instead of hanging it.
func withDefaultParams(databaseURL string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", fmt.Errorf("store: bad database URL: %w", errors.Unwrap(err))
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", "5")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// slowQuery is how long a statement runs before it is logged.
const slowQuery = time.Second

// newLogger sends GORM's own messages (slow queries and failed
// statements, without their values) to slog.
func newLogger(log *slog.Logger) logger.Interface {
	if log == nil {
		return logger.Discard
	}
	return quietLogger{logger.NewSlogLogger(log, logger.Config{
		SlowThreshold:             slowQuery,
		IgnoreRecordNotFoundError: true,
		ParameterizedQueries:      true, // never put values (emails, amounts) into a log line
		LogLevel:                  logger.Warn,
	})}
}

// quietLogger formats a statement's text only for a line it writes.
// GORM's slog logger builds the text of every statement it is told about,
// logged or not — with a regular expression over the SQL, about a tenth
// of the server's CPU time on the callback path (docs/performance.md).
type quietLogger struct{ logger.Interface }

// Trace passes on only failed and slow statements, which are logged.
func (l quietLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if (err == nil || errors.Is(err, gorm.ErrRecordNotFound)) && time.Since(begin) <= slowQuery {
		return
	}
	l.Interface.Trace(ctx, begin, fc, err)
}

// LogMode keeps the wrapper; at Info (gorm's Debug) every statement is
// passed on, as it is then logged.
func (l quietLogger) LogMode(level logger.LogLevel) logger.Interface {
	if level >= logger.Info {
		return l.Interface.LogMode(level)
	}
	return quietLogger{l.Interface.LogMode(level)}
}

// ParamsFilter keeps the values out of the lines that are written: GORM
// asks its logger for this method, which embedding alone would hide.
func (l quietLogger) ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any) {
	if f, ok := l.Interface.(gorm.ParamsFilter); ok {
		return f.ParamsFilter(ctx, sql, params...)
	}
	return sql, params
}
