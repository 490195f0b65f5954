package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// counts is what a catalog change may write: products and their stock
// movements.
type counts struct{ products, movements int64 }

func countRows(t *testing.T, db *gorm.DB) counts {
	t.Helper()
	var c counts
	if err := db.Model(&models.Product{}).Count(&c.products).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Model(&models.StockMovement{}).Count(&c.movements).Error; err != nil {
		t.Fatal(err)
	}
	return c
}

// product reads sku's row as it is now.
func product(t *testing.T, db *gorm.DB, sku string) models.Product {
	t.Helper()
	var p models.Product
	if err := db.Take(&p, "sku = ?", sku).Error; err != nil {
		t.Fatalf("product %s: %v", sku, err)
	}
	return p
}

// movements reads sku's stock movements, oldest first.
func movements(t *testing.T, db *gorm.DB, sku string) []models.StockMovement {
	t.Helper()
	var ms []models.StockMovement
	if err := db.Where("sku = ?", sku).Order("id").Find(&ms).Error; err != nil {
		t.Fatal(err)
	}
	return ms
}

// stockDrift lists the products whose stock differs from the sum of their
// movements: the audit's "stock" check, in SQL.
func stockDrift(t *testing.T, db *gorm.DB) []string {
	t.Helper()
	var drift []string
	err := db.Raw(`
SELECT format('%s: stock %s, movements %s', p.sku, p.stock, coalesce(m.total, 0))
FROM products p
LEFT JOIN (SELECT sku, sum(CASE WHEN kind IN ('reserve', 'rereserve') THEN -qty ELSE qty END) AS total
           FROM stock_movements GROUP BY sku) m ON m.sku = p.sku
WHERE p.stock <> coalesce(m.total, 0)`).Scan(&drift).Error
	if err != nil {
		t.Fatal(err)
	}
	return drift
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := models.ErrorCode(err); got != code {
		t.Errorf("%s: error %v (code %q), want code %q", what, err, got, code)
	}
}

// Create refuses a product whose SKU, name, price, currency, stock or
// per-order cap is out of bounds with an invalid_request error, and
// writes neither the product nor a movement. At the bounds it accepts
// the product: the row holds what was asked (IDR when no currency is
// given), with one adjust movement of the initial stock, and none when
// the stock is zero.
func TestCreateValidatesEveryField(t *testing.T) {
	t.Parallel()
	ok := func(f func(p *models.Product)) models.Product {
		p := models.Product{SKU: "SKU-1", Name: "A product", Price: 1000, Currency: "IDR", Stock: 5}
		f(&p)
		return p
	}
	invalid := []struct {
		name string
		p    models.Product
	}{
		{"empty sku", ok(func(p *models.Product) { p.SKU = "" })},
		{"sku starting with a dash", ok(func(p *models.Product) { p.SKU = "-SKU" })},
		{"sku starting with a dot", ok(func(p *models.Product) { p.SKU = ".SKU" })},
		{"sku with a space", ok(func(p *models.Product) { p.SKU = "SKU 1" })},
		{"sku with a slash", ok(func(p *models.Product) { p.SKU = "SKU/1" })},
		{"sku with a trailing newline", ok(func(p *models.Product) { p.SKU = "SKU-1\n" })},
		{"sku with a non-ASCII letter", ok(func(p *models.Product) { p.SKU = "SKÜ-1" })},
		{"sku of 65 characters", ok(func(p *models.Product) { p.SKU = strings.Repeat("S", 65) })},
		{"empty name", ok(func(p *models.Product) { p.Name = "" })},
		{"name with NUL", ok(func(p *models.Product) { p.Name = "mug\x00" })},
		{"name of invalid UTF-8", ok(func(p *models.Product) { p.Name = "mug\xff" })},
		{"name of 201 bytes", ok(func(p *models.Product) { p.Name = strings.Repeat("n", 201) })},
		{"negative price", ok(func(p *models.Product) { p.Price = -1 })},
		{"price above MaxPrice", ok(func(p *models.Product) { p.Price = models.MaxPrice + 1 })},
		{"lower-case currency", ok(func(p *models.Product) { p.Currency = "idr" })},
		{"two-letter currency", ok(func(p *models.Product) { p.Currency = "ID" })},
		{"four-letter currency", ok(func(p *models.Product) { p.Currency = "IDRX" })},
		{"currency with a digit", ok(func(p *models.Product) { p.Currency = "1DR" })},
		{"negative stock", ok(func(p *models.Product) { p.Stock = -1 })},
		{"stock above MaxStock", ok(func(p *models.Product) { p.Stock = models.MaxStock + 1 })},
		{"max_per_order of 0", ok(func(p *models.Product) { p.MaxPerOrder = catalog.Units(0) })},
		{"negative max_per_order", ok(func(p *models.Product) { p.MaxPerOrder = catalog.Units(-1) })},
		{"max_per_order above MaxQty", ok(func(p *models.Product) { p.MaxPerOrder = catalog.Units(models.MaxQty + 1) })},
	}
	valid := []struct {
		name string
		p    models.Product
		want models.Product // what the row must hold
	}{
		{"the example", ok(func(p *models.Product) {}), models.Product{}},
		{"sku of 64 characters, the longest", ok(func(p *models.Product) { p.SKU = strings.Repeat("S", 64) }), models.Product{}},
		{"sku of one digit", ok(func(p *models.Product) { p.SKU = "7" }), models.Product{}},
		{"sku of letters, digits, '.', '_' and '-'", ok(func(p *models.Product) { p.SKU = "a.B_c-9" }), models.Product{}},
		{"name of 200 bytes", ok(func(p *models.Product) { p.SKU = "NAME-200"; p.Name = strings.Repeat("n", 200) }), models.Product{}},
		{"free", ok(func(p *models.Product) { p.SKU = "FREE"; p.Price = 0 }), models.Product{}},
		{"price of MaxPrice", ok(func(p *models.Product) { p.SKU = "DEAR"; p.Price = models.MaxPrice }), models.Product{}},
		{"no stock", ok(func(p *models.Product) { p.SKU = "EMPTY"; p.Stock = 0 }), models.Product{}},
		{"stock of MaxStock", ok(func(p *models.Product) { p.SKU = "FULL"; p.Stock = models.MaxStock }), models.Product{}},
		{"another currency", ok(func(p *models.Product) { p.SKU = "USD"; p.Currency = "USD" }), models.Product{}},
		{"max_per_order of 1", ok(func(p *models.Product) { p.SKU = "CAP-1"; p.MaxPerOrder = catalog.Units(1) }), models.Product{}},
		{"max_per_order of MaxQty", ok(func(p *models.Product) { p.SKU = "CAP-MAX"; p.MaxPerOrder = catalog.Units(models.MaxQty) }), models.Product{}},
		{"no currency is IDR", ok(func(p *models.Product) { p.SKU = "NO-CUR"; p.Currency = "" }),
			ok(func(p *models.Product) { p.SKU = "NO-CUR"; p.Currency = models.DefaultCurrency })},
	}
	// One database for the refusals, whose count must stay at zero, and
	// one for the accepted products, each of its own SKU.
	refusing, accepting := testenv.NewDB(t), testenv.NewDB(t)
	for _, c := range invalid {
		t.Run("refuses "+c.name, func(t *testing.T) {
			t.Parallel()
			db := refusing
			got, err := catalog.NewService(db).Create(context.Background(), c.p)
			wantCode(t, fmt.Sprintf("create %+v", c.p), err, models.EInvalid)
			if got != nil {
				t.Errorf("a refused product was returned: %+v", got)
			}
			if n := countRows(t, db); n != (counts{}) {
				t.Errorf("a refused product wrote %d product(s) and %d movement(s), want none", n.products, n.movements)
			}
		})
	}
	for _, c := range valid {
		t.Run("accepts "+c.name, func(t *testing.T) {
			t.Parallel()
			db := accepting
			want := c.want
			if want.SKU == "" {
				want = c.p
			}
			got, err := catalog.NewService(db).Create(context.Background(), c.p)
			if err != nil {
				t.Fatalf("create %+v: %v", c.p, err)
			}
			row := product(t, db, want.SKU)
			for _, p := range []models.Product{*got, row} {
				if p.SKU != want.SKU || p.Name != want.Name || p.Price != want.Price || p.Currency != want.Currency ||
					p.Stock != want.Stock || !equalCap(p.MaxPerOrder, want.MaxPerOrder) {
					t.Errorf("product %+v (cap %v), want %+v (cap %v)", p, deref(p.MaxPerOrder), want, deref(want.MaxPerOrder))
				}
			}
			ms := movements(t, db, want.SKU)
			switch {
			case want.Stock == 0 && len(ms) != 0:
				t.Errorf("a product without stock has movements %+v, want none", ms)
			case want.Stock > 0 && (len(ms) != 1 || ms[0].Kind != models.MovementAdjust || ms[0].Qty != want.Stock || ms[0].OrderID != nil):
				t.Errorf("movements %+v, want one adjust of %d without an order", ms, want.Stock)
			}
		})
	}
}

func equalCap(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// A second product with an existing SKU is an already_exists error from
// the service, and "not created" without an error from the package's
// Create; either way the first product keeps its name, price and stock,
// and there is still one product row with one movement.
func TestDuplicateSKUIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := catalog.NewService(db)
	ctx := context.Background()
	if _, err := s.Create(ctx, models.Product{SKU: "DUP", Name: "First", Price: 1000, Stock: 4}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Create(ctx, models.Product{SKU: "DUP", Name: "Second", Price: 2000, Stock: 9})
	wantCode(t, "second product DUP", err, models.EAlreadyExists)
	if got != nil {
		t.Errorf("the refused duplicate was returned: %+v", got)
	}
	again := models.Product{SKU: "DUP", Name: "Third", Price: 3000, Stock: 7}
	created, err := catalog.Create(db, &again)
	if err != nil || created {
		t.Errorf("catalog.Create of an existing SKU: created=%v err=%v, want false and no error", created, err)
	}
	if p := product(t, db, "DUP"); p.Name != "First" || p.Price != 1000 || p.Stock != 4 {
		t.Errorf("after the duplicates the product is %+v, want the first one (First, 1000, stock 4)", p)
	}
	if n := countRows(t, db); n != (counts{products: 1, movements: 1}) {
		t.Errorf("%d product(s) and %d movement(s), want 1 and 1", n.products, n.movements)
	}
}

// Twenty creates of one SKU at once: exactly one succeeds, every other
// one is an already_exists error, and the database holds one product with
// the winner's stock and one movement of it.
func TestConcurrentCreatesOfOneSKUMakeOneProduct(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := catalog.NewService(db)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Create(context.Background(), models.Product{SKU: "RACE", Name: fmt.Sprintf("racer %d", i), Price: 100, Stock: int64(i + 1)})
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i, err := range errs {
		switch models.ErrorCode(err) {
		case "":
			winners++
		case models.EAlreadyExists:
		default:
			t.Errorf("create %d: %v, want success or already_exists", i, err)
		}
	}
	if winners != 1 {
		t.Errorf("%d of %d concurrent creates of one SKU succeeded, want 1", winners, n)
	}
	if c := countRows(t, db); c != (counts{products: 1, movements: 1}) {
		t.Fatalf("%d product(s) and %d movement(s), want 1 and 1", c.products, c.movements)
	}
	p := product(t, db, "RACE")
	if ms := movements(t, db, "RACE"); ms[0].Qty != p.Stock || p.Name != fmt.Sprintf("racer %d", p.Stock-1) {
		t.Errorf("product %+v with movement %+v: the stock, the movement and the name are not one create's", p, ms[0])
	}
}

// Restock adds qty to the stock, returns the product as it is after, and
// writes exactly one adjust movement of qty without an order; a second
// restock does the same again. The stock still equals the sum of its
// movements.
func TestRestockAddsStockWithOneMovement(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	testenv.MustCreateProduct(t, db, "MUG", 7500, 5)
	got, err := catalog.Restock(db, "MUG", 7)
	if err != nil {
		t.Fatal(err)
	}
	if got.SKU != "MUG" || got.Stock != 12 || got.Price != 7500 {
		t.Errorf("restock returned %+v, want MUG with stock 12", got)
	}
	if _, err := catalog.Restock(db, "MUG", 1); err != nil {
		t.Fatal(err)
	}
	if p := product(t, db, "MUG"); p.Stock != 13 {
		t.Errorf("stock %d after 5 + 7 + 1, want 13", p.Stock)
	}
	ms := movements(t, db, "MUG")
	var qtys []int64
	for _, m := range ms {
		if m.Kind != models.MovementAdjust || m.OrderID != nil {
			t.Errorf("movement %+v, want an adjust without an order", m)
		}
		qtys = append(qtys, m.Qty)
	}
	if !slices.Equal(qtys, []int64{5, 7, 1}) {
		t.Errorf("movements of %v, want the initial 5 then one of 7 and one of 1", qtys)
	}
	if d := stockDrift(t, db); len(d) != 0 {
		t.Errorf("stock does not add up: %q", d)
	}
}

// Restock refuses a quantity below 1 or above MaxRestock and a stock that
// would pass MaxStock with an invalid_request error, and an unknown or
// malformed SKU with not_found; none of them changes the stock or writes
// a movement. Filling the stock up to exactly MaxStock is allowed.
func TestRestockRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	testenv.MustCreateProduct(t, db, "NEAR-FULL", 100, models.MaxStock-10)
	cases := []struct {
		sku  string
		qty  int64
		code string
	}{
		{"NEAR-FULL", 0, models.EInvalid},
		{"NEAR-FULL", -3, models.EInvalid},
		{"NEAR-FULL", models.MaxRestock + 1, models.EInvalid},
		{"NEAR-FULL", 11, models.EInvalid}, // MaxStock + 1
		{"NO-SUCH-SKU", 1, models.ENotFound},
		{"not a sku", 1, models.ENotFound},
		{"", 1, models.ENotFound},
	}
	for _, c := range cases {
		got, err := catalog.Restock(db, c.sku, c.qty)
		wantCode(t, fmt.Sprintf("restock %q by %d", c.sku, c.qty), err, c.code)
		if got != nil {
			t.Errorf("restock %q by %d returned %+v", c.sku, c.qty, got)
		}
	}
	if p := product(t, db, "NEAR-FULL"); p.Stock != models.MaxStock-10 {
		t.Errorf("refused restocks left stock %d, want %d", p.Stock, int64(models.MaxStock-10))
	}
	if c := countRows(t, db); c != (counts{products: 1, movements: 1}) {
		t.Errorf("refused restocks left %d movement(s), want only the initial one", c.movements)
	}
	if p, err := catalog.Restock(db, "NEAR-FULL", 10); err != nil || p.Stock != models.MaxStock {
		t.Errorf("restock up to exactly MaxStock: %+v, %v", p, err)
	}
	if d := stockDrift(t, db); len(d) != 0 {
		t.Errorf("stock does not add up: %q", d)
	}
}

// Restock writes in the caller's transaction: when that transaction
// rolls back, neither the stock nor the movement remains; when it
// commits, both do.
func TestRestockIsPartOfTheCallersTransaction(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	testenv.MustCreateProduct(t, db, "TX", 100, 2)
	errRollback := errors.New("the caller changes its mind")
	err := db.Transaction(func(tx *gorm.DB) error {
		if p, err := catalog.Restock(tx, "TX", 5); err != nil || p.Stock != 7 {
			t.Errorf("restock in a transaction: %+v, %v", p, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("transaction: %v", err)
	}
	if p, ms := product(t, db, "TX"), movements(t, db, "TX"); p.Stock != 2 || len(ms) != 1 {
		t.Errorf("after a rollback: stock %d and %d movement(s), want 2 and 1", p.Stock, len(ms))
	}
	if err := db.Transaction(func(tx *gorm.DB) error { _, err := catalog.Restock(tx, "TX", 5); return err }); err != nil {
		t.Fatal(err)
	}
	if p, ms := product(t, db, "TX"), movements(t, db, "TX"); p.Stock != 7 || len(ms) != 2 || ms[1].Qty != 5 {
		t.Errorf("after a commit: stock %d and movements %+v, want 7 and a second one of 5", p.Stock, ms)
	}
}

// Thirty restocks of one product at once, of 1 to 30 units: none fails,
// the stock is the initial stock plus their sum (no update is lost),
// there is one adjust movement per restock, each restock saw a different
// stock after it, and the stock equals the sum of the movements.
func TestConcurrentRestocksAllCount(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	const n, initial = 30, 100
	testenv.MustCreateProduct(t, db, "BUSY", 1000, initial)
	after := make([]int64, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			err := db.Transaction(func(tx *gorm.DB) error {
				p, err := catalog.Restock(tx, "BUSY", int64(i+1))
				if err == nil {
					after[i] = p.Stock
				}
				return err
			})
			if err != nil {
				t.Errorf("restock %d: %v", i+1, err)
			}
		})
	}
	close(start)
	wg.Wait()
	const sum = n * (n + 1) / 2
	if p := product(t, db, "BUSY"); p.Stock != initial+sum {
		t.Errorf("stock %d after %d concurrent restocks adding %d to %d, want %d", p.Stock, n, sum, initial, initial+sum)
	}
	var restocks, added int64
	db.Raw("SELECT count(*), coalesce(sum(qty), 0) FROM stock_movements WHERE sku = 'BUSY' AND kind = 'adjust' AND qty <> ?", initial).Row().Scan(&restocks, &added)
	var all int64
	db.Model(&models.StockMovement{}).Where("sku = ?", "BUSY").Count(&all)
	if restocks != n || added != sum || all != n+1 {
		t.Errorf("%d restock movements adding %d (%d movements in all), want %d adding %d (%d in all)", restocks, added, all, n, sum, n+1)
	}
	slices.Sort(after)
	if len(slices.Compact(after)) != n || after[0] <= initial {
		t.Errorf("the restocks saw the stocks %v after them, want %d different ones above %d", after, n, initial)
	}
	if d := stockDrift(t, db); len(d) != 0 {
		t.Errorf("stock does not add up: %q", d)
	}
}

// SetMaxPerOrder sets a product's per-order cap and returns the product
// with it; nil removes the cap. It is not a stock change: the stock and
// the movements stay as they were. A cap below 1 or above MaxQty is an
// invalid_request error and an unknown SKU not_found, both leaving the
// cap as it was.
func TestSetMaxPerOrder(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := catalog.NewService(db)
	ctx := context.Background()
	testenv.MustCreateProduct(t, db, "CAPPED", 1000, 8)
	got, err := s.SetMaxPerOrder(ctx, "CAPPED", catalog.Units(3))
	if err != nil {
		t.Fatal(err)
	}
	if got.SKU != "CAPPED" || got.Stock != 8 || !equalCap(got.MaxPerOrder, catalog.Units(3)) {
		t.Errorf("set the cap to 3: returned %+v (cap %v), want CAPPED with stock 8 and cap 3", got, deref(got.MaxPerOrder))
	}
	if p := product(t, db, "CAPPED"); !equalCap(p.MaxPerOrder, catalog.Units(3)) {
		t.Errorf("the row's cap is %v, want 3", deref(p.MaxPerOrder))
	}
	for _, bad := range []*int64{catalog.Units(0), catalog.Units(-1), catalog.Units(models.MaxQty + 1)} {
		_, err := s.SetMaxPerOrder(ctx, "CAPPED", bad)
		wantCode(t, fmt.Sprintf("cap of %d", *bad), err, models.EInvalid)
	}
	_, err = s.SetMaxPerOrder(ctx, "NO-SUCH-SKU", catalog.Units(2))
	wantCode(t, "cap of an unknown SKU", err, models.ENotFound)
	if p := product(t, db, "CAPPED"); !equalCap(p.MaxPerOrder, catalog.Units(3)) {
		t.Errorf("after refused caps the row's cap is %v, want still 3", deref(p.MaxPerOrder))
	}
	if got, err := s.SetMaxPerOrder(ctx, "CAPPED", nil); err != nil || got.MaxPerOrder != nil {
		t.Errorf("removing the cap: %+v, %v", got, err)
	}
	if p := product(t, db, "CAPPED"); p.MaxPerOrder != nil || p.Stock != 8 {
		t.Errorf("after removing the cap: %+v (cap %v), want no cap and stock 8", p, deref(p.MaxPerOrder))
	}
	if ms := movements(t, db, "CAPPED"); len(ms) != 1 {
		t.Errorf("setting caps wrote movements: %+v, want only the initial one", ms)
	}
}

// Seed creates the demo products, each with its stock, cap and one
// adjust movement, and returns their SKUs; run again it creates nothing
// and returns none, and a demo product restocked in between keeps its
// stock.
func TestSeedIsIdempotent(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	var demo []string
	for _, p := range catalog.Demo {
		demo = append(demo, p.SKU)
	}
	created, err := catalog.Seed(ctx, db)
	if err != nil || !slices.Equal(created, demo) {
		t.Fatalf("first seed: created %v, %v; want %v", created, err, demo)
	}
	if _, err := catalog.Restock(db, "DEMO-MUG", 5); err != nil {
		t.Fatal(err)
	}
	created, err = catalog.Seed(ctx, db)
	if err != nil || len(created) != 0 {
		t.Errorf("second seed: created %v, %v; want nothing", created, err)
	}
	if c := countRows(t, db); c != (counts{products: int64(len(demo)), movements: int64(len(demo)) + 1}) {
		t.Errorf("%d products and %d movements, want %d and %d", c.products, c.movements, len(demo), len(demo)+1)
	}
	for _, d := range catalog.Demo {
		p := product(t, db, d.SKU)
		want := d.Stock
		if d.SKU == "DEMO-MUG" {
			want += 5
		}
		if p.Name != d.Name || p.Price != d.Price || p.Currency != d.Currency || p.Stock != want || !equalCap(p.MaxPerOrder, d.MaxPerOrder) {
			t.Errorf("%s is %+v (cap %v), want %+v with stock %d", d.SKU, p, deref(p.MaxPerOrder), d, want)
		}
	}
	if d := stockDrift(t, db); len(d) != 0 {
		t.Errorf("stock does not add up: %q", d)
	}
}

// Seed leaves a product that exists under a demo SKU as it is and creates
// only the others.
func TestSeedKeepsAnExistingDemoSKU(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	testenv.MustCreateProduct(t, db, "DEMO-MUG", 1, 2)
	created, err := catalog.Seed(context.Background(), db)
	if err != nil || !slices.Equal(created, []string{"DEMO-TSHIRT", "DEMO-LIMITED"}) {
		t.Errorf("seed: created %v, %v; want DEMO-TSHIRT and DEMO-LIMITED", created, err)
	}
	if p := product(t, db, "DEMO-MUG"); p.Price != 1 || p.Stock != 2 || p.Name != "DEMO-MUG" {
		t.Errorf("the existing DEMO-MUG became %+v", p)
	}
	if ms := movements(t, db, "DEMO-MUG"); len(ms) != 1 {
		t.Errorf("DEMO-MUG has movements %+v, want its own one", ms)
	}
}

// Ten seeds at once: none fails, together they create each demo product
// exactly once, and the database holds each with one movement.
func TestConcurrentSeedsCreateEachDemoOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	const n = 10
	created := make([][]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			var err error
			if created[i], err = catalog.Seed(context.Background(), db); err != nil {
				t.Errorf("seed %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	var all []string
	for _, c := range created {
		all = append(all, c...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []string{"DEMO-LIMITED", "DEMO-MUG", "DEMO-TSHIRT"}) {
		t.Errorf("the seeds created %v between them, want each demo product once", all)
	}
	if c := countRows(t, db); c != (counts{products: 3, movements: 3}) {
		t.Errorf("%d products and %d movements, want 3 and 3", c.products, c.movements)
	}
	if d := stockDrift(t, db); len(d) != 0 {
		t.Errorf("stock does not add up: %q", d)
	}
}

// List returns every product ordered by SKU whatever order they were
// created in, with their fields; an empty catalogue is an empty list.
func TestListIsOrderedBySKU(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := catalog.NewService(db)
	ctx := context.Background()
	if ps, err := s.List(ctx); err != nil || len(ps) != 0 {
		t.Errorf("empty catalogue: %+v, %v", ps, err)
	}
	for i, sku := range []string{"C-3", "A-1", "B-2"} {
		testenv.MustCreateProduct(t, db, sku, int64(100*(i+1)), int64(i+1))
	}
	ps, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s %d %d", p.SKU, p.Price, p.Stock))
	}
	if want := []string{"A-1 200 2", "B-2 300 3", "C-3 100 1"}; !slices.Equal(got, want) {
		t.Errorf("list %q, want %q", got, want)
	}
}

// Get returns the product of a SKU; an unknown SKU and a string that
// cannot be a SKU are not_found.
func TestGet(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := catalog.NewService(db)
	ctx := context.Background()
	testenv.MustCreateProduct(t, db, "GET-ME", 4200, 3)
	p, err := s.Get(ctx, "GET-ME")
	if err != nil || p.SKU != "GET-ME" || p.Price != 4200 || p.Stock != 3 || p.Currency != "IDR" {
		t.Errorf("get GET-ME: %+v, %v", p, err)
	}
	for _, sku := range []string{"get-me", "NOPE", "not a sku", "", strings.Repeat("x", 65)} {
		p, err := s.Get(ctx, sku)
		wantCode(t, fmt.Sprintf("get %q", sku), err, models.ENotFound)
		if p != nil {
			t.Errorf("get %q returned %+v", sku, p)
		}
	}
}

// Ledger pages a product's movements newest first: a page of two, then
// the rest below its cursor, and 0 as the cursor of the last page. It
// shows only that product's movements, and a malformed SKU is not_found.
func TestLedgerPagesNewestFirst(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := catalog.NewService(db)
	ctx := context.Background()
	testenv.MustCreateProduct(t, db, "LEDGER", 100, 1)
	testenv.MustCreateProduct(t, db, "OTHER", 100, 50)
	for _, q := range []int64{2, 3, 4} {
		if _, err := catalog.Restock(db, "LEDGER", q); err != nil {
			t.Fatal(err)
		}
	}
	qtys := func(ms []models.StockMovement) []int64 {
		var out []int64
		for _, m := range ms {
			if m.SKU != "LEDGER" {
				t.Errorf("LEDGER's ledger shows %+v", m)
			}
			out = append(out, m.Qty)
		}
		return out
	}
	first, next, err := s.Ledger(ctx, "LEDGER", 0, 2)
	if err != nil || !slices.Equal(qtys(first), []int64{4, 3}) || next == 0 {
		t.Fatalf("first page: %v, next %d, %v; want [4 3] and a cursor", qtys(first), next, err)
	}
	rest, next, err := s.Ledger(ctx, "LEDGER", next, 2)
	if err != nil || !slices.Equal(qtys(rest), []int64{2, 1}) || next != 0 {
		t.Errorf("second page: %v, next %d, %v; want [2 1] and no cursor", qtys(rest), next, err)
	}
	_, _, err = s.Ledger(ctx, "not a sku", 0, 2)
	wantCode(t, "ledger of a malformed SKU", err, models.ENotFound)
}

// RestockOnce under one Idempotency-Key adds the units once: the second
// call with the same request gets the first answer again (replayed) and
// adds nothing; a refusal (an unknown SKU) is answered and stored too,
// with nothing written.
func TestRestockOnceAddsOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	s := catalog.NewService(db)
	keys := idempotency.New(db, time.Now, time.Minute)
	testenv.MustCreateProduct(t, db, "ONCE", 100, 2)
	answer := func(p *models.Product, err error) (idempotency.Response, error) {
		if err != nil {
			return idempotency.Response{Code: 404, Body: []byte(models.ErrorCode(err))}, nil
		}
		return idempotency.Response{Code: 200, Body: []byte(strconv.FormatInt(p.Stock, 10))}, nil
	}
	once := keys.Once("products.restock", "restock-key-0000000001", "ONCE+5")
	for i := range 2 {
		resp, err := s.RestockOnce(context.Background(), once, "ONCE", 5, answer)
		if err != nil || resp.Code != 200 || string(resp.Body) != "7" || resp.Replayed != (i == 1) {
			t.Errorf("restock %d: %v %s replayed=%v, %v; want 200 7, replayed the second time", i+1, resp.Code, resp.Body, resp.Replayed, err)
		}
	}
	if p, ms := product(t, db, "ONCE"), movements(t, db, "ONCE"); p.Stock != 7 || len(ms) != 2 {
		t.Errorf("stock %d with %d movements, want 7 with 2 (creation and one restock)", p.Stock, len(ms))
	}
	missing := keys.Once("products.restock", "restock-key-0000000002", "NOPE+5")
	resp, err := s.RestockOnce(context.Background(), missing, "NOPE", 5, answer)
	if err != nil || resp.Code != 404 || string(resp.Body) != models.ENotFound {
		t.Errorf("unknown SKU: %d %s, %v; want the stored not_found answer", resp.Code, resp.Body, err)
	}
}
