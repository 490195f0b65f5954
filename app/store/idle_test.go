package store_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
)

// A process that stops in the middle of a transaction (here: a transaction
// that simply waits) does not hold its row locks for ever: the pool opened
// from Config.PoolURL asks PostgreSQL to end a session idle in a
// transaction after DB_IDLE_IN_TRANSACTION_TIMEOUT. Another session then
// takes the row, and the stalled transaction can commit nothing.
func TestIdleTransactionLetsItsLocksGo(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabaseURL(t)
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"DATABASE_URL": url, "DB_IDLE_IN_TRANSACTION_TIMEOUT": "300ms"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, cfg.PoolURL(), 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(db) })
	p := testenv.MustCreateProduct(t, db, "IDLE-1", 1000, 5)

	stalled := db.Begin()
	if err := stalled.Exec("UPDATE products SET stock = stock - 1 WHERE id = ?", p.ID).Error; err != nil {
		t.Fatal(err)
	}
	// The row is locked; a second session waits for it, no longer than the
	// test may run, and gets it once PostgreSQL has ended the stalled one.
	wait, cancel := context.WithCancel(ctx)
	if d, ok := t.Deadline(); ok {
		wait, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
	}
	defer cancel()
	start := time.Now()
	if err := db.WithContext(wait).Transaction(func(tx *gorm.DB) error {
		return tx.Exec("UPDATE products SET stock = stock - 2 WHERE id = ?", p.ID).Error
	}); err != nil {
		t.Fatalf("the second session did not get the row: %v", err)
	}
	t.Logf("the row was free %s after the stalled transaction's last statement", time.Since(start).Round(time.Millisecond))
	if err := stalled.Commit().Error; err == nil {
		t.Error("the stalled transaction committed after PostgreSQL ended its session")
	}
	var stock int64
	if err := db.Raw("SELECT stock FROM products WHERE id = ?", p.ID).Scan(&stock).Error; err != nil {
		t.Fatal(err)
	}
	if stock != 3 {
		t.Errorf("stock = %d, want 3: only the second session's change", stock)
	}
}
