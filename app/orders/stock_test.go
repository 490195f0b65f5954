package orders_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// 10 buyers at once for a product with 3 units left, one unit each:
// exactly 3 orders are written, with 3 reserve movements, the stock ends
// at 0 (never below), and the other 7 buyers get insufficient_stock.
func TestConcurrentBuyersNeverOversell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("LIMITED", 250_000, 3)
	const buyers = 10
	errs := make([]error, buyers)
	var fns []func()
	for i := range buyers {
		fns = append(fns, func() {
			_, errs[i] = e.s.Create(t.Context(), request(fmt.Sprintf("buyer%d@example.com", i), item("LIMITED", 1)))
		})
	}
	testenv.AtOnce(fns...)

	short := 0
	for _, err := range errs {
		switch models.ErrorCode(err) {
		case "":
		case models.EInsufficientStock:
			short++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	written, reserves := e.count("orders", "true"), e.count("stock_movements", "kind = 'reserve'")
	if written != 3 || reserves != 3 || short != buyers-3 {
		t.Errorf("%d orders, %d reserve movements, %d buyers told insufficient_stock; want 3, 3, %d", written, reserves, short, buyers-3)
	}
	e.wantStock(map[string]int64{"LIMITED": 0})
}

// Orders of two products at once, half listing them one way round and
// half the other, take both or neither: with 3 of A and 5 of B, exactly 3
// of 10 orders of one each succeed, A ends at 0 and B at 2, and no order
// holds one product without the other.
func TestConcurrentMultiItemOrdersTakeAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("A", 1_000, 3)
	e.product("B", 1_000, 5)
	const buyers = 10
	errs := make([]error, buyers)
	var fns []func()
	for i := range buyers {
		items := []orders.ItemRequest{item("A", 1), item("B", 1)}
		if i%2 == 1 {
			items[0], items[1] = items[1], items[0]
		}
		fns = append(fns, func() {
			_, errs[i] = e.s.Create(t.Context(), request(fmt.Sprintf("buyer%d@example.com", i), items...))
		})
	}
	testenv.AtOnce(fns...)

	for _, err := range errs {
		if code := models.ErrorCode(err); code != "" && code != models.EInsufficientStock {
			t.Errorf("unexpected error: %v", err)
		}
	}
	if n := e.count("orders", "true"); n != 3 {
		t.Errorf("%d orders, want 3", n)
	}
	if n := e.count("orders", "(SELECT count(*) FROM stock_movements m WHERE m.order_id = orders.id AND m.kind = 'reserve') <> 2"); n != 0 {
		t.Errorf("%d orders do not hold exactly one reserve of each product", n)
	}
	e.wantStock(map[string]int64{"A": 0, "B": 2})
}

// Cancel and Expire of one pending order, at once: exactly one of them
// ends it (Cancel succeeds and Expire reports false, or Expire reports
// true and Cancel gets invalid_transition), the order has one
// transition, and its units are released exactly once. Eight orders race
// side by side.
func TestConcurrentCancelAndExpireReleaseOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 1_000, 100)
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.order(request("ayu@example.com", item("MUG", int64(i+1)))).ID
	}
	e.clock.Advance(ttl)
	cancelErrs := make([]error, n)
	expireErrs := make([]error, n)
	expired := make([]bool, n)
	var fns []func()
	for i, id := range ids {
		fns = append(fns,
			func() { _, cancelErrs[i] = e.s.Cancel(t.Context(), id, models.CauseCustomer) },
			func() { expired[i], expireErrs[i] = e.s.Expire(t.Context(), id) })
	}
	testenv.AtOnce(fns...)

	for i, id := range ids {
		if expireErrs[i] != nil {
			t.Errorf("%s: Expire: %v", id, expireErrs[i])
		}
		cancelled := cancelErrs[i] == nil
		if !cancelled {
			wantCode(t, cancelErrs[i], models.EInvalidTransition, id+": Cancel that lost")
		}
		if cancelled == expired[i] {
			t.Errorf("%s: cancelled %v and expired %v; want exactly one", id, cancelled, expired[i])
		}
		if r, tr := e.movements(id, models.MovementRelease), e.count("order_transitions", "order_id = ?", id); r != 1 || tr != 1 {
			t.Errorf("%s: %d release movements and %d transitions, want 1 and 1", id, r, tr)
		}
	}
	e.wantStock(map[string]int64{"MUG": 100})
}

// Ten cancels of one order at once all succeed, and its units come back
// once: one release movement, one transition.
func TestConcurrentCancelsReleaseOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 1_000, 10)
	o := e.order(request("ayu@example.com", item("MUG", 4)))
	errs := make([]error, 10)
	var fns []func()
	for i := range errs {
		fns = append(fns, func() { _, errs[i] = e.s.Cancel(t.Context(), o.ID, models.CauseCustomer) })
	}
	testenv.AtOnce(fns...)

	for _, err := range errs {
		if err != nil {
			t.Errorf("a cancel failed: %v", err)
		}
	}
	if r, tr := e.movements(o.ID, models.MovementRelease), e.count("order_transitions", "order_id = ?", o.ID); r != 1 || tr != 1 {
		t.Errorf("%d release movements and %d transitions, want 1 and 1", r, tr)
	}
	e.wantStock(map[string]int64{"MUG": 10})
}

// Reserve of a kind an order already has changes nothing and reports
// false; Release twice gives the units back once; a Reserve that runs
// short fails with insufficient_stock and leaves every product as it was,
// including those reserved before the short one.
func TestReserveAndReleaseMoveStockAtMostOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("A", 1_000, 10)
	e.product("B", 1_000, 10)
	o := e.order(request("ayu@example.com", item("A", 2), item("B", 3))) // A 8, B 7
	items := o.Items

	var done bool
	err := e.db.Transaction(func(tx *gorm.DB) (err error) {
		done, err = orders.Reserve(tx, o.ID, items, models.MovementReserve)
		return err
	})
	if err != nil || done {
		t.Errorf("a second reserve of the same order: done %v, %v; want false, nil", done, err)
	}
	e.wantStock(map[string]int64{"A": 8, "B": 7})

	for range 2 {
		if err := e.db.Transaction(func(tx *gorm.DB) error { return orders.Release(tx, o.ID, items) }); err != nil {
			t.Fatal(err)
		}
	}
	e.wantStock(map[string]int64{"A": 10, "B": 10})
	if n := e.movements(o.ID, models.MovementRelease); n != 2 {
		t.Errorf("%d release movements after two releases, want 2 (one per item)", n)
	}

	e.exec("UPDATE products SET stock = 2 WHERE sku = 'B'")
	err = e.db.Transaction(func(tx *gorm.DB) (err error) {
		done, err = orders.Reserve(tx, o.ID, items, models.MovementRereserve)
		return err
	})
	wantCode(t, err, models.EInsufficientStock, "a rereserve with B short")
	e.wantStock(map[string]int64{"A": 10, "B": 2})
	if n := e.movements(o.ID, models.MovementRereserve); n != 0 {
		t.Errorf("%d rereserve movements after a failed rereserve, want none", n)
	}

	e.exec("UPDATE products SET stock = 10 WHERE sku = 'B'")
	err = e.db.Transaction(func(tx *gorm.DB) (err error) {
		done, err = orders.Reserve(tx, o.ID, items, models.MovementRereserve)
		return err
	})
	if err != nil || !done {
		t.Errorf("a rereserve with stock: done %v, %v; want true", done, err)
	}
	e.wantStock(map[string]int64{"A": 8, "B": 7})
}

// Transition moves an order only out of the states it names: given a
// stale view (the order was cancelled since it was read), it fails and
// records no transition. EndTx refuses to end an order in a state that
// holds stock.
func TestTransitionRefusesAStaleView(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("MUG", 1_000, 10)
	o := e.order(request("ayu@example.com", item("MUG", 1)))
	stale := *o // pending, as read before the cancel
	if _, err := e.s.Cancel(t.Context(), o.ID, models.CauseCustomer); err != nil {
		t.Fatal(err)
	}

	err := e.db.Transaction(func(tx *gorm.DB) error {
		return orders.Transition(tx, &stale, models.OrderPaid, e.clock.Now(), orders.Cause{What: models.CauseCallback}, models.OrderPending)
	})
	if err == nil || !strings.Contains(err.Error(), "is not in [pending]") {
		t.Errorf("Transition of a cancelled order from pending: %v, want an error that says so", err)
	}
	if s := e.status(o.ID); s != models.OrderCancelled {
		t.Errorf("status %s, want cancelled", s)
	}
	if n := e.count("order_transitions", "order_id = ?", o.ID); n != 1 {
		t.Errorf("%d transitions, want only the cancel's", n)
	}

	pending := e.order(request("budi@example.com", item("MUG", 1)))
	err = e.db.Transaction(func(tx *gorm.DB) error {
		locked, err := orders.Lock(tx, pending.ID)
		if err != nil {
			return err
		}
		return orders.EndTx(tx, jobs.Tasks{}, locked, models.OrderPaid, e.clock.Now(), orders.Cause{What: models.CauseCallback})
	})
	if err == nil || e.status(pending.ID) != models.OrderPending {
		t.Errorf("EndTx to paid: %v, status %s; want an error and the order still pending", err, e.status(pending.ID))
	}
}

// A Move sent with COMMIT in one round trip (store.Tx.Commit) cannot
// commit without moving its order: its statement fails, so nothing of the
// round trip commits — not the statement queued after it either.
func TestMoveOfAStaleViewCommitsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.product("CUP", 1_000, 10)
	o := e.order(request("citra@example.com", item("CUP", 1)))
	stale := *o
	if _, err := e.s.Cancel(t.Context(), o.ID, models.CauseCustomer); err != nil {
		t.Fatal(err)
	}
	err := store.Pipelined(t.Context(), e.db, func(tx *store.Tx) error {
		b := &pgx.Batch{}
		move := orders.NewMove(&stale, models.OrderPaid, e.clock.Now(), orders.Cause{What: models.CauseCallback}, models.OrderPending)
		move.Statement.Queue(b).Exec(func(tag pgconn.CommandTag) error { return move.Done(tag.RowsAffected()) })
		b.Queue("UPDATE products SET stock = 0 WHERE sku = 'CUP'")
		return tx.Commit(b)
	})
	if err == nil {
		t.Fatal("the move of a cancelled order from pending committed")
	}
	if s := e.status(o.ID); s != models.OrderCancelled {
		t.Errorf("status %s, want cancelled", s)
	}
	if n := e.count("order_transitions", "order_id = ?", o.ID); n != 1 {
		t.Errorf("%d transitions, want only the cancel's", n)
	}
	if n := e.count("products", "sku = 'CUP' AND stock = 0"); n != 0 {
		t.Error("the statement after the failed move committed")
	}
}
