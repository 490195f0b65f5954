package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/invoices"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
)

// benchJobs is the number of invoice jobs per round. It is fixed rather
// than b.N so that `-benchtime 1x` still measures a real backlog: 300 jobs
// keep ten workers busy for a few hundred milliseconds, long enough that
// the server's start-up is noise, short enough that a
// round (fresh database, fresh Redis, 300 orders) takes seconds. One
// round's figures swing by about 20% with the disk's fsync latency; a
// larger -benchtime (5x) runs more rounds and averages them.
const benchJobs = 300

// BenchmarkGuardVersusBare measures what the guard costs: the same
// invoice:generate backlog drained by a real asynq.Server, by a bare
// handler (IssueTx in a transaction) and through jobs.Guard, each round on
// its own database and redis-server. The two alternate, a bare round then
// a guarded one, so that both meet the same machine: other work on shared
// cores moves a round's figures by half. Per job it reports, for each,
// this process's CPU (the worker's: user + system, from getrusage), its
// allocations, the CPU of the database's backends and of the
// redis-server, and jobs/s; then guarded ÷ bare of each. The product's
// goal is the worker's CPU per guarded job ≤ 2 × the bare one's
// (docs/performance.md); wall time is the weaker figure on a shared
// machine, where other processes take the cores.
//
//	go test -run '^$' -bench GuardVersusBare -benchtime 3x ./jobs/
func BenchmarkGuardVersusBare(b *testing.B) {
	bare := func(db *gorm.DB, _ *redis.Client) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			var p jobs.InvoiceArgs
			if err := json.Unmarshal(t.Payload(), &p); err != nil {
				return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
			}
			return store.Transaction(ctx, db, func(tx *gorm.DB) error {
				_, _, err := invoices.IssueTx(tx, p.OrderID, time.Now())
				return err
			})
		})
	}
	guarded := func(db *gorm.DB, rdb *redis.Client) asynq.Handler {
		g := jobs.NewGuard(db, rdb, slog.New(slog.DiscardHandler), "bench", config.DefaultJobLockTTL, metrics.New())
		return g.Wrap(jobs.InvoiceEffect(time.Now, metrics.New()))
	}
	b.StopTimer()
	var bareCost, guardedCost drained
	for range b.N {
		benchDrain(b, &bareCost, bare)
		benchDrain(b, &guardedCost, guarded)
	}
	bareCost.report(b, "bare-")
	guardedCost.report(b, "guarded-")
	b.ReportMetric(float64((bareCost.wall+guardedCost.wall).Nanoseconds())/float64(bareCost.jobs+guardedCost.jobs), "ns/op") // per job
	b.ReportMetric(guardedCost.perJob(guardedCost.cpu)/bareCost.perJob(bareCost.cpu), "cpu-guarded/bare")
	b.ReportMetric(guardedCost.perJob(float64(guardedCost.allocs))/bareCost.perJob(float64(bareCost.allocs)), "allocs-guarded/bare")
	b.ReportMetric(guardedCost.perJob(guardedCost.pgCPU)/bareCost.perJob(bareCost.pgCPU), "pg-cpu-guarded/bare")
	b.ReportMetric(guardedCost.rate()/bareCost.rate(), "jobs/s-guarded/bare")
}

// drained is what draining the backlogs of one handler cost, summed over
// its rounds.
type drained struct {
	jobs                 int
	wall                 time.Duration
	cpu, pgCPU, redisCPU float64 // µs: this process, the database's backends, the redis-server
	allocs, bytes        uint64
}

func (d drained) perJob(v float64) float64 { return v / float64(d.jobs) }
func (d drained) rate() float64            { return float64(d.jobs) / d.wall.Seconds() }

// report sets the per-job metrics of one handler, their units prefixed
// with its name.
func (d drained) report(b *testing.B, name string) {
	b.ReportMetric(d.rate(), name+"jobs/s")
	b.ReportMetric(d.perJob(d.cpu), name+"cpu-µs/job")
	b.ReportMetric(d.perJob(float64(d.allocs)), name+"allocs/job")
	b.ReportMetric(d.perJob(float64(d.bytes)), name+"B/job")
	b.ReportMetric(d.perJob(d.pgCPU), name+"pg-cpu-µs/job")
	b.ReportMetric(d.perJob(d.redisCPU), name+"redis-cpu-µs/job")
}

// benchDrain runs one round of benchJobs invoice jobs through the handler
// that mk builds, measuring from the server's start until the handler has
// finished every job, and adds its costs to d.
func benchDrain(b *testing.B, d *drained, mk func(*gorm.DB, *redis.Client) asynq.Handler) {
	db, rdb := benchBacklog(b, benchJobs)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              config.DefaultConcurrency,
		Queues:                   jobs.QueueWeights(),
		RetryDelayFunc:           jobs.RetryDelay,
		TaskCheckInterval:        100 * time.Millisecond, // as RunWorker
		DelayedTaskCheckInterval: time.Second,
		ShutdownTimeout:          5 * time.Second,
		Logger:                   asynqLogger{slog.New(slog.DiscardHandler)},
		LogLevel:                 asynq.WarnLevel,
		IsFailure:                func(err error) bool { return !errors.Is(err, jobs.ErrLockBusy) },
	})
	// The end is counted in the handler, not polled from the database: a
	// poll would spend this process's CPU, the figure measured.
	h, done := countDone(mk(db, rdb), benchJobs)

	runtime.GC() // the set-up's garbage is not the round's to collect
	before := sampleCosts(b, db, rdb)
	b.StartTimer()
	start := time.Now()
	if err := srv.Start(h); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // only keeps a broken run from hanging
		b.Fatalf("the jobs were not done after 2 minutes")
	}
	elapsed := time.Since(start)
	b.StopTimer()
	after := sampleCosts(b, db, rdb)

	srv.Shutdown()
	benchWaitInvoices(b, db, benchJobs)
	d.add(before, after, elapsed, benchJobs)
}

// countDone wraps h so that done closes once n of its runs succeeded.
func countDone(h asynq.Handler, n int64) (asynq.Handler, <-chan struct{}) {
	var ok atomic.Int64
	done := make(chan struct{})
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := h.ProcessTask(ctx, t)
		if err == nil && ok.Add(1) == n {
			close(done)
		}
		return err
	}), done
}

// costs are cumulative counters of the processes a round runs on.
type costs struct {
	cpu           float64           // µs, this process
	pg            map[int32]float64 // µs per backend pid of the round's database
	redis         float64           // µs, the redis-server
	allocs, bytes uint64
}

func sampleCosts(b *testing.B, db *gorm.DB, rdb *redis.Client) costs {
	b.Helper()
	var c costs
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	c.cpu = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
	var pids []int32
	if err := db.Raw("SELECT pid FROM pg_stat_activity WHERE datname = current_database()").Find(&pids).Error; err != nil {
		b.Fatal(err)
	}
	c.pg = map[int32]float64{}
	for _, pid := range pids {
		c.pg[pid] = float64(testenv.ProcessCPU(int(pid)).Microseconds())
	}
	c.redis = redisCPU(b, rdb)
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	c.allocs, c.bytes = m.Mallocs, m.TotalAlloc
	return c
}

// add sums one round: a backend that was not there at its start spent
// all its CPU in the round.
func (d *drained) add(before, after costs, wall time.Duration, jobs int) {
	d.jobs += jobs
	d.wall += wall
	d.cpu += after.cpu - before.cpu
	for pid, us := range after.pg {
		d.pgCPU += us - before.pg[pid]
	}
	d.redisCPU += after.redis - before.redis
	d.allocs += after.allocs - before.allocs
	d.bytes += after.bytes - before.bytes
}

// redisCPU is the redis-server's own CPU time in µs (INFO cpu).
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var us float64
	for _, line := range strings.Split(info, "\r\n") {
		name, v, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			s, _ := strconv.ParseFloat(v, 64)
			us += s * 1e6
		}
	}
	return us
}

// benchBacklog makes a fresh database with n paid orders, sized like
// production's pool, and a private Redis holding their invoice tasks.
func benchBacklog(b *testing.B, n int) (*gorm.DB, *redis.Client) {
	b.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.NewDatabaseURL(b), config.DefaultDBMaxConns, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close(db) })
	rdb := testenv.StartRedis(b).Client()

	testenv.MustCreateProduct(b, db, "BENCH", price, int64(n))
	svc := orders.NewService(db, slog.New(slog.DiscardHandler), time.Now, time.Hour, jobs.Tasks{})
	ids := make([]string, 0, n)
	// One transaction for all orders: set-up speed only.
	err = store.Transaction(ctx, db, func(tx *gorm.DB) error {
		ids = ids[:0]
		for range n {
			o, err := svc.CreateTx(tx, orders.CreateRequest{
				CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: "BENCH", Qty: 1}},
			})
			if err != nil {
				return err
			}
			ids = append(ids, o.ID)
		}
		// Paid is all IssueTx looks at; the payment path is not measured here.
		return tx.Exec("UPDATE orders SET status = 'paid', paid_at = now()").Error
	})
	if err != nil {
		b.Fatal(err)
	}
	client := asynq.NewClientFromRedisClient(rdb)
	now := time.Now()
	for _, id := range ids {
		if _, err := client.Enqueue(jobs.NewTask(jobs.Row(jobs.InvoiceArgs{OrderID: id}, now), time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
	return db, rdb
}

// benchWaitInvoices checks that n invoices exist (polling, in case the
// last commit is still on its way). The deadline only keeps a broken run
// from hanging; it asserts nothing about speed.
func benchWaitInvoices(b *testing.B, db *gorm.DB, n int64) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var got int64
		if err := db.Raw("SELECT count(*) FROM invoices").Scan(&got).Error; err != nil {
			b.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d invoices after 2 minutes", got, n)
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}
