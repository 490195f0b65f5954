package main

// The whole pipeline: a paid callback, then the invoice issued and the
// confirmation email accepted by an SMTP server, on one server that runs
// the web, worker and relay roles. Latency is measured per order, from
// the moment the bench sends the callback to the invoice's issued_at and
// the email's sent_at (the same machine's clock).

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// e2eResult is the pipeline's measurement.
type e2eResult struct {
	// MaxOrders paid as fast as the callbacks go, and how long the
	// pipeline took until the last email was sent: its sustained rate.
	MaxOrders  int     `json:"max_orders"`
	MaxSeconds float64 `json:"max_seconds"`
	MaxRate    float64 `json:"max_rate_per_s"`
	// Burst is the callbacks of that run, as fast as they went.
	Burst *measurement `json:"burst"`
	// SustainedCPU is the CPU per order from the first callback to the
	// last email: the server (web, relay and worker), this program (the
	// load and the SMTP server), and the rest; of the rest, the database
	// backends of the pipeline's database and the redis-server.
	SustainedCPU *cpuUse `json:"sustained_cpu_per_order,omitempty"`
	PostgresUS   float64 `json:"sustained_postgres_us_per_order"`
	RedisUS      float64 `json:"sustained_redis_us_per_order"`
	// At 80% of MaxRate: the callbacks, and each order's latency.
	Rate       int          `json:"rate_per_s"`
	Callbacks  *measurement `json:"callbacks"`
	Orders     int          `json:"orders"`
	Completed  int          `json:"completed"`
	InvoiceP50 float64      `json:"invoice_p50_ms"`
	InvoiceP99 float64      `json:"invoice_p99_ms"`
	EmailP50   float64      `json:"email_p50_ms"`
	EmailP99   float64      `json:"email_p99_ms"`
	EmailMax   float64      `json:"email_max_ms"`
	// Messages the SMTP server accepted during the section.
	SMTPMessages int64 `json:"smtp_messages"`

	peakMB float64 // the server's peak RSS
}

// runE2E measures the pipeline on a server of its own and a database of
// its own: the outbox rows that the other sections left pending would
// otherwise be worked off during this one.
func runE2E(ctx context.Context, o runOptions, key []byte) (*e2eResult, error) {
	sink, err := startSMTPSink()
	if err != nil {
		return nil, err
	}
	defer sink.close()
	dbName := fmt.Sprintf("sekali_bench_e2e_%d", time.Now().Unix())
	dbURL := withDB(o.pgURL, dbName)
	defer dropDB(o.pgURL, dbName)
	srv, err := startServer(o.bin, dbURL, o.redisURL, serverOptions{roles: "web,worker,relay",
		extraEnv: []string{"SMTP_URL=smtp://" + sink.addr}})
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close(ctx)
	r := &e2eResult{}

	// 1. The pipeline's sustained rate: pay orders as fast as the
	// callbacks go, then wait until every email is out.
	maxIDs, err := pendingOrders(ctx, db, "E2E-MAX", int(o.dur.Seconds())*4000)
	if err != nil {
		return nil, err
	}
	var next atomic.Int64
	pg0, redis0, cpu0 := backendTicks(ctx, db), procTicks(redisPID), sampleCPU()
	if o.profile {
		go profileSustained(srv, o)
	}
	start, sent0 := time.Now(), sink.count.Load()
	burst := attack("pipeline burst", o.conc, 0, o.dur, func(int) vegeta.Target {
		id := maxIDs[int(next.Add(1)-1)%len(maxIDs)]
		return signed(key, srv.url, "evt-"+id, callback(id))
	})
	if burst.Errors > 0 {
		return nil, fmt.Errorf("pipeline: %d callbacks failed", burst.Errors)
	}
	r.Burst = burst
	paid := maxIDs[:min(burst.Requests, len(maxIDs))]
	last, done, err := waitEmails(ctx, db, sink, sent0, paid, 3*time.Minute)
	if err != nil {
		return nil, err
	}
	r.MaxOrders = done
	r.SustainedCPU = use(cpu0, sampleCPU(), done)
	r.PostgresUS = ticksSince(pg0, backendTicks(ctx, db)) * 1e4 / float64(done)
	r.RedisUS = (procTicks(redisPID) - redis0) * 1e4 / float64(done)
	r.MaxSeconds = last.Sub(start).Seconds()
	r.MaxRate = float64(done) / r.MaxSeconds
	fmt.Printf("  %-24s %8.0f orders/s  (%d orders paid, the last email %.1f s after the first callback)%s; PostgreSQL %.0f, Redis %.0f\n",
		"pipeline sustained", r.MaxRate, done, r.MaxSeconds, r.SustainedCPU, r.PostgresUS, r.RedisUS)

	// 2. At 80% of it: each order's latency.
	r.Rate = max(int(0.8*r.MaxRate), 1)
	ids, err := pendingOrders(ctx, db, "E2E-80", r.Rate*int(o.dur.Seconds())+r.Rate)
	if err != nil {
		return nil, err
	}
	checkpoint(ctx, db) // the burst's writes are not this run's to flush
	var mu sync.Mutex
	sentAt := map[string]time.Time{}
	next.Store(0)
	sent0 = sink.count.Load()
	r.Callbacks = attackAt("pipeline@80%", o.conc, r.Rate, o.dur, func(int) vegeta.Target {
		id := ids[int(next.Add(1)-1)%len(ids)]
		t := signed(key, srv.url, "evt-"+id, callback(id))
		mu.Lock()
		sentAt[id] = time.Now()
		mu.Unlock()
		return t
	})
	if r.Callbacks.Errors > 0 {
		return nil, fmt.Errorf("pipeline at 80%%: %d callbacks failed", r.Callbacks.Errors)
	}
	paid = paid[:0]
	for id := range sentAt {
		paid = append(paid, id)
	}
	if _, _, err := waitEmails(ctx, db, sink, sent0, paid, 3*time.Minute); err != nil {
		return nil, err
	}
	invoiced, emailed, err := doneTimes(ctx, db, paid)
	if err != nil {
		return nil, err
	}
	var inv, mail []float64
	for _, id := range paid {
		if t, ok := invoiced[id]; ok {
			inv = append(inv, ms(t.Sub(sentAt[id])))
		}
		if t, ok := emailed[id]; ok {
			mail = append(mail, ms(t.Sub(sentAt[id])))
		}
	}
	slices.Sort(inv)
	slices.Sort(mail)
	r.Orders, r.Completed = len(paid), len(mail)
	r.InvoiceP50, r.InvoiceP99 = quantile(inv, 0.50), quantile(inv, 0.99)
	r.EmailP50, r.EmailP99 = quantile(mail, 0.50), quantile(mail, 0.99)
	if len(mail) > 0 {
		r.EmailMax = mail[len(mail)-1]
	}
	r.SMTPMessages = sink.count.Load()
	srv.stop()
	r.peakMB = srv.peakMB
	fmt.Printf("  %-24s invoice p50 %6.1f ms  p99 %6.1f ms;  email p50 %6.1f ms  p99 %6.1f ms  (%d of %d orders)\n",
		"paid → invoice → email", r.InvoiceP50, r.InvoiceP99, r.EmailP50, r.EmailP99, r.Completed, r.Orders)
	return r, nil
}

// profileSustained saves the server's CPU profile of the burst and the
// start of the drain after it: what each stage of the pipeline costs.
func profileSustained(srv *server, o runOptions) {
	path := filepath.Join(o.out, fmt.Sprintf("bench-%s-pipeline.cpu.pprof", time.Now().UTC().Format("20060102-150405")))
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fmt.Printf("  (no profile of the pipeline: %v)\n", err)
		return
	}
	if err := srv.profile(path, 2*o.dur); err != nil {
		fmt.Printf("  (no profile of the pipeline: %v)\n", err)
		return
	}
	fmt.Printf("  (profile: go tool pprof -top %s)\n", path)
}

// backendTicks is the CPU time, in clock ticks, of each backend
// connected to db's database now.
func backendTicks(ctx context.Context, db *pgx.Conn) map[int]float64 {
	ticks := map[int]float64{}
	rows, err := db.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	if err != nil {
		return ticks
	}
	pids, _ := pgx.CollectRows(rows, pgx.RowTo[int32])
	for _, pid := range pids {
		ticks[int(pid)] = procTicks(int(pid))
	}
	return ticks
}

// ticksSince is the backends' CPU between two samples; a backend that
// was not there at the first spent all its time since.
func ticksSince(before, after map[int]float64) float64 {
	var n float64
	for pid, t := range after {
		n += t - before[pid]
	}
	return n
}

// waitEmails waits until every order of ids has its email sent, and
// returns the time the last one was sent and how many were. It watches
// the SMTP sink's count, in memory, and asks the database only when the
// sink has taken as many messages since it counted sent0, before the
// orders were paid: a query over
// thousands of keys every 200 ms was itself a third of PostgreSQL's CPU
// during the sustained run it measured.
func waitEmails(ctx context.Context, db *pgx.Conn, sink *smtpSink, sent0 int64, ids []string, timeout time.Duration) (last time.Time, n int, err error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = "order_paid:" + id
	}
	want := sent0 + int64(len(ids))
	deadline := time.Now().Add(timeout)
	for {
		if sink.count.Load() >= want || time.Now().After(deadline) {
			var lastSent *time.Time
			err := db.QueryRow(ctx, `SELECT count(*), max(sent_at) FROM outbound_emails WHERE status = 'sent' AND key = ANY($1)`, keys).
				Scan(&n, &lastSent)
			if err != nil {
				return last, n, err
			}
			if lastSent != nil {
				last = *lastSent
			}
			if n == len(ids) {
				return last, n, nil
			}
			if time.Now().After(deadline) {
				return last, n, fmt.Errorf("pipeline: %d of %d emails sent after %s", n, len(ids), timeout)
			}
			// The sink has the messages; a row is marked sent just after
			// its message is taken, so ask again shortly.
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// doneTimes reads when each order's invoice was issued and its email sent.
func doneTimes(ctx context.Context, db *pgx.Conn, ids []string) (invoiced, emailed map[string]time.Time, err error) {
	invoiced, emailed = map[string]time.Time{}, map[string]time.Time{}
	for q, into := range map[string]map[string]time.Time{
		`SELECT order_id, issued_at FROM invoices WHERE order_id = ANY($1)`: invoiced,
		`SELECT substr(key, length('order_paid:') + 1), sent_at FROM outbound_emails
		  WHERE status = 'sent' AND key = ANY(SELECT 'order_paid:' || unnest($1::text[]))`: emailed,
	} {
		rows, err := db.Query(ctx, q, ids)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var id string
			var t time.Time
			if err := rows.Scan(&id, &t); err != nil {
				return nil, nil, err
			}
			into[id] = t
		}
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	return invoiced, emailed, nil
}

// smtpSink is an SMTP server that accepts every message and keeps only
// their count.
type smtpSink struct {
	addr  string
	srv   *smtp.Server
	count atomic.Int64
}

func startSMTPSink() (*smtpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &smtpSink{addr: ln.Addr().String()}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return sinkSession{s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	go s.srv.Serve(ln)
	return s, nil
}

func (s *smtpSink) close() { s.srv.Close() }

type sinkSession struct{ sink *smtpSink }

func (sinkSession) Reset()                               {}
func (sinkSession) Logout() error                        { return nil }
func (sinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s sinkSession) Data(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	s.sink.count.Add(1)
	return err
}
