package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
)

func setStock(sku string, stock int) store.Statement {
	return store.Statement{SQL: "UPDATE products SET stock = $1 WHERE sku = $2", Args: []any{stock, sku}}
}

func stockOf(t *testing.T, db *gorm.DB, sku string) int {
	t.Helper()
	var stock int
	if err := db.Raw("SELECT stock FROM products WHERE sku = $1", sku).Scan(&stock).Error; err != nil {
		t.Fatal(err)
	}
	return stock
}

// A Tx's batches and its GORM statements are one transaction: what the
// first Send, the GORM statement between and Commit's batch wrote is all
// there after the commit, and a statement's outcome is read by the
// function its batch gave it.
func TestPipelinedBatchesAndGormAreOneTransaction(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	for _, sku := range []string{"PIPE-A", "PIPE-B", "PIPE-C"} {
		testenv.MustCreateProduct(t, db, sku, 1000, 1)
	}
	var changed int64
	err := store.Pipelined(context.Background(), db, func(tx *store.Tx) error {
		b := &pgx.Batch{}
		setStock("PIPE-A", 10).Queue(b).Exec(func(tag pgconn.CommandTag) error {
			changed = tag.RowsAffected()
			return nil
		})
		if err := tx.Send(b); err != nil {
			return err
		}
		if _, err := setStock("PIPE-B", 20).Exec(tx.DB()); err != nil {
			return err
		}
		last := &pgx.Batch{}
		setStock("PIPE-C", 30).Queue(last)
		return tx.Commit(last)
	})
	if err != nil {
		t.Fatal(err)
	}
	if changed != 1 {
		t.Errorf("the first batch's update changed %d rows, want 1", changed)
	}
	for sku, want := range map[string]int{"PIPE-A": 10, "PIPE-B": 20, "PIPE-C": 30} {
		if got := stockOf(t, db, sku); got != want {
			t.Errorf("%s: stock %d, want %d", sku, got, want)
		}
	}
}

// A Tx whose function fails leaves nothing behind — neither its batches'
// writes nor an open transaction on the connection it hands back to the
// pool (a pool of one, so the next statement gets that connection).
func TestPipelinedRollsBackWhenItsFunctionFails(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1)
	testenv.MustCreateProduct(t, db, "PIPE-R", 1000, 1)
	failed := errors.New("the effect failed")
	err = store.Pipelined(context.Background(), db, func(tx *store.Tx) error {
		b := &pgx.Batch{}
		setStock("PIPE-R", 99).Queue(b)
		if err := tx.Send(b); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("Pipelined returned %v, want the function's error", err)
	}
	// Through the same connection: inside the failed transaction it would
	// read its own write, or fail.
	if got := stockOf(t, db, "PIPE-R"); got != 1 {
		t.Errorf("stock %d after the rollback, want 1", got)
	}
	var xact *string
	if err := db.Raw("SELECT pg_current_xact_id_if_assigned()::text").Scan(&xact).Error; err != nil {
		t.Fatal(err)
	}
	if xact != nil {
		t.Errorf("the connection came back to the pool inside transaction %s", *xact)
	}
}

// A statement that fails inside a batch ends the round trip there: the
// batch's earlier statements are rolled back with the transaction, and
// the error is the database's.
func TestPipelinedStatementErrorRollsBackItsBatch(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	testenv.MustCreateProduct(t, db, "PIPE-E", 1000, 1)
	err := store.Pipelined(context.Background(), db, func(tx *store.Tx) error {
		b := &pgx.Batch{}
		setStock("PIPE-E", 50).Queue(b)
		setStock("PIPE-E", -1).Queue(b) // products.stock has CHECK (stock >= 0)
		return tx.Commit(b)
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Fatalf("Pipelined returned %v, want the check violation (23514)", err)
	}
	if got := stockOf(t, db, "PIPE-E"); got != 1 {
		t.Errorf("stock %d, want 1: the batch's first update must be rolled back", got)
	}
}

// GORM's Transaction inside a Tx is a savepoint of the Tx's transaction,
// as it is inside db.Transaction: its failure undoes its own writes only,
// and it does not commit or end the outer transaction.
func TestPipelinedNestedGormTransactionIsASavepoint(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	testenv.MustCreateProduct(t, db, "PIPE-N1", 1000, 1)
	testenv.MustCreateProduct(t, db, "PIPE-N2", 1000, 1)
	inner := errors.New("inner failure")
	outerFails := errors.New("outer failure")
	err := store.Pipelined(context.Background(), db, func(tx *store.Tx) error {
		b := &pgx.Batch{}
		setStock("PIPE-N1", 7).Queue(b)
		if err := tx.Send(b); err != nil {
			return err
		}
		err := tx.DB().Transaction(func(sp *gorm.DB) error {
			if _, err := setStock("PIPE-N2", 8).Exec(sp); err != nil {
				return err
			}
			return inner
		})
		if !errors.Is(err, inner) {
			t.Errorf("the nested transaction returned %v", err)
		}
		if got := stockOf(t, tx.DB(), "PIPE-N2"); got != 1 {
			t.Errorf("PIPE-N2 has stock %d inside the transaction, want 1: the savepoint's write must be undone", got)
		}
		return outerFails // and the outer transaction must still be open to roll back PIPE-N1
	})
	if !errors.Is(err, outerFails) {
		t.Fatalf("Pipelined returned %v", err)
	}
	if got := stockOf(t, db, "PIPE-N1"); got != 1 {
		t.Errorf("PIPE-N1 has stock %d, want 1: the nested transaction must not have committed the outer one", got)
	}
}
