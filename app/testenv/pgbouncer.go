package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncer is a pgbouncer process of the test's own in transaction
// pooling mode, on a free port, in front of one database of the test
// server: the way Sekali runs behind a pooler in production.
type PgBouncer struct {
	// URL is the database's URL through the pooler.
	URL string
	// PoolSize is how many server connections it opens at most.
	PoolSize int

	cmd *exec.Cmd
	out *lockedBuffer
}

// StartPgBouncer starts pgbouncer with pool_mode=transaction and at most
// poolSize server connections to the database of databaseURL; it is
// stopped when the test ends. A machine without pgbouncer fails the test
// rather than skipping it: what it checks would go unchecked.
func StartPgBouncer(tb testing.TB, databaseURL string, poolSize int) *PgBouncer {
	tb.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer" // Debian's place, outside a normal user's PATH
		if _, err := os.Stat(bin); err != nil {
			tb.Fatalf("testenv: pgbouncer is not installed (Debian: apt-get install pgbouncer; .ci/run installs it)")
		}
	}
	server, err := url.Parse(databaseURL)
	if err != nil {
		tb.Fatalf("testenv: bad database URL: %v", err)
	}
	dbName := strings.TrimPrefix(server.Path, "/")
	user := server.User.Username()
	password, _ := server.User.Password()
	host, port, err := net.SplitHostPort(server.Host)
	if err != nil {
		host, port = server.Hostname(), "5432"
	}

	// pgbouncer refuses to run as root; as root it is started as nobody,
	// who must be able to read its files.
	dir, err := os.MkdirTemp("", "sekali-pgbouncer-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	addr := freeAddr(tb)
	_, listenPort, _ := net.SplitHostPort(addr)
	target := fmt.Sprintf("host=%s port=%s dbname=%s user=%s", host, port, dbName, user)
	if password != "" {
		target += " password=" + password
	}
	ini := fmt.Sprintf(`[databases]
%s = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 500
log_connections = 0
log_disconnections = 0
`, dbName, target, listenPort, filepath.Join(dir, "users.txt"), poolSize)
	files := map[string]string{
		"pgbouncer.ini": ini,
		"users.txt":     fmt.Sprintf("%q %q\n", user, password), // trust still wants the user listed
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}

	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "nobody"}, args...)
	}
	b := &PgBouncer{PoolSize: poolSize, out: &lockedBuffer{}}
	b.cmd = exec.Command(bin, args...)
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		tb.Fatalf("testenv: start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { b.cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		b.cmd.Process.Kill()
		<-exited
		if tb.Failed() {
			tb.Logf("pgbouncer's log:\n%s", b.out.String())
		}
	})

	pooled := *server
	pooled.Host = addr
	b.URL = pooled.String()
	// Ready when a query goes through it to PostgreSQL.
	probe := pooled
	q := probe.Query()
	q.Set("default_query_exec_mode", "exec")
	probe.RawQuery = q.Encode()
	// Up to the test's budget, not a fixed few seconds: a busy machine
	// starts it late, not never.
	Eventually(tb, "pgbouncer on "+addr+" to answer", func() bool {
		select {
		case <-exited:
			tb.Fatalf("testenv: pgbouncer exited at start:\n%s", b.out.String())
		default:
		}
		return pingOnce(probe.String()) == nil
	})
	return b
}

func pingOnce(databaseURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// lockedBuffer collects a process's output for the test's log.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
