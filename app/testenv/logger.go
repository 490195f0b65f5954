package testenv

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// Logger returns a logger for code under test that writes into the
// test's own log: shown when the test fails (or with -v), kept quiet when
// it passes. With SEKALI_TEST_LOG set it logs at debug level and also to
// stderr as JSON lines.
//
// Code under test may log from goroutines that outlive the test (a
// worker stopping, a batch writer flushing); once the test and its
// cleanups are over, their lines are dropped, as testing.T forbids them.
func Logger(tb testing.TB) *slog.Logger {
	w := &testLog{tb: tb}
	tb.Cleanup(w.close) // registered first, so it runs after the cleanups that stop the code
	level := slog.LevelInfo
	if os.Getenv("SEKALI_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	h := slog.Handler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	if os.Getenv("SEKALI_TEST_LOG") != "" {
		h = slog.NewMultiHandler(h, slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(h)
}

// LogWriter is where code under test writes its own log lines (a
// process's stderr, `run`'s): into the test's log, as Logger's, and with
// SEKALI_TEST_LOG set also to stderr. Lines written after the test and
// its cleanups are over are dropped.
func LogWriter(tb testing.TB) io.Writer {
	w := &testLog{tb: tb}
	tb.Cleanup(w.close) // registered before the cleanups that stop the code: runs after them
	if os.Getenv("SEKALI_TEST_LOG") != "" {
		return io.MultiWriter(w, os.Stderr)
	}
	return w
}

// testLog writes each log line with tb.Log until the test is over.
type testLog struct {
	mu     sync.Mutex
	tb     testing.TB
	closed bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLog) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}
