package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
// the server's start-up and the 5 ms poll are noise, short enough that a
// round (fresh database, fresh Redis, 300 orders) takes seconds. One
// round's figures swing by about 20% with the disk's fsync latency; a
// larger -benchtime (5x) runs more rounds and averages them.
const benchJobs = 300

// BenchmarkGuardVersusBare measures what the guard costs: the same
// invoice:generate backlog drained by a real asynq.Server, once by a bare
// handler (IssueTx in a transaction) and once through jobs.Guard, each on
// its own database and redis-server. It reports jobs/s, ns per job and,
// in a last sub-benchmark, guarded/bare (the product's goal is >= 0.5).
//
//	go test -run '^$' -bench GuardVersusBare -benchtime 1x ./jobs/
func BenchmarkGuardVersusBare(b *testing.B) {
	var bare, guarded float64 // jobs/s, handed back by the sub-benchmarks
	b.Run("bare", func(b *testing.B) {
		bare = benchDrain(b, func(db *gorm.DB, _ *redis.Client) asynq.Handler {
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
		})
	})
	b.Run("guarded", func(b *testing.B) {
		guarded = benchDrain(b, func(db *gorm.DB, rdb *redis.Client) asynq.Handler {
			g := jobs.NewGuard(db, rdb, slog.New(slog.DiscardHandler), "bench", config.DefaultJobLockTTL, metrics.New())
			return g.Wrap(jobs.InvoiceEffect(time.Now, metrics.New()))
		})
	})
	if bare == 0 || guarded == 0 {
		return // a sub-benchmark failed or was filtered out
	}
	// A benchmark with sub-benchmarks prints no line of its own, so the
	// ratio goes to a leaf as well.
	b.ReportMetric(guarded/bare, "guarded/bare")
	b.Run("ratio", func(b *testing.B) {
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(guarded/bare, "guarded/bare")
	})
}

// benchDrain runs b.N rounds of benchJobs invoice jobs through the handler
// that mk builds, timing each round from the server's start until every
// invoice exists, and returns the jobs/s over all rounds.
func benchDrain(b *testing.B, mk func(*gorm.DB, *redis.Client) asynq.Handler) float64 {
	b.StopTimer()
	var total time.Duration
	for range b.N {
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
		h := mk(db, rdb)

		b.StartTimer()
		start := time.Now()
		if err := srv.Start(h); err != nil {
			b.Fatal(err)
		}
		benchWaitInvoices(b, db, benchJobs)
		elapsed := time.Since(start)
		b.StopTimer()

		srv.Shutdown()
		total += elapsed
	}
	n := float64(benchJobs * b.N)
	b.ReportMetric(n/total.Seconds(), "jobs/s")
	b.ReportMetric(float64(total.Nanoseconds())/n, "ns/op") // per job, not per round
	return n / total.Seconds()
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

// benchWaitInvoices polls until n invoices exist. The deadline only keeps
// a broken run from hanging; it asserts nothing about speed.
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
