package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// TestLoggerFormatsOnlyWhatItWrites: a statement's text is built only for
// a failed or slow statement, which is logged, and never with its values.
func TestLoggerFormatsOnlyWhatItWrites(t *testing.T) {
	var out bytes.Buffer
	l := newLogger(slog.New(slog.NewTextHandler(&out, nil)))
	ctx := context.Background()
	built := 0
	statement := func() (string, int64) { built++; return "SELECT 1 /* the text */", 1 }

	l.Trace(ctx, time.Now(), statement, nil)
	l.Trace(ctx, time.Now(), statement, gorm.ErrRecordNotFound)
	if built != 0 || out.Len() != 0 {
		t.Fatalf("a fast statement that succeeded: text built %d times, logged %q; want neither", built, out.String())
	}
	l.Trace(ctx, time.Now(), statement, errors.New("boom"))
	if built != 1 || !strings.Contains(out.String(), "boom") || !strings.Contains(out.String(), "the text") {
		t.Fatalf("a failed statement: text built %d times, logged %q; want it logged with its text", built, out.String())
	}
	out.Reset()
	l.Trace(ctx, time.Now().Add(-2*slowQuery), statement, nil)
	if built != 2 || !strings.Contains(out.String(), "the text") {
		t.Fatalf("a slow statement: text built %d times, logged %q; want it logged", built, out.String())
	}

	filter, ok := l.(gorm.ParamsFilter)
	if !ok {
		t.Fatal("the logger hides ParamsFilter: GORM would put values into log lines")
	}
	if _, params := filter.ParamsFilter(ctx, "SELECT $1", "buyer@example.com"); params != nil {
		t.Fatalf("ParamsFilter kept the values %v", params)
	}
	if _, ok := l.LogMode(logger.Warn).(gorm.ParamsFilter); !ok {
		t.Fatal("LogMode dropped the wrapper")
	}
}
