package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgbenchScript is the SQL of one new-event callback, statement for
// statement (app/payments/statements.go: BEGIN, six statements, COMMIT;
// the application sends them in two round trips, between one per
// statement and the pipelined run's one), each transaction on its own order and key,
// taken from a sequence in the first statement. {{ORDER}}, {{TX}} and
// {{CB}} are the order id, the charge's reference and the callback row's
// id. Colons inside literals are written chr(58): pgbench would read
// ":generate" as a variable.
const pgbenchScript = `
{{BEGIN}}
INSERT INTO payment_callbacks (provider, idempotency_key, payload_hash, order_id, transaction_id, event_status, amount, currency, status, result, conflict_count, response_code, attempts, first_received_at, last_received_at, processed_at)
  SELECT 'sandbox', 'pgb-' || n, 'ffff', 'ORD-PGB-' || n, 'tx-pgb-' || n, 'paid', 10000, 'IDR', 'processed', '', 0, 0, 1, now(), now(), NULL
  FROM nextval('pgbench_order_seq') n
  ON CONFLICT DO NOTHING RETURNING id, order_id, transaction_id{{GSET}}
SELECT o.*, p.order_id AS charge_order_id, p.status AS charge_status
  FROM orders o LEFT JOIN payments p ON p.provider = 'sandbox' AND p.provider_reference = {{TX}}
  WHERE o.id = {{ORDER}} FOR UPDATE OF o;
WITH moved AS (
    UPDATE orders SET status = 'paid', updated_at = now(), paid_at = coalesce(now(), paid_at)
    WHERE id = {{ORDER}} AND status IN ('pending') RETURNING id)
INSERT INTO order_transitions (order_id, from_status, to_status, cause, callback_id, created_at)
  SELECT id, 'pending', 'paid', 'callback', {{CB}}, now() FROM moved;
INSERT INTO payments (provider, provider_reference, order_id, amount, currency, status, created_at, updated_at)
  VALUES ('sandbox', {{TX}}, {{ORDER}}, 10000, 'IDR', 'succeeded', now(), now())
  ON CONFLICT (provider, provider_reference) DO UPDATE SET status = excluded.status, amount = excluded.amount, currency = excluded.currency, updated_at = excluded.updated_at
  WHERE payments.order_id = excluded.order_id AND payments.status IN ('pending', 'failed', 'expired') RETURNING id;
INSERT INTO outbox_messages (task_type, payload, task_id, queue, process_at, status, attempts, last_error, created_at, dispatched_at)
  VALUES ('invoice' || chr(58) || 'generate', '\x7b7d', 'invoice' || chr(58) || 'generate' || chr(58) || {{ORDER}}, 'critical', now(), 'pending', 0, '', now(), NULL),
         ('email' || chr(58) || 'send', '\x7b7d', 'email' || chr(58) || 'send' || chr(58) || 'order_paid' || chr(58) || {{ORDER}}, 'default', now(), 'pending', 0, '', now(), NULL)
  ON CONFLICT DO NOTHING RETURNING id;
WITH done AS (UPDATE payment_callbacks SET status = 'processed', result = 'processed', response_code = 200, processed_at = now() WHERE id = {{CB}} RETURNING id)
INSERT INTO callback_deliveries (callback_id, provider, received_at, outcome, response_code, duration_ms, remote_addr, request_id)
  SELECT id, 'sandbox', now(), 'processed', 200, 1, '127.0.0.1', 'pgb' FROM done;
{{COMMIT}}
`

// script returns the pgbench script: one round trip per statement, the
// values read back from the first statement and bound as parameters, as
// the application does; or (pipelined) the same statements sent in one
// round trip. A pipeline cannot read a result back (\gset), so there the
// values come from the sequence's currval, in a subquery so that the
// planner still uses the indexes (currval is volatile).
func script(pipelined bool) string {
	r := strings.NewReplacer("{{BEGIN}}", "BEGIN;", "{{COMMIT}}", "COMMIT;", "{{GSET}}", " \\gset cb_",
		"{{ORDER}}", ":cb_order_id", "{{TX}}", ":cb_transaction_id", "{{CB}}", ":cb_id")
	if pipelined {
		n := "currval('pgbench_order_seq')"
		r = strings.NewReplacer("{{BEGIN}}", "\\startpipeline\nBEGIN;", "{{COMMIT}}", "COMMIT;\n\\endpipeline", "{{GSET}}", ";",
			"{{ORDER}}", "(SELECT 'ORD-PGB-' || "+n+")", "{{TX}}", "(SELECT 'tx-pgb-' || "+n+")",
			"{{CB}}", "(SELECT id FROM payment_callbacks WHERE provider = 'sandbox' AND idempotency_key = (SELECT 'pgb-' || "+n+"))")
	}
	return r.Replace(pgbenchScript)
}

// pgbenchRun is one pgbench measurement.
type pgbenchRun struct {
	Clients   int     `json:"clients"`
	Pipelined bool    `json:"pipelined"`
	TPS       float64 `json:"tps"`
	LatencyMS float64 `json:"latency_avg_ms"`
	Failed    int     `json:"failed"`
	Load      float64 `json:"load_average"` // 1-minute, when it started
}

// pgbenchSetup makes as many pending orders as pgbench can use.
func pgbenchSetup(ctx context.Context, db *pgx.Conn, n int) error {
	for _, q := range []string{
		`CREATE SEQUENCE pgbench_order_seq`,
		`INSERT INTO products (sku, name, price, currency, stock) VALUES ('PGB', 'pgbench', 10000, 'IDR', 0)`,
		fmt.Sprintf(`INSERT INTO orders (id, customer_email, status, total_amount, currency, expires_at)
		   SELECT 'ORD-PGB-' || g, 'pgb@example.com', 'pending', 10000, 'IDR', now() + interval '1 day' FROM generate_series(1, %d) g`, n),
		fmt.Sprintf(`INSERT INTO order_items (order_id, sku, qty, unit_price) SELECT 'ORD-PGB-' || g, 'PGB', 1, 10000 FROM generate_series(1, %d) g`, n),
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			return fmt.Errorf("pgbench set-up: %w", err)
		}
	}
	return nil
}

// pgbenchSweep runs the script at each client count, one round trip per
// statement and pipelined, interleaved so that a change in the machine's
// load touches both alike.
func pgbenchSweep(ctx context.Context, dbURL string, clients []int, d time.Duration) ([]pgbenchRun, error) {
	dir, err := os.MkdirTemp("", "sekali-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var runs []pgbenchRun
	for _, c := range clients {
		for _, pipelined := range []bool{false, true} {
			path := filepath.Join(dir, fmt.Sprintf("new-event-%t.sql", pipelined))
			if err := os.WriteFile(path, []byte(script(pipelined)), 0o644); err != nil {
				return nil, err
			}
			r, err := pgbench(ctx, dbURL, path, c, d)
			if err != nil {
				return nil, err
			}
			r.Pipelined = pipelined
			kind := "pgbench"
			if pipelined {
				kind = "pgbench pipelined"
			}
			fmt.Printf("  %-24s %8.0f tx/s  %2d clients  avg %6.2f ms  (load %.1f)\n", kind, r.TPS, c, r.LatencyMS, r.Load)
			runs = append(runs, r)
		}
	}
	return runs, nil
}

var (
	tpsRE     = regexp.MustCompile(`tps = ([0-9.]+)`)
	latencyRE = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	failedRE  = regexp.MustCompile(`number of failed transactions: (\d+)`)
)

func pgbench(ctx context.Context, dbURL, scriptPath string, clients int, d time.Duration) (pgbenchRun, error) {
	r := pgbenchRun{Clients: clients, Load: loadAverage()}
	cmd := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared", "-c", strconv.Itoa(clients),
		"-j", strconv.Itoa(min(clients, runtime.NumCPU())), "-T", strconv.Itoa(int(d.Seconds())), "-f", scriptPath, dbURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return r, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	r.TPS, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := latencyRE.FindSubmatch(out); m != nil {
		r.LatencyMS, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := failedRE.FindSubmatch(out); m != nil {
		r.Failed, _ = strconv.Atoi(string(m[1]))
	}
	if r.Failed > 0 {
		return r, fmt.Errorf("pgbench: %d failed transactions:\n%s", r.Failed, out)
	}
	return r, nil
}

// best returns the run with the most transactions per second among those
// that are (or are not) pipelined.
func best(runs []pgbenchRun, pipelined bool) pgbenchRun {
	var b pgbenchRun
	for _, r := range runs {
		if r.Pipelined == pipelined && r.TPS > b.TPS {
			b = r
		}
	}
	return b
}
