package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/sekali/sekali/app/stdwebhooks"
)

// Each process's pool is small: seven processes, verify and our own pool
// share a server whose max_connections is 100, next to other tests.
var roles = []struct {
	name, roles string
	count       int
	env         []string
}{
	{"web", "web", 2, []string{"DB_MAX_CONNS=5"}},
	{"worker", "worker", 2, []string{"DB_MAX_CONNS=5", "JOB_CONCURRENCY=4"}},
	{"relay", "relay", 2, []string{"DB_MAX_CONNS=2"}}, // and the LISTEN connection
	{"scheduler", "scheduler", 1, []string{"DB_MAX_CONNS=1"}},
}

// world is everything one run owns: a database, a Redis, the proxy in
// front of PostgreSQL and the processes.
type world struct {
	opts    options
	started time.Time
	outMu   sync.Mutex

	logDir    string
	adminURL  string
	dbName    string
	directURL string // for verify and our own queries
	proxyURL  string // for every sekali process
	db        *pgxpool.Pool

	proxyMu sync.Mutex // held for a whole cut: cuts do not overlap
	proxy   *toxiproxy.Proxy
	redisMu sync.Mutex // held for a whole restart
	redis   *redisServer

	token, secret string
	stripe        *stripeGateway // the gateway the processes call
	client        *http.Client   // the customers' and admins' requests
	sku           string         // the product the customers order
	offMu         sync.Mutex
	noRefunds     string // why Sekali cannot ask for refunds, once it said so
	hurryMu       sync.Mutex
	hurried       time.Time // when hurryRefunds last looked
	procs         []*proc
	webs          []*proc
	workers       []*proc
	relays        []*proc
	scheduler     *proc
	webURLs       []string
}

// say prints a progress line, stamped with the time since the start.
func (w *world) say(format string, args ...any) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	fmt.Fprintf(w.opts.Out, "%7.1fs  %s\n", time.Since(w.started).Seconds(), fmt.Sprintf(format, args...))
}

// debug prints a progress line with -v.
func (w *world) debug(format string, args ...any) {
	if w.opts.Verbose {
		w.say(format, args...)
	}
}

// setUp builds the world: database (migrated, seeded), Redis, proxy and
// the seven processes, running and ready.
func setUp(ctx context.Context, opts options) (*world, error) {
	w := &world{opts: opts, started: time.Now(), adminURL: opts.AdminURL,
		token: "chaos-" + randomHex(12), secret: stdwebhooks.EncodeSecret([]byte(randomHex(16)))}
	var err error
	if w.logDir, err = os.MkdirTemp("", "sekali-chaos-"); err != nil {
		return w, err
	}
	if _, err := os.Stat(opts.Bin); err != nil {
		return w, fmt.Errorf("-bin: %w (make build)", err)
	}

	// The database, created on the server of SEKALI_TEST_DATABASE_URL.
	// The name matches `make test-clean`, which drops it if a run dies.
	w.dbName = "sekali_test_chaos_" + randomHex(6)
	admin, err := url.Parse(w.adminURL)
	if err != nil {
		return w, fmt.Errorf("SEKALI_TEST_DATABASE_URL: %w", err)
	}
	if err := w.adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{w.dbName}.Sanitize()); err != nil {
		w.dbName = ""
		return w, fmt.Errorf("create the database (is PostgreSQL running at %s?): %w", admin.Redacted(), err)
	}
	direct := *admin
	direct.Path = "/" + w.dbName
	w.directURL = direct.String()
	if out, err := w.command(ctx, []string{"DATABASE_URL=" + w.directURL}, "migrate", "up"); err != nil {
		return w, fmt.Errorf("sekali migrate up: %v\n%s", err, out)
	}
	if out, err := w.command(ctx, []string{"DATABASE_URL=" + w.directURL, "ADMIN_PASSWORD=" + randomHex(12)}, "seed"); err != nil {
		return w, fmt.Errorf("sekali seed: %v\n%s", err, out)
	}
	cfg, err := pgxpool.ParseConfig(w.directURL)
	if err != nil {
		return w, err
	}
	cfg.MaxConns = 2
	if w.db, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return w, err
	}

	// The proxy every process reaches PostgreSQL through.
	upstream := admin.Host
	if admin.Hostname() == "" {
		return w, fmt.Errorf("SEKALI_TEST_DATABASE_URL must name a TCP host: the processes reach PostgreSQL through a proxy")
	}
	if admin.Port() == "" {
		upstream = net.JoinHostPort(admin.Hostname(), "5432")
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	w.proxy = toxiproxy.NewProxy(srv, "postgres", "127.0.0.1:0", upstream)
	if err := w.proxy.Start(); err != nil {
		return w, fmt.Errorf("proxy: %w", err)
	}
	proxied := direct
	proxied.Host = w.proxy.Listen
	w.proxyURL = proxied.String()

	// Redis: our own, forgetting everything when restarted.
	port, err := freePort()
	if err != nil {
		return w, err
	}
	w.redis = &redisServer{addr: net.JoinHostPort("127.0.0.1", port), logPath: filepath.Join(w.logDir, "redis.log")}
	if err := w.redis.start(ctx); err != nil {
		return w, err
	}

	// The gateway the processes call, here: it outlives every kill.
	w.stripe = newStripe()
	w.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

	// The processes. Both web processes derive order tokens from one
	// secret, as in production.
	orderTokenSecret := randomHex(32)
	base := []string{
		"DATABASE_URL=" + w.proxyURL, "REDIS_URL=" + w.redis.url(),
		"ADMIN_API_TOKEN=" + w.token, "SANDBOX_WEBHOOK_SECRET=" + w.secret, "ORDER_TOKEN_SECRET=" + orderTokenSecret,
		"JOB_LOCK_TTL=5s", "RECONCILE_AFTER=" + reconcileAfter.String(), "ORDER_MAX_UNITS=1000", "OPEN_ORDERS_PER_CLIENT=0",
		"REQUEST_TIMEOUT=5s", "METRICS_ADDR=127.0.0.1:0", "LOG_LEVEL=" + opts.LogLevel,
		"PUBLIC_URL=" + publicURL,
	}
	base = append(base, w.stripe.env()...)
	for _, r := range roles {
		for i := range r.count {
			name := r.name
			if r.count > 1 {
				name = fmt.Sprintf("%s-%d", r.name, i+1)
			}
			env := append(append(cleanEnv(), base...), r.env...)
			p := &proc{w: w, name: name, roles: r.roles, env: env, logPath: filepath.Join(w.logDir, name+".log")}
			if r.roles == "web" {
				port, err := freePort()
				if err != nil {
					return w, err
				}
				p.env = append(p.env, "HTTP_ADDR=127.0.0.1:"+port)
				p.url = "http://127.0.0.1:" + port
				w.webs = append(w.webs, p)
				w.webURLs = append(w.webURLs, p.url)
			}
			switch r.name {
			case "worker":
				w.workers = append(w.workers, p)
			case "relay":
				w.relays = append(w.relays, p)
			case "scheduler":
				w.scheduler = p
			}
			w.procs = append(w.procs, p)
		}
	}
	if err := w.stripe.serve(w.webURLs[0]); err != nil {
		return w, fmt.Errorf("the emulated Stripe API: %w", err)
	}
	for _, p := range w.procs {
		if err := p.run(); err != nil {
			return w, err
		}
	}
	if err := w.ready(ctx, 90*time.Second); err != nil {
		return w, err
	}
	if err := w.createProduct(ctx); err != nil {
		return w, err
	}
	w.say("world ready: database %s, redis %s, proxy %s → %s, Stripe API %s, 7 processes, logs in %s",
		w.dbName, w.redis.addr, w.proxy.Listen, upstream, w.stripe.apiURL(), w.logDir)
	return w, nil
}

// tearDown stops everything; the database and the logs stay with -keep
// or when the run failed.
func (w *world) tearDown(failed bool) {
	var wg sync.WaitGroup
	for _, p := range w.procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
	if w.stripe != nil {
		w.stripe.close()
	}
	if w.redis != nil {
		w.redis.kill()
	}
	if w.proxy != nil {
		w.proxy.Stop()
	}
	if w.db != nil {
		w.db.Close()
	}
	keep := w.opts.Keep || failed
	if w.dbName != "" {
		if keep {
			w.say("database kept: %s", w.directURL)
		} else if err := w.adminExec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{w.dbName}.Sanitize()+" WITH (FORCE)"); err != nil {
			w.say("could not drop the database %s: %v", w.dbName, err)
		}
	}
	if w.logDir != "" {
		if keep {
			w.say("process logs kept in %s", w.logDir)
		} else {
			w.say("process logs were in %s (removed; -keep keeps them)", w.logDir)
			os.RemoveAll(w.logDir)
		}
	}
}

func (w *world) adminExec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, w.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// command runs a sekali command to its end and returns its output.
func (w *world) command(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, w.opts.Bin, args...)
	cmd.Env = append(append(cleanEnv(), "LOG_LEVEL=error", "REDIS_URL="+w.redisURLOrDefault(), "SANDBOX_WEBHOOK_SECRET="+w.secret), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (w *world) redisURLOrDefault() string {
	if w.redis == nil {
		return "redis://127.0.0.1:6379/0"
	}
	return w.redis.url()
}

// ready waits until every process has run for a second without exiting
// and both web processes answer /readyz (database and Redis) with 200.
func (w *world) ready(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		var waiting []string
		for _, p := range w.procs {
			if p.upFor() < time.Second {
				waiting = append(waiting, p.name+" (not running)")
			}
		}
		for _, p := range w.webs {
			if res, err := client.Get(p.url + "/readyz"); err != nil {
				waiting = append(waiting, p.name+" (/readyz: "+err.Error()+")")
			} else {
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					waiting = append(waiting, fmt.Sprintf("%s (/readyz %d)", p.name, res.StatusCode))
				}
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the processes are not ready after %s: %s (logs in %s)", timeout, strings.Join(waiting, ", "), w.logDir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling a condition
		}
	}
}

// cutDatabase closes the proxy (every connection through it, and new
// ones are refused) for d, then opens it again.
func (w *world) cutDatabase(d time.Duration) {
	w.proxyMu.Lock()
	defer w.proxyMu.Unlock()
	w.proxy.Stop()
	time.Sleep(d) // the length of the outage: the fault itself
	w.enableProxy()
}

// enableProxy opens the proxy again on the same port.
func (w *world) enableProxy() {
	for {
		err := w.proxy.Start()
		if err == nil || errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return
		}
		w.say("proxy: start again: %v; retrying", err)
		time.Sleep(100 * time.Millisecond) // the port may still be closing
	}
}

// loseRedis kills Redis (its data is gone) and starts it again, empty, on
// the same port after down.
func (w *world) loseRedis(ctx context.Context, down time.Duration) error {
	w.redisMu.Lock()
	defer w.redisMu.Unlock()
	w.redis.kill()
	time.Sleep(down) // how long Redis stays away: part of the fault
	return w.redis.start(ctx)
}

// redisServer is a redis-server of our own that keeps nothing on disk.
type redisServer struct {
	addr    string
	logPath string
	mu      sync.Mutex
	cmd     *exec.Cmd
}

func (r *redisServer) url() string { return "redis://" + r.addr + "/0" }

func (r *redisServer) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	_, port, _ := net.SplitHostPort(r.addr)
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server (is it installed?): %w", err)
	}
	r.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("redis-server on %s did not answer within 10s", r.addr)
		}
		time.Sleep(5 * time.Millisecond) // polling for the server to come up
	}
	return nil
}

func (r *redisServer) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Kill()
	r.cmd.Wait()
	r.cmd = nil
}

func (r *redisServer) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

// proc is one `sekali serve --roles=…` process, kept running: when it
// exits without being asked to, it is started again a second later.
type proc struct {
	w       *world
	name    string
	roles   string
	env     []string
	url     string // web processes: the base URL (a fixed port)
	logPath string

	mu        sync.Mutex
	starts    int
	cmd       *exec.Cmd
	id        string        // cmd's WORKER_ID
	since     time.Time     // when cmd started
	exited    chan struct{} // closed when cmd has exited
	planned   bool          // we asked cmd to end (kill, restart, stop)
	delay     time.Duration // before the next start, after a planned end
	stopping  bool          // no more starts
	loopDone  chan struct{}
	died      time.Time // last SIGKILL or unplanned exit
	unplanned []string  // unplanned exits: when and how
}

// run starts the process and keeps it running until stop.
func (p *proc) run() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.loopDone = make(chan struct{})
	go func() {
		defer close(p.loopDone)
		defer logf.Close()
		for {
			p.mu.Lock()
			if p.stopping {
				p.mu.Unlock()
				return
			}
			p.starts++
			id := fmt.Sprintf("%s#%d", p.name, p.starts) // names its job rows: a kill can find its jobs
			cmd := exec.Command(p.w.opts.Bin, "serve", "--roles="+p.roles)
			cmd.Env = append(slices.Clip(p.env), "WORKER_ID="+id)
			cmd.Stdout, cmd.Stderr = logf, logf
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true} // never outlive the run; no terminal signals
			fmt.Fprintf(logf, "=== chaos: starting %s at %s\n", p.name, time.Now().Format("15:04:05.000"))
			if err := cmd.Start(); err != nil {
				p.mu.Unlock()
				p.w.say("%s: cannot start: %v", p.name, err)
				time.Sleep(time.Second) // back off before trying again
				continue
			}
			exited := make(chan struct{})
			p.cmd, p.id, p.since, p.exited, p.planned, p.delay = cmd, id, time.Now(), exited, false, 0
			p.mu.Unlock()

			err := cmd.Wait()
			p.mu.Lock()
			planned, delay := p.planned, p.delay
			p.cmd = nil
			if !planned {
				p.died = time.Now()
				p.unplanned = append(p.unplanned, fmt.Sprintf("%s after %s: %v",
					time.Now().Format("15:04:05"), time.Since(p.since).Round(time.Millisecond), err))
			}
			close(exited)
			p.mu.Unlock()
			fmt.Fprintf(logf, "=== chaos: %s exited at %s (%v; planned %v)\n", p.name, time.Now().Format("15:04:05.000"), err, planned)
			if !planned {
				p.w.debug("%s exited on its own (%v); starting it again in 1s", p.name, err)
				delay = time.Second // it may be failing to start (database cut): do not spin
			}
			time.Sleep(delay) // the restart delay is part of the fault
		}
	}()
	// Wait for the first start.
	for p.upFor() == 0 {
		select {
		case <-p.loopDone:
			return fmt.Errorf("%s did not start", p.name)
		case <-time.After(5 * time.Millisecond): // polling for the start
		}
	}
	return nil
}

// workerID is the WORKER_ID of the running process; "" when none runs.
func (p *proc) workerID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return ""
	}
	return p.id
}

// upFor is how long the current process has run; 0 when none runs.
func (p *proc) upFor() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return max(time.Since(p.since), time.Nanosecond)
}

// end signals the running process and waits until it exited; the loop
// starts it again after delay unless stopping. It reports whether a
// process was running (a kill that found none did not happen).
func (p *proc) end(sig syscall.Signal, delay time.Duration, stopping bool) bool {
	p.mu.Lock()
	p.stopping = p.stopping || stopping
	cmd, exited := p.cmd, p.exited
	if cmd == nil {
		p.mu.Unlock()
		return false
	}
	p.planned, p.delay = true, delay
	if sig == syscall.SIGKILL {
		p.died = time.Now()
	}
	cmd.Process.Signal(sig)
	p.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(30 * time.Second): // a graceful stop waits for running jobs (15s at most)
		cmd.Process.Kill()
		<-exited
	}
	return true
}

// signal sends sig to the running process, if one runs.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the process and starts it again after delay. If none is
// running (it is being restarted, or failing to start while the database
// is cut), it waits up to 10s for one.
func (p *proc) kill(delay time.Duration) bool {
	deadline := time.Now().Add(10 * time.Second)
	for p.upFor() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling for the process to be back
	}
	return p.end(syscall.SIGKILL, delay, false)
}

// restart stops the process gracefully (SIGTERM: running jobs finish or
// go back to the queue) and starts it again at once.
func (p *proc) restart() bool { return p.end(syscall.SIGTERM, 0, false) }

// stop ends the process for good.
func (p *proc) stop() {
	if p.loopDone == nil {
		return
	}
	p.end(syscall.SIGTERM, 0, true)
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	<-p.loopDone
}

func (p *proc) lastDeath() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.died
}

func (p *proc) unplannedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.unplanned...)
}

// cleanEnv is the little the processes inherit: nothing of Sekali's own
// configuration (a DATABASE_URL exported by make, an SMTP_URL) leaks in.
func cleanEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
