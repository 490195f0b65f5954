package testenv

import (
	"context"
	"net"
	"os/exec"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process of the test's own, on a free
// port, so tests never share keys (Asynq's key names are fixed) and a
// fault test can stop and start it without touching anyone else's.
type RedisServer struct {
	tb   testing.TB
	Addr string
	cmd  *exec.Cmd
	args []string // redis-server's arguments after the config file: the port and anything the caller adds
	conf string   // the config file, for a Sentinel (which needs one it can rewrite)
}

// StartRedis starts a redis-server that keeps nothing on disk; it is
// stopped when the test ends.
func StartRedis(tb testing.TB) *RedisServer {
	tb.Helper()
	return startRedis(tb, "")
}

// startRedis starts redis-server on a free port with conf (empty: none)
// and the extra arguments.
func startRedis(tb testing.TB, conf string, extra ...string) *RedisServer {
	tb.Helper()
	addr := freeAddr(tb)
	_, port, _ := net.SplitHostPort(addr)
	s := &RedisServer{tb: tb, Addr: addr, conf: conf, args: append([]string{"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning"}, extra...)}
	s.Start()
	tb.Cleanup(s.Stop)
	return s
}

// freeAddr is a 127.0.0.1 address with a port nobody listens on now.
func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr + "/0" }

// Client returns a client of the server, closed when the test ends.
func (s *RedisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.tb.Cleanup(func() { c.Close() })
	return c
}

// Start (re)starts the server on its port and waits until it answers.
func (s *RedisServer) Start() {
	s.tb.Helper()
	var args []string
	if s.conf != "" {
		args = append(args, s.conf) // redis-server wants its config file first
	}
	s.cmd = exec.Command("redis-server", append(args, s.args...)...)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("testenv: start redis-server (is it installed?): %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	Eventually(s.tb, "redis-server on "+s.Addr+" to answer", func() bool { return c.Ping(context.Background()).Err() == nil })
}

// Stop kills the server (its data is gone, as after a crash).
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// NewRedis starts a private redis-server and returns a client of it.
func NewRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	return StartRedis(tb).Client()
}
