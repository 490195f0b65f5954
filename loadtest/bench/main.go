// Command bench measures Sekali's callback path as ratios against
// ceilings measured in the same run, on the same machine: the framework
// ceiling (GET /healthz) and the database ceiling (pgbench running
// exactly the SQL of one new-event callback, at several client counts,
// the best of them). It also sweeps the connection pool's size, measures
// the whole pipeline (paid callback → invoice → email) at 80% load, and
// judges every goal of docs/performance.md. It prints a table and writes
// JSON, Markdown and an SVG latency histogram to loadtest/results/.
// `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/stdwebhooks"
)

const benchSecret = "whsec_YmVuY2gtc2VjcmV0LWZvci1zZWthbGktcnVucw=="

// orderTokenSecret is the servers' ORDER_TOKEN_SECRET, which the web role
// needs.
const orderTokenSecret = "bench-order-token-secret-0123456789abcdef"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// measurement is one timed load against one target.
type measurement struct {
	Name       string    `json:"name"`
	Requests   int       `json:"requests"`
	Errors     int       `json:"errors"`
	Throughput float64   `json:"throughput_rps"`
	P50        float64   `json:"p50_ms"`
	P99        float64   `json:"p99_ms"`
	Max        float64   `json:"max_ms"`
	Load       float64   `json:"load_average"` // 1-minute, when it started
	CPU        *cpuUse   `json:"cpu_per_request,omitempty"`
	latencies  []float64 // ms, for the histogram
}

// poolRun is the new-event throughput of a server with one pool size.
type poolRun struct {
	MaxConns int          `json:"db_max_conns"`
	Default  bool         `json:"default"`
	Run      *measurement `json:"new_event"`
}

type results struct {
	Machine         string                  `json:"machine"`
	Cores           int                     `json:"cores"`
	Concurrency     int                     `json:"concurrency"`
	Duration        string                  `json:"duration"`
	DefaultMaxConns int                     `json:"default_db_max_conns"`
	Runs            map[string]*measurement `json:"runs"`
	Pgbench         []pgbenchRun            `json:"pgbench"`
	Ceiling         pgbenchRun              `json:"pgbench_ceiling"`           // the best one-round-trip-per-statement run
	PipelinedBest   pgbenchRun              `json:"pgbench_pipelined_ceiling"` // the best pipelined run
	Pools           []poolRun               `json:"pool_sweep"`
	At80            map[string]*measurement `json:"at_80_percent"`
	E2E             *e2eResult              `json:"pipeline"`
	WritesPerDup    float64                 `json:"write_transactions_per_duplicate"`
	WALPerDup       float64                 `json:"wal_bytes_per_duplicate"`
	PeakRSSMB       float64                 `json:"server_peak_rss_mb"` // the largest of RSSMB
	RSSMB           map[string]float64      `json:"server_rss_mb"`      // each server's peak over its life
	Ratios          map[string]float64      `json:"ratios"`
	Goals           []goal                  `json:"goals"`
	Met             bool                    `json:"all_goals_met"`
	LoadStart       float64                 `json:"load_average_start"`
	LoadEnd         float64                 `json:"load_average_end"`
	Guard           *guardRun               `json:"guard_versus_bare,omitempty"` // jobs' BenchmarkGuardVersusBare, per job
}

// runOptions are the flags of the callbacks section.
type runOptions struct {
	bin, pgURL, redisURL, out string
	conc                      int
	dur                       time.Duration
	clients, pools            []int
	profile                   bool
}

func run() error {
	o := runOptions{}
	flag.StringVar(&o.bin, "bin", "../bin/sekali", "the sekali binary (make build)")
	flag.StringVar(&o.pgURL, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL maintenance database URL")
	flag.StringVar(&o.redisURL, "redis", "", "Redis URL for the servers (default: a redis-server of the bench's own)")
	flag.IntVar(&o.conc, "c", 32, "concurrency of the HTTP load")
	flag.DurationVar(&o.dur, "d", 10*time.Second, "duration of each measurement")
	flag.StringVar(&o.out, "out", "results", "where to write the results (loadtest/results)")
	clients := flag.String("clients", "4,8,16,32", "pgbench client counts; the best is the ceiling")
	pools := flag.String("pools", "4,8,16,32", "DB_MAX_CONNS values of the pool sweep")
	flag.BoolVar(&o.profile, "profile", false, "save CPU profiles of the new-event and duplicate runs next to the results (from /debug/pprof on METRICS_ADDR)")
	only := flag.String("only", "", "run one section: callbacks or admin (default: both), or pipeline (its latency alone)")
	admin := adminOptions{}
	flag.IntVar(&admin.orders, "admin-orders", 200_000, "admin section: orders in its database (made by loadtest/bulkseed)")
	flag.IntVar(&admin.requests, "admin-requests", 200, "admin section: measured requests per page, one at a time")
	flag.IntVar(&admin.warmup, "admin-warmup", 20, "admin section: warm-up requests per page")
	flag.StringVar(&admin.dbName, "admin-db", "sekali_bench_admin", "admin section: its database, kept between runs")
	flag.BoolVar(&admin.reseed, "admin-reseed", false, "admin section: seed its database again even if it holds the data")
	flag.DurationVar(&admin.maxAge, "admin-max-age", 24*time.Hour, "admin section: seed again when the data is older")
	flag.Parse()
	var err error
	if o.clients, err = ints(*clients); err != nil {
		return fmt.Errorf("-clients: %w", err)
	}
	if o.pools, err = ints(*pools); err != nil {
		return fmt.Errorf("-pools: %w", err)
	}
	ctx := context.Background()
	if o.redisURL == "" {
		url, stop, err := startRedis()
		if err != nil {
			return err
		}
		defer stop()
		o.redisURL = url
	}
	admin.bin, admin.pgURL, admin.redisURL, admin.out = o.bin, o.pgURL, o.redisURL, o.out
	switch *only {
	case "", "callbacks":
	case "admin":
		return runAdmin(ctx, admin)
	case "pipeline": // the pipeline alone and its goals, printed, not written
		return runPipeline(ctx, o)
	default:
		return fmt.Errorf("-only must be callbacks, admin or pipeline, not %q", *only)
	}
	if err := runCallbacks(ctx, o); err != nil || *only == "callbacks" {
		return err
	}
	return runAdmin(ctx, admin)
}

// runPipeline measures the pipeline and the guard's cost and prints their
// goals, judged against the pipeline's own burst of callbacks (no
// new-event run to compare with).
func runPipeline(ctx context.Context, o runOptions) error {
	r := &results{Runs: map[string]*measurement{}}
	var err error
	if r.E2E, err = runE2E(ctx, o, benchKey()); err != nil {
		return err
	}
	if r.Guard, err = runGuardBench(ctx); err != nil {
		fmt.Println("  guard benchmark:", err)
	}
	fmt.Println()
	for _, g := range pipelineGoals(r) {
		fmt.Printf("  %-56s %6.2f  %-22s %s\n", g.Name, g.Value, g.Goal, yes(g.Met))
	}
	return nil
}

// runCallbacks is the callbacks section: ceilings, the callback paths,
// the pool sweep and the pipeline, then the goals.
func runCallbacks(ctx context.Context, o runOptions) error {
	defaults, err := config.Load(func(string) string { return "" })
	if err != nil {
		return err
	}
	r := &results{Machine: runtime.GOOS + "/" + runtime.GOARCH, Cores: runtime.NumCPU(), Concurrency: o.conc,
		Duration: o.dur.String(), DefaultMaxConns: defaults.DBMaxConns, Runs: map[string]*measurement{},
		Ratios: map[string]float64{}, At80: map[string]*measurement{}, RSSMB: map[string]float64{}, LoadStart: loadAverage()}
	stamp := time.Now().UTC().Format("20060102-150405")
	dbName := "sekali_bench_" + strings.ReplaceAll(stamp, "-", "_")
	dbURL := withDB(o.pgURL, dbName)
	defer dropDB(o.pgURL, dbName)
	srv, err := startServer(o.bin, dbURL, o.redisURL, serverOptions{roles: "web"})
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Printf("server on %s, database %s, %d cores, concurrency %d, %s per run, default DB_MAX_CONNS %d, load average %.2f\n",
		srv.url, dbName, runtime.NumCPU(), o.conc, o.dur, r.DefaultMaxConns, r.LoadStart)

	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	orders, err := pendingOrders(ctx, db, "BENCH", 400_000)
	if err != nil {
		return err
	}
	if err := pgbenchSetup(ctx, db, 400_000); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, "ANALYZE"); err != nil {
		return err
	}
	checkpoint(ctx, db) // the set-up's writes are not the measured runs' to flush
	key := benchKey()

	// 1. The framework ceiling.
	healthz := func(int) vegeta.Target { return vegeta.Target{Method: "GET", URL: srv.url + "/healthz"} }
	r.Runs["healthz"] = attack("healthz", o.conc, 0, o.dur, healthz)
	// Its latency at 80% is the baseline of the callbacks' at 80%: what
	// the machine's own scheduling costs at that load, with no work.
	r.At80["healthz"] = attackAt("healthz@80%", o.conc, int(0.8*r.Runs["healthz"].Throughput), o.dur, healthz)

	// 2. The database ceiling: the SQL of one new-event callback at each
	// client count, one round trip per statement and pipelined.
	if r.Pgbench, err = pgbenchSweep(ctx, dbURL, o.clients, o.dur); err != nil {
		return err
	}
	r.Ceiling, r.PipelinedBest = best(r.Pgbench, false), best(r.Pgbench, true)
	checkpoint(ctx, db) // pgbench's writes are not the callbacks' to flush

	// 3. New-event callbacks, each paying its own pending order, on the
	// default pool.
	var next atomic.Int64
	newEvent := func(base string) func(int) vegeta.Target {
		return func(int) vegeta.Target {
			i := int(next.Add(1)) - 1
			id := orders[i%len(orders)]
			return signed(key, base, "evt-"+id, callback(id))
		}
	}
	r.Runs["new_event"] = profiled(srv, o, "new_event", stamp, func() *measurement {
		return attack("new_event", o.conc, 0, o.dur, newEvent(srv.url))
	})

	// 4. Duplicates of one processed event, with the database's write
	// transactions and WAL measured around them. The gateway's signature
	// is made once per run: signing is the load generator's work, and
	// here it would take the server's CPU.
	dupBody := callback(orders[len(orders)-1])
	dupTarget := func() func(int) vegeta.Target {
		t := signed(key, srv.url, "evt-dup", dupBody)
		return func(int) vegeta.Target { return t }
	}
	attack("warm-up", 1, 0, 0, dupTarget(), 1)
	time.Sleep(time.Second) // let the delivery log flush before counting
	xid0, lsn0 := xactAndWAL(ctx, db)
	r.Runs["duplicate"] = profiled(srv, o, "duplicate", stamp, func() *measurement {
		return attack("duplicate", o.conc, 0, o.dur, dupTarget())
	})
	time.Sleep(time.Second) // the last batch of audit rows belongs to these duplicates
	xid1, lsn1 := xactAndWAL(ctx, db)
	n := float64(r.Runs["duplicate"].Requests)
	r.WritesPerDup = float64(xid1-xid0-1) / n // -1: the measuring call takes an xid itself
	r.WALPerDup = float64(lsn1-lsn0) / n

	// 5. At 80% of each measured maximum: latency.
	checkpoint(ctx, db)
	r.At80["new_event"] = attackAt("new_event@80%", o.conc, int(0.8*r.Runs["new_event"].Throughput), o.dur, newEvent(srv.url))
	r.At80["duplicate"] = attackAt("duplicate@80%", o.conc, int(0.8*r.Runs["duplicate"].Throughput), o.dur, dupTarget())
	srv.stop()
	r.RSSMB["web"] = srv.peakMB

	// 6. The pool sweep: new-event throughput of a server per DB_MAX_CONNS.
	for _, p := range o.pools {
		s, err := startServer(o.bin, dbURL, o.redisURL, serverOptions{roles: "web", maxConns: p})
		if err != nil {
			return err
		}
		m := attack(fmt.Sprintf("new_event pool=%d", p), o.conc, 0, o.dur, newEvent(s.url))
		s.stop()
		r.Pools = append(r.Pools, poolRun{MaxConns: p, Default: p == r.DefaultMaxConns, Run: m})
		r.RSSMB[fmt.Sprintf("web, pool %d", p)] = s.peakMB
	}

	// 7. The pipeline at 80% load, on a server with the worker and relay.
	// The sections above are done with their database: dropped now, its
	// vacuum and its dirty buffers are not the pipeline's to pay for.
	db.Close(ctx)
	dropDB(o.pgURL, dbName)
	r.E2E, err = runE2E(ctx, o, key)
	if err != nil {
		return err
	}
	r.RSSMB["web+worker+relay"] = r.E2E.peakMB
	// 8. The guard's cost per job, against a bare handler (a failure
	// leaves the goal unmeasured, not the run unwritten).
	if r.Guard, err = runGuardBench(ctx); err != nil {
		fmt.Println("  guard benchmark:", err)
	}
	r.LoadEnd = loadAverage()
	judge(r)
	return write(r, o.out, stamp)
}

// profiled runs measure; with -profile it saves the server's CPU profile
// of the run's middle part.
func profiled(s *server, o runOptions, name, stamp string, measure func() *measurement) *measurement {
	if !o.profile {
		return measure()
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fmt.Printf("  (no profile of %s: %v)\n", name, err)
		return measure()
	}
	path := filepath.Join(o.out, fmt.Sprintf("bench-%s-%s.cpu.pprof", stamp, name))
	errc := make(chan error, 1)
	go func() {
		time.Sleep(o.dur / 5)
		errc <- s.profile(path, o.dur*3/5)
	}()
	m := measure()
	if err := <-errc; err != nil {
		fmt.Printf("  (no profile of %s: %v)\n", name, err)
	} else {
		fmt.Printf("  (profile: go tool pprof -top %s)\n", path)
	}
	return m
}

// attack runs one load as fast as `workers` go (rate 0) or at `rate`
// per second, for `d` (0: `limit` requests).
func attack(name string, workers, rate int, d time.Duration, target func(int) vegeta.Target, limit ...int) *measurement {
	return load(name, workers, workers, rate, d, target, limit...)
}

// attackAt runs an open-loop load at rate: requests start on time even
// when earlier ones are slow, up to four times the workers.
func attackAt(name string, workers, rate int, d time.Duration, target func(int) vegeta.Target) *measurement {
	return load(name, workers, 4*workers, max(rate, 1), d, target)
}

func load(name string, workers, maxWorkers, rate int, d time.Duration, target func(int) vegeta.Target, limit ...int) *measurement {
	var i atomic.Int64
	targeter := func(t *vegeta.Target) error {
		n := int(i.Add(1)) - 1
		if len(limit) > 0 && n >= limit[0] {
			return vegeta.ErrNoTargets
		}
		*t = target(n)
		return nil
	}
	a := vegeta.NewAttacker(vegeta.Workers(uint64(workers)), vegeta.MaxWorkers(uint64(maxWorkers)),
		vegeta.Connections(maxWorkers), vegeta.KeepAlive(true), vegeta.Timeout(30*time.Second))
	m := &measurement{Name: name, Load: loadAverage()}
	var metrics vegeta.Metrics
	cpu0 := sampleCPU()
	for res := range a.Attack(targeter, vegeta.Rate{Freq: rate, Per: time.Second}, d, name) {
		if res.URL == "" {
			continue
		}
		metrics.Add(res)
		m.latencies = append(m.latencies, float64(res.Latency)/float64(time.Millisecond))
		if res.Code < 200 || res.Code >= 300 {
			m.Errors++
		}
	}
	metrics.Close()
	m.CPU = use(cpu0, sampleCPU(), int(metrics.Requests))
	m.Requests = int(metrics.Requests)
	m.Throughput = metrics.Throughput
	m.P50 = ms(metrics.Latencies.P50)
	m.P99 = ms(metrics.Latencies.P99)
	m.Max = ms(metrics.Latencies.Max)
	if name != "warm-up" {
		fmt.Printf("  %-24s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  errors %d  (load %.1f)%s\n",
			name, m.Throughput, m.P50, m.P99, m.Errors, m.Load, m.CPU)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a list of positive numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchKey is the sandbox secret the servers check signatures with.
func benchKey() []byte {
	k, _ := stdwebhooks.DecodeSecret(benchSecret)
	return k
}

func callback(orderID string) []byte {
	return []byte(fmt.Sprintf(`{"order_id":%q,"transaction_id":"tx-%s","payment_status":"paid","paid_amount":10000,"currency":"IDR"}`, orderID, orderID))
}

func signed(key []byte, base, event string, body []byte) vegeta.Target {
	h := stdwebhooks.Headers(key, event, time.Now(), body)
	h.Set("Content-Type", "application/json")
	return vegeta.Target{Method: "POST", URL: base + "/callbacks/sandbox", Body: body, Header: h}
}

// pendingOrders inserts n pending one-item orders ORD-<prefix>-1… straight
// into the database (with their reservation, so the stock adds up) and
// returns their ids.
func pendingOrders(ctx context.Context, db *pgx.Conn, prefix string, n int) ([]string, error) {
	for _, q := range []string{
		`INSERT INTO products (sku, name, price, currency, stock) VALUES ('BENCH', 'bench', 10000, 'IDR', 0) ON CONFLICT DO NOTHING`,
		`INSERT INTO orders (id, customer_email, status, total_amount, currency, expires_at)
		   SELECT $2 || g, 'bench@example.com', 'pending', 10000, 'IDR', now() + interval '1 day' FROM generate_series(1, $1::int) g`,
		`INSERT INTO order_items (order_id, sku, qty, unit_price) SELECT $2 || g, 'BENCH', 1, 10000 FROM generate_series(1, $1::int) g`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, n, "ORD-"+prefix+"-")
		}
		if _, err := db.Exec(ctx, q, args...); err != nil {
			return nil, fmt.Errorf("bench orders: %w", err)
		}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("ORD-%s-%d", prefix, i+1)
	}
	return ids, nil
}

// checkpoint writes the dirty buffers now, so that a run does not pay
// for the writes of the one before (CHECKPOINT needs a superuser or
// pg_checkpoint; without, measure anyway).
func checkpoint(ctx context.Context, db *pgx.Conn) {
	if _, err := db.Exec(ctx, "CHECKPOINT"); err != nil {
		fmt.Printf("  no CHECKPOINT between runs: %v\n", err)
	}
}

// xactAndWAL reads the next transaction id and the WAL position.
func xactAndWAL(ctx context.Context, db *pgx.Conn) (int64, int64) {
	var xid, lsn int64
	db.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint, pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&xid, &lsn)
	return xid, lsn
}
