package loadtest_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/loadtest/internal/serveproc"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// sekaliBinary builds the app's cmd/sekali once per test binary, in the
// app's module (with its go.mod, as make build does): the server the
// replayer is run against.
func sekaliBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "replay-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "sekali")
		binErr = serveproc.Build("..", binPath) // the app's module
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// testApp is a real `sekali serve` on a fresh database, its own Redis and
// a free port, stopped when the test ends.
type testApp struct {
	URL string
	env map[string]string
}

func (a *testApp) getenv(k string) string { return a.env[k] }

// startApp runs `sekali serve` with the test environment plus env.
func startApp(t *testing.T, env map[string]string) *testApp {
	t.Helper()
	a := &testApp{env: map[string]string{
		"HTTP_ADDR":              "127.0.0.1:0",
		"SANDBOX_WEBHOOK_SECRET": testenv.SandboxSecret,
		"ORDER_TOKEN_SECRET":     testenv.OrderTokenSecret,
		"LOG_LEVEL":              "warn", // what went wrong, into the test's log
		"DB_MAX_CONNS":           "10",
		"OPEN_ORDERS_PER_CLIENT": "0", // every order comes from 127.0.0.1
		"REQUEST_TIMEOUT":        testenv.Budget(t).String(),
	}}
	for k, v := range env {
		a.env[k] = v
	}
	if a.env["REDIS_URL"] == "" {
		a.env["REDIS_URL"] = testenv.StartRedis(t).URL() // Asynq's keys are global: one server per app
	}
	if a.env["DATABASE_URL"] == "" {
		a.env["DATABASE_URL"] = testenv.NewDatabaseURL(t)
	}
	vars := make([]string, 0, len(a.env))
	for k, v := range a.env {
		vars = append(vars, k+"="+v)
	}
	a.URL = serveproc.Start(t, sekaliBinary(t), vars, logOutput(t))
	return a
}

// freeAddr is a free local address, known before the app listens there.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // the app listens there next
	return ln.Addr().String()
}

// logOutput is where a test's `sekali` writes its log: the test's own
// log, shown when it fails (testenv.LogWriter).
func logOutput(t testing.TB) io.Writer { return testenv.LogWriter(t) }
