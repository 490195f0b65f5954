// Command bench measures Sekali's callback path as ratios against two
// ceilings measured in the same run, on the same machine, against one
// server: the framework ceiling (GET /healthz) and the database ceiling
// (pgbench running exactly the SQL of one new-event callback). It prints
// a table and writes JSON, Markdown and an SVG latency histogram to
// loadtest/results/. `make bench` runs it.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/sekali/sekali/app/stdwebhooks"
)

const benchSecret = "whsec_YmVuY2gtc2VjcmV0LWZvci1zZWthbGktcnVucw=="

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
	latencies  []float64 // ms, for the histogram
}

type results struct {
	Machine      string                  `json:"machine"`
	Cores        int                     `json:"cores"`
	Concurrency  int                     `json:"concurrency"`
	Duration     string                  `json:"duration"`
	Runs         map[string]*measurement `json:"runs"`
	PgbenchTPS   float64                 `json:"pgbench_tps"`
	Ratios       map[string]float64      `json:"ratios"`
	WritesPerDup float64                 `json:"write_transactions_per_duplicate"`
	WALPerDup    float64                 `json:"wal_bytes_per_duplicate"`
	MaxRSSMB     float64                 `json:"server_max_rss_mb"`
	At80         map[string]*measurement `json:"at_80_percent"`
}

func run() error {
	bin := flag.String("bin", "bin/sekali", "the sekali binary")
	adminURL := flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL maintenance database URL")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/15", "Redis URL for the server")
	conc := flag.Int("c", 32, "concurrency (HTTP workers and pgbench clients)")
	dur := flag.Duration("d", 10*time.Second, "duration of each measurement")
	out := flag.String("out", "loadtest/results", "where to write the results")
	flag.Parse()
	ctx := context.Background()

	dbName := fmt.Sprintf("sekali_bench_%d", time.Now().Unix())
	dbURL := withDB(*adminURL, dbName)
	defer dropDB(*adminURL, dbName)
	srv, err := startServer(*bin, dbURL, *redisURL, *conc)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Printf("server on %s, database %s, %d cores, concurrency %d, %s per run\n", srv.url, dbName, runtime.NumCPU(), *conc, *dur)

	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	key, _ := stdwebhooks.DecodeSecret(benchSecret)
	r := &results{Machine: runtime.GOOS + "/" + runtime.GOARCH, Cores: runtime.NumCPU(), Concurrency: *conc,
		Duration: dur.String(), Runs: map[string]*measurement{}, Ratios: map[string]float64{}, At80: map[string]*measurement{}}

	// 1. The framework ceiling.
	r.Runs["healthz"] = attack("healthz", *conc, 0, *dur, func(int) vegeta.Target {
		return vegeta.Target{Method: "GET", URL: srv.url + "/healthz"}
	})

	// 2. The database ceiling: the SQL of one new-event callback, in pgbench.
	if r.PgbenchTPS, err = pgbench(ctx, db, dbURL, *conc, *dur); err != nil {
		return err
	}

	// 3. New-event callbacks: each pays its own pending order.
	orders, err := pendingOrders(ctx, db, 400_000)
	if err != nil {
		return err
	}
	var next atomic.Int64
	newEvent := func(int) vegeta.Target {
		i := int(next.Add(1)) - 1
		body := callback(orders[i%len(orders)])
		return signed(key, srv.url, fmt.Sprintf("evt-new-%d", i), body)
	}
	r.Runs["new_event"] = attack("new_event", *conc, 0, *dur, newEvent)

	// 4. Duplicates of one processed event, with the database's write
	// transactions and WAL measured around them.
	dupBody := callback(orders[len(orders)-1])
	dup := func(int) vegeta.Target { return signed(key, srv.url, "evt-dup", dupBody) }
	attack("warm-up", 1, 0, 0, func(i int) vegeta.Target { return dup(i) }, 1)
	time.Sleep(time.Second) // let the delivery log flush before counting
	xid0, lsn0 := xactAndWAL(ctx, db)
	r.Runs["duplicate"] = attack("duplicate", *conc, 0, *dur, dup)
	time.Sleep(time.Second) // the last batch of audit rows belongs to these duplicates
	xid1, lsn1 := xactAndWAL(ctx, db)
	n := float64(r.Runs["duplicate"].Requests)
	r.WritesPerDup = float64(xid1-xid0-1) / n // -1: the measuring call takes an xid itself
	r.WALPerDup = float64(lsn1-lsn0) / n

	// 5. At 80% of each measured maximum: latency, and the server's memory.
	rss := srv.watchRSS()
	r.At80["new_event"] = attack("new_event@80%", *conc, int(0.8*r.Runs["new_event"].Throughput), *dur, newEvent)
	r.At80["duplicate"] = attack("duplicate@80%", *conc, int(0.8*r.Runs["duplicate"].Throughput), *dur, dup)
	r.MaxRSSMB = rss()

	r.Ratios["new_event / pgbench"] = r.Runs["new_event"].Throughput / r.PgbenchTPS
	r.Ratios["duplicate / healthz"] = r.Runs["duplicate"].Throughput / r.Runs["healthz"].Throughput
	r.Ratios["duplicate / new_event"] = r.Runs["duplicate"].Throughput / r.Runs["new_event"].Throughput
	return write(r, *out)
}

// attack runs one load: as fast as `workers` go (rate 0) or at `rate`
// per second, for `d` (0: `limit` requests).
func attack(name string, workers, rate int, d time.Duration, target func(int) vegeta.Target, limit ...int) *measurement {
	var i atomic.Int64
	targeter := func(t *vegeta.Target) error {
		n := int(i.Add(1)) - 1
		if len(limit) > 0 && n >= limit[0] {
			return vegeta.ErrNoTargets
		}
		*t = target(n)
		return nil
	}
	a := vegeta.NewAttacker(vegeta.Workers(uint64(workers)), vegeta.MaxWorkers(uint64(workers)),
		vegeta.Connections(workers), vegeta.KeepAlive(true), vegeta.Timeout(30*time.Second))
	m := &measurement{Name: name}
	var metrics vegeta.Metrics
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
	m.Requests = int(metrics.Requests)
	m.Throughput = metrics.Throughput
	m.P50 = ms(metrics.Latencies.P50)
	m.P99 = ms(metrics.Latencies.P99)
	m.Max = ms(metrics.Latencies.Max)
	if name != "warm-up" {
		fmt.Printf("  %-16s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  errors %d\n", name, m.Throughput, m.P50, m.P99, m.Errors)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func callback(orderID string) []byte {
	return []byte(fmt.Sprintf(`{"order_id":%q,"transaction_id":"tx-%s","payment_status":"paid","paid_amount":10000,"currency":"IDR"}`, orderID, orderID))
}

func signed(key []byte, base, event string, body []byte) vegeta.Target {
	h := stdwebhooks.Headers(key, event, time.Now(), body)
	h.Set("Content-Type", "application/json")
	return vegeta.Target{Method: "POST", URL: base + "/callbacks/sandbox", Body: body, Header: h}
}

// pendingOrders inserts n pending one-item orders straight into the
// database (with their reservation, so the stock adds up) and returns
// their ids.
func pendingOrders(ctx context.Context, db *pgx.Conn, n int) ([]string, error) {
	for _, q := range []string{
		`INSERT INTO products (sku, name, price, currency, stock) VALUES ('BENCH', 'bench', 10000, 'IDR', 0)`,
		`INSERT INTO orders (id, customer_email, status, total_amount, currency, expires_at)
		   SELECT 'ORD-BENCH-' || g, 'bench@example.com', 'pending', 10000, 'IDR', now() + interval '1 day' FROM generate_series(1, $1::int) g`,
		`INSERT INTO order_items (order_id, sku, qty, unit_price) SELECT 'ORD-BENCH-' || g, 'BENCH', 1, 10000 FROM generate_series(1, $1::int) g`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, n)
		}
		if _, err := db.Exec(ctx, q, args...); err != nil {
			return nil, fmt.Errorf("bench orders: %w", err)
		}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("ORD-BENCH-%d", i+1)
	}
	return ids, nil
}

// pgbenchScript is the SQL of one new-event callback, statement for
// statement (app/payments/apply.go), each on its own order and key.
// Colons inside literals are written chr(58): pgbench would read
// ":generate" as a variable.
const pgbenchScript = `
SELECT nextval('pgbench_order_seq') AS n \gset
BEGIN;
INSERT INTO payment_callbacks (provider, idempotency_key, payload_hash, order_id, transaction_id, event_status, amount, currency, status, result, conflict_count, response_code, attempts, first_received_at, last_received_at)
  VALUES ('sandbox', 'pgb-' || :n::bigint, 'ffff', 'ORD-PGB-' || :n::bigint, 'tx-pgb-' || :n::bigint, 'paid', 10000, 'IDR', 'processed', '', 0, 0, 1, now(), now())
  ON CONFLICT DO NOTHING RETURNING id \gset cb_
SELECT * FROM orders WHERE id = 'ORD-PGB-' || :n::bigint LIMIT 1 FOR UPDATE;
SELECT * FROM payments WHERE provider = 'sandbox' AND provider_reference = 'tx-pgb-' || :n::bigint LIMIT 1;
UPDATE orders SET paid_at = now(), status = 'paid', updated_at = now() WHERE id = 'ORD-PGB-' || :n::bigint AND status IN ('pending');
INSERT INTO payments (provider, provider_reference, order_id, amount, currency, status, created_at, updated_at)
  VALUES ('sandbox', 'tx-pgb-' || :n::bigint, 'ORD-PGB-' || :n::bigint, 10000, 'IDR', 'succeeded', now(), now())
  ON CONFLICT (provider, provider_reference) DO UPDATE SET status = excluded.status, amount = excluded.amount, currency = excluded.currency, updated_at = excluded.updated_at
  WHERE payments.order_id = excluded.order_id AND payments.status IN ('pending', 'failed', 'expired');
INSERT INTO outbox_messages (task_type, payload, task_id, queue, process_at, status, attempts, last_error, created_at)
  VALUES ('invoice' || chr(58) || 'generate', '\x7b7d', 'invoice' || chr(58) || 'generate' || chr(58) || 'ORD-PGB-' || :n::bigint, 'critical', now(), 'pending', 0, '', now()),
         ('email' || chr(58) || 'send', '\x7b7d', 'email' || chr(58) || 'send' || chr(58) || 'order_paid' || chr(58) || 'ORD-PGB-' || :n::bigint, 'default', now(), 'pending', 0, '', now())
  ON CONFLICT DO NOTHING;
WITH done AS (UPDATE payment_callbacks SET status = 'processed', result = 'processed', response_code = 200, processed_at = now() WHERE id = :cb_id RETURNING id)
INSERT INTO callback_deliveries (callback_id, provider, received_at, outcome, response_code, duration_ms, remote_addr, request_id)
  SELECT id, 'sandbox', now(), 'processed', 200, 1, '127.0.0.1', 'pgb' FROM done;
COMMIT;
`

// pgbench prepares as many pending orders as pgbench can use and runs
// the script; it returns the transactions per second.
func pgbench(ctx context.Context, db *pgx.Conn, dbURL string, clients int, d time.Duration) (float64, error) {
	const n = 400_000
	for _, q := range []string{
		`CREATE SEQUENCE pgbench_order_seq`,
		`INSERT INTO products (sku, name, price, currency, stock) VALUES ('PGB', 'pgbench', 10000, 'IDR', 0)`,
		fmt.Sprintf(`INSERT INTO orders (id, customer_email, status, total_amount, currency, expires_at)
		   SELECT 'ORD-PGB-' || g, 'pgb@example.com', 'pending', 10000, 'IDR', now() + interval '1 day' FROM generate_series(1, %d) g`, n),
		fmt.Sprintf(`INSERT INTO order_items (order_id, sku, qty, unit_price) SELECT 'ORD-PGB-' || g, 'PGB', 1, 10000 FROM generate_series(1, %d) g`, n),
		`ANALYZE`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			return 0, fmt.Errorf("pgbench set-up: %w", err)
		}
	}
	script := filepath.Join(os.TempDir(), "sekali-new-event.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript), 0o644); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared", "-c", strconv.Itoa(clients),
		"-j", strconv.Itoa(runtime.NumCPU()), "-T", strconv.Itoa(int(d.Seconds())), "-f", script, dbURL)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %v\n%s", err, outb)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(outb)
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no tps:\n%s", outb)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	fmt.Printf("  %-16s %8.0f tx/s   (the SQL of one new-event callback, %d clients)\n", "pgbench", tps, clients)
	return tps, nil
}

// xactAndWAL reads the next transaction id and the WAL position.
func xactAndWAL(ctx context.Context, db *pgx.Conn) (int64, int64) {
	var xid, lsn int64
	db.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint, pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&xid, &lsn)
	return xid, lsn
}

// server is the sekali process under test.
type server struct {
	cmd *exec.Cmd
	url string
}

func startServer(bin, dbURL, redisURL string, conc int) (*server, error) {
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "REDIS_URL="+redisURL, "HTTP_ADDR=127.0.0.1:0",
		"SANDBOX_WEBHOOK_SECRET="+benchSecret, "LOG_LEVEL=error", "DB_MAX_CONNS="+strconv.Itoa(min(conc, 40)),
		"ORDER_TTL=24h")
	migrate := exec.Command(bin, "migrate", "up")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("migrate: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--roles=web")
	cmd.Env = env
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
	return nil, fmt.Errorf("the server stopped before serving")
}

func (s *server) stop() { s.cmd.Process.Signal(os.Interrupt); s.cmd.Wait() }

// watchRSS samples the server's resident memory until the returned
// function is called, which returns the largest sample in MB.
func (s *server) watchRSS() func() float64 {
	var mu sync.Mutex
	peak := 0.0
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
			if err != nil {
				continue
			}
			if m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b); m != nil {
				kb, _ := strconv.ParseFloat(string(m[1]), 64)
				mu.Lock()
				peak = math.Max(peak, kb/1024)
				mu.Unlock()
			}
		}
	}()
	return func() float64 { close(done); mu.Lock(); defer mu.Unlock(); return peak }
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
