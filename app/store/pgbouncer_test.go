package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
)

// TestTransactionPoolingNeedsExecMode shows why DB_PGBOUNCER exists. Behind
// PgBouncer in transaction mode with one server connection, pgx's default
// (each statement prepared once per connection, under a name derived from
// its text) breaks at once: the second client prepares the same name on
// the same server connection. The pool opened from Config.PoolURL sends
// every statement unnamed, and many clients share the one connection.
func TestTransactionPoolingNeedsExecMode(t *testing.T) {
	t.Parallel()
	direct := testenv.NewDatabaseURL(t)
	bouncer := testenv.StartPgBouncer(t, direct, 1)
	ctx := context.Background()

	var results [2]error
	for i := range results {
		cc, err := pgx.ParseConfig(bouncer.URL)
		if err != nil {
			t.Fatal(err)
		}
		cc.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement // pgx's default, whatever the test URL says
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		results[i] = conn.QueryRow(ctx, "SELECT count(*) FROM orders WHERE status = $1", "paid").Scan(&n)
	}
	var pgErr *pgconn.PgError
	if results[0] != nil || !errors.As(results[1], &pgErr) || pgErr.Code != "42P05" {
		t.Fatalf("default mode through the pooler: %v, then %v; want success, then 42P05 (prepared statement already exists)", results[0], results[1])
	}

	cfg, err := config.Load(func(k string) string {
		return map[string]string{"DATABASE_URL": bouncer.URL, "DATABASE_LISTEN_URL": direct, "DB_PGBOUNCER": "true"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, cfg.PoolURL(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				errs <- store.Transaction(ctx, db, func(tx *gorm.DB) error {
					var n int64
					key := fmt.Sprintf("k-%d-%d", i, j)
					if err := tx.Raw("SELECT count(*) FROM orders WHERE status = ? AND id <> ?", "paid", key).Scan(&n).Error; err != nil {
						return err
					}
					return tx.Exec("SELECT pg_sleep(0) WHERE ? <> ''", key).Error
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a transaction through the pooler in exec mode: %v", err)
		}
	}
}
