package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sekali/sekali/app/testenv"
)

// server is a sekali process under test. Its resident memory is sampled
// from start to stop.
type server struct {
	cmd *exec.Cmd
	url string
	// debug is the METRICS_ADDR listener's URL (/metrics, /debug/pprof),
	// empty for a server started without one.
	debug string

	stopRSS func() float64
	peakMB  float64
}

// serverOptions are what differs between the servers of one run.
type serverOptions struct {
	roles    string
	maxConns int // DB_MAX_CONNS; 0: the server's default
	extraEnv []string
}

func startServer(bin, dbURL, redisURL string, o serverOptions) (*server, error) {
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "REDIS_URL="+redisURL, "HTTP_ADDR=127.0.0.1:0",
		"SANDBOX_WEBHOOK_SECRET="+benchSecret, "ORDER_TOKEN_SECRET="+orderTokenSecret, "LOG_LEVEL=error", "ORDER_TTL=24h", "OPEN_ORDERS_PER_CLIENT=0",
		// /metrics and /debug/pprof on a port of their own, as in production.
		"METRICS_PUBLIC=false", "METRICS_ADDR="+metricsAddr)
	if o.maxConns > 0 {
		env = append(env, "DB_MAX_CONNS="+strconv.Itoa(o.maxConns))
	} else {
		env = withoutVar(env, "DB_MAX_CONNS") // the default is what is measured
	}
	env = append(env, o.extraEnv...)
	migrate := exec.Command(bin, "migrate", "up")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("migrate: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--roles="+o.roles)
	cmd.Env = env
	s, err := serve(cmd)
	if err != nil {
		return nil, err
	}
	s.debug = "http://" + metricsAddr
	s.stopRSS = watchRSS(cmd.Process.Pid)
	underTest.Store(int64(cmd.Process.Pid))
	return s, nil
}

// serve starts cmd, a `sekali serve`, and waits until it says where it
// serves; its log goes to the bench's stderr.
func serve(cmd *exec.Cmd) (*server, error) {
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "Sekali is serving on "); ok {
			go io.Copy(io.Discard, stdout)
			return &server{cmd: cmd, url: u}, nil
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("the server stopped before serving")
}

func (s *server) stop() {
	if s.stopRSS != nil {
		s.peakMB = s.stopRSS()
		s.stopRSS = nil
	}
	underTest.CompareAndSwap(int64(s.cmd.Process.Pid), 0)
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Wait()
	}
}

// profile saves the server's CPU profile over d (go tool pprof reads it).
func (s *server) profile(path string, d time.Duration) error {
	if s.debug == "" {
		return fmt.Errorf("no debug listener")
	}
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.debug, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// watchRSS samples pid's resident memory until the returned function is
// called, which returns the largest sample in MB.
func watchRSS(pid int) func() float64 {
	var mu sync.Mutex
	peak := 0.0
	done := make(chan struct{})
	re := regexp.MustCompile(`VmRSS:\s+(\d+) kB`)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			if m := re.FindSubmatch(b); m != nil {
				kb, _ := strconv.ParseFloat(string(m[1]), 64)
				mu.Lock()
				peak = math.Max(peak, kb/1024)
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	return func() float64 {
		once.Do(func() { close(done) })
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// freeAddr returns a local address nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// redisPID is the bench's own redis-server's pid, for the pipeline's CPU
// split (0 with -redis: then its share stays in the rest).
var redisPID int

// startRedis starts a redis-server of the bench's own, on a free port,
// keeping nothing on disk: no task of an earlier run is left in its
// queues.
func startRedis() (url string, stop func(), err error) {
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("redis-server (or pass -redis): %w", err)
	}
	redisPID = cmd.Process.Pid
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "redis://" + addr + "/0", stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("redis-server did not listen on %s", addr)
}

func withDB(adminURL, name string) string {
	u, _ := url.Parse(adminURL)
	u.Path = "/" + name
	return u.String()
}

func dropDB(adminURL, name string) {
	ctx := context.Background()
	if c, err := pgx.Connect(ctx, adminURL); err == nil {
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		c.Close(ctx)
	}
}

// underTest is the pid of the server being measured, for the CPU split
// of each run.
var underTest atomic.Int64

// cpuUse is where a run's CPU time went, per request, and how much of
// the machine stayed idle.
type cpuUse struct {
	ServerUS float64 `json:"server_us"` // the sekali process
	ClientUS float64 `json:"client_us"` // this program: the load generator
	OtherUS  float64 `json:"other_us"`  // everything else: PostgreSQL, Redis, other work on the machine
	Idle     float64 `json:"idle"`      // share of the machine's CPU time
}

// cpuSample is cumulative CPU time in clock ticks.
type cpuSample struct{ busy, total, server, self float64 }

func sampleCPU() cpuSample {
	var s cpuSample
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		for i, v := range f[1:] {
			n, _ := strconv.ParseFloat(v, 64)
			if i >= 8 { // guest time is counted in user already
				break
			}
			s.total += n
			if i != 3 && i != 4 { // idle, iowait
				s.busy += n
			}
		}
	}
	s.server = procTicks(int(underTest.Load()))
	s.self = procTicks(os.Getpid())
	return s
}

// procTicks is a process's user and system time, in clock ticks.
func procTicks(pid int) float64 { return testenv.ProcessCPU(pid).Seconds() * 100 }

// use splits the CPU time between two samples over n requests. Clock
// ticks are 1/100 s on Linux; the machine's total counts every core.
func use(a, b cpuSample, n int) *cpuUse {
	if n == 0 || b.total == a.total {
		return nil
	}
	const tick = 1e6 / 100 // µs
	server, self := b.server-a.server, b.self-a.self
	return &cpuUse{
		ServerUS: server * tick / float64(n),
		ClientUS: self * tick / float64(n),
		OtherUS:  max(b.busy-a.busy-server-self, 0) * tick / float64(n),
		Idle:     1 - (b.busy-a.busy)/(b.total-a.total),
	}
}

// total is the machine's CPU per request, whoever spent it.
func (c *cpuUse) total() float64 { return c.ServerUS + c.ClientUS + c.OtherUS }

func (c *cpuUse) String() string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("  cpu/req µs: server %.0f client %.0f other %.0f, idle %.0f%%", c.ServerUS, c.ClientUS, c.OtherUS, 100*c.Idle)
}
