package invoices_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/invoices"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

const price = 75000

// issuedAt fixes the invoice year, so numbers are known in advance.
var issuedAt = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

type fixture struct {
	t      *testing.T
	db     *gorm.DB
	orders *orders.Service
	pay    *payments.Service
	sku    string
}

// newFixture has one product with stock for n orders.
func newFixture(t *testing.T, n int64) *fixture {
	t.Helper()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	t.Cleanup(pay.Close)
	testenv.MustCreateProduct(t, db, "INV-TEST", price, n)
	return &fixture{t: t, db: db, orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), pay: pay, sku: "INV-TEST"}
}

func (f *fixture) pendingOrder() string {
	f.t.Helper()
	o, err := f.orders.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: f.sku, Qty: 1}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return o.ID
}

// paidOrder creates an order and pays it with a signed sandbox callback.
func (f *fixture) paidOrder() string {
	f.t.Helper()
	id := f.pendingOrder()
	body := testenv.SandboxBody(id, "tx-"+id, models.EventPaid, price)
	out := f.pay.Receive(context.Background(), payments.Delivery{
		Provider:    sandbox.Name,
		Header:      testenv.SandboxHeaders("evt_"+id, body, time.Now()),
		Body:        bytes.NewReader(body),
		ContentType: "application/json",
	})
	if out.Status() != 200 || out.Result != models.ResultProcessed {
		f.t.Fatalf("paying %s: %+v", id, out)
	}
	return id
}

// issue runs IssueTx in a transaction of its own.
func (f *fixture) issue(orderID string, at time.Time) (*models.Invoice, bool) {
	f.t.Helper()
	var inv *models.Invoice
	var created bool
	err := store.Transaction(context.Background(), f.db, func(tx *gorm.DB) error {
		var err error
		inv, created, err = invoices.IssueTx(tx, orderID, at)
		return err
	})
	if err != nil {
		f.t.Fatalf("issue %s: %v", orderID, err)
	}
	return inv, created
}

// counter is the year's last number taken (0: none yet).
func (f *fixture) counter(year int) int64 {
	f.t.Helper()
	var last int64
	if err := f.db.Raw("SELECT coalesce(max(last), 0) FROM invoice_counters WHERE year = ?", year).Scan(&last).Error; err != nil {
		f.t.Fatal(err)
	}
	return last
}

func (f *fixture) invoiceCount() int64 {
	f.t.Helper()
	var n int64
	f.db.Model(&models.Invoice{}).Count(&n)
	return n
}

// 100 invoices issued at once take the numbers 1..100, each once.
func TestConcurrentInvoicesAreGapless(t *testing.T) {
	t.Parallel()
	const n = 100
	f := newFixture(t, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.paidOrder()
	}

	start := make(chan struct{})
	got := make([]*models.Invoice, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			<-start
			errs[i] = store.Transaction(context.Background(), f.db, func(tx *gorm.DB) error {
				inv, created, err := invoices.IssueTx(tx, id, issuedAt)
				if err == nil && !created {
					err = errors.New("not created")
				}
				got[i] = inv
				return err
			})
		})
	}
	close(start)
	wg.Wait()

	want := make([]string, n)
	for i := range want {
		want[i] = invoices.Number(2026, int64(i+1))
	}
	var numbers []string
	for i, err := range errs {
		if err != nil {
			t.Fatalf("order %d: %v", i, err)
		}
		if got[i].OrderID != ids[i] {
			t.Errorf("order %s got the invoice of %s", ids[i], got[i].OrderID)
		}
		numbers = append(numbers, got[i].Number)
	}
	slices.Sort(numbers)
	if !slices.Equal(numbers, want) {
		t.Errorf("returned numbers %v, want %s..%s once each", numbers, want[0], want[n-1])
	}
	var stored []models.Invoice
	f.db.Order("number").Find(&stored)
	if len(stored) != n {
		t.Fatalf("%d invoices stored, want %d", len(stored), n)
	}
	for i, inv := range stored {
		if inv.Number != want[i] || inv.Year != 2026 || inv.Sequence != int64(i+1) || inv.Amount != price || inv.Currency != "IDR" {
			t.Errorf("invoice %d: %+v, want number %s", i, inv, want[i])
		}
	}
	if last := f.counter(2026); last != n {
		t.Errorf("counter at %d, want %d", last, n)
	}
}

// Issuing again returns the order's invoice and takes no number.
func TestIssueAgainTakesNoNumber(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	a, b := f.paidOrder(), f.paidOrder()

	first, created := f.issue(a, issuedAt)
	if !created || first.Number != "INV-2026-000001" {
		t.Fatalf("first issue: %s created=%v", first.Number, created)
	}
	again, created := f.issue(a, issuedAt.Add(time.Hour))
	if created || again.ID != first.ID || again.Number != first.Number || !again.IssuedAt.Equal(first.IssuedAt) {
		t.Errorf("second issue: %+v created=%v, want the first invoice %+v", again, created, first)
	}
	if last := f.counter(2026); last != 1 {
		t.Errorf("counter at %d after issuing again, want 1", last)
	}
	if next, _ := f.issue(b, issuedAt); next.Number != "INV-2026-000002" {
		t.Errorf("next order got %s, want INV-2026-000002", next.Number)
	}
	if n := f.invoiceCount(); n != 2 {
		t.Errorf("%d invoices, want 2", n)
	}
}

// An order that is not paid, or does not exist, gets no invoice and takes
// no number.
func TestUnpaidOrderGetsNoInvoice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	pending := f.pendingOrder()
	cancelled := f.pendingOrder()
	if _, err := f.orders.Cancel(context.Background(), cancelled, models.CauseCustomer); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{pending, cancelled} {
		if inv, created := f.issue(id, issuedAt); inv != nil || created {
			t.Errorf("order %s: invoice %+v created=%v, want none", id, inv, created)
		}
	}
	err := store.Transaction(context.Background(), f.db, func(tx *gorm.DB) error {
		_, _, err := invoices.IssueTx(tx, "ORD-01JNOSUCHORDER0000000000", issuedAt)
		return err
	})
	if models.ErrorCode(err) != models.ENotFound {
		t.Errorf("missing order: %v, want a not_found error", err)
	}
	if n, last := f.invoiceCount(), f.counter(2026); n != 0 || last != 0 {
		t.Errorf("%d invoices, counter at %d; want none taken", n, last)
	}
	if inv, _ := f.issue(f.paidOrder(), issuedAt); inv.Number != "INV-2026-000001" {
		t.Errorf("first paid order got %s, want INV-2026-000001", inv.Number)
	}
	// Paid, then refunded before the invoice job ran: the sale happened,
	// so it is invoiced (and the audit finds the job's effect).
	refunded := f.paidOrder()
	f.db.Model(&models.Order{}).Where("id = ?", refunded).Update("status", models.OrderRefunded)
	if inv, created := f.issue(refunded, issuedAt); inv == nil || !created || inv.Number != "INV-2026-000002" {
		t.Errorf("refunded order: invoice %+v created=%v, want INV-2026-000002", inv, created)
	}
}

// A transaction that rolls back after issuing gives its number back.
func TestRollbackGivesNumberBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	a, b := f.paidOrder(), f.paidOrder()
	f.issue(a, issuedAt)

	errLater := errors.New("a later step failed")
	var inside *models.Invoice
	err := store.Transaction(context.Background(), f.db, func(tx *gorm.DB) error {
		inv, _, err := invoices.IssueTx(tx, b, issuedAt)
		if err != nil {
			return err
		}
		inside = inv
		return errLater
	})
	if !errors.Is(err, errLater) || inside == nil || inside.Number != "INV-2026-000002" {
		t.Fatalf("rolled-back issue: %v, invoice %+v", err, inside)
	}
	if inv, err := invoices.Get(f.db, b); inv != nil || err != nil {
		t.Errorf("invoice of %s after rollback: %+v, %v", b, inv, err)
	}
	if last := f.counter(2026); last != 1 {
		t.Errorf("counter at %d after rollback, want 1", last)
	}
	if inv, _ := f.issue(b, issuedAt); inv.Number != "INV-2026-000002" {
		t.Errorf("issue after rollback got %s, want INV-2026-000002 again", inv.Number)
	}
}

// Each year's numbers start at 1.
func TestNumbersRestartEachYear(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	a, b := f.paidOrder(), f.paidOrder()
	f.issue(a, issuedAt)
	next := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if inv, _ := f.issue(b, next); inv.Number != "INV-2027-000001" || inv.Year != 2027 || inv.Sequence != 1 {
		t.Errorf("first invoice of 2027: %+v", inv)
	}
	if got := fmt.Sprint(f.counter(2026), f.counter(2027)); got != "1 1" {
		t.Errorf("counters 2026, 2027 = %s, want 1 1", got)
	}
}
