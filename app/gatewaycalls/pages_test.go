package gatewaycalls_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gorm.io/gorm"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// fakeGateway opens pages as a gateway that honours its idempotency key
// would: one page per key, whatever how often it is asked. answer, when
// set, decides a call's outcome instead.
type fakeGateway struct {
	mu     sync.Mutex
	calls  atomic.Int64
	keys   []string
	pages  map[string]gatewaycalls.Page
	answer func(call int64) error
	gate   chan struct{} // when set, a call waits for it to close
}

func (g *fakeGateway) Provider() string { return "fake" }

// seenKeys are the keys the gateway was asked with, in order.
func (g *fakeGateway) seenKeys() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.keys)
}

func (g *fakeGateway) PageOrigins() []string { return []string{"https://gateway.example"} }

func (g *fakeGateway) OpenPage(ctx context.Context, r gatewaycalls.PageRequest) (gatewaycalls.Page, error) {
	n := g.calls.Add(1)
	if g.gate != nil {
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys = append(g.keys, r.Key)
	if g.pages == nil {
		g.pages = map[string]gatewaycalls.Page{}
	}
	p, ok := g.pages[r.Key]
	if !ok {
		p = gatewaycalls.Page{ObjectID: "obj-" + r.Key, RedirectURL: "https://gateway.example/pay/" + r.Key}
		g.pages[r.Key] = p
	}
	if g.answer != nil {
		if err := g.answer(n); err != nil {
			return gatewaycalls.Page{}, err // the gateway may have made the page all the same
		}
	}
	return p, nil
}

type env struct {
	t       *testing.T
	db      *gorm.DB
	gw      *fakeGateway
	pages   *gatewaycalls.Pages
	metrics *metrics.Set
	order   *models.Order
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := testenv.NewDB(t)
	testenv.MustCreateProduct(t, db, "PAGE", 50000, 10)
	o, err := orders.NewService(db, testenv.Logger(t), time.Now, time.Hour, jobs.Tasks{}).Create(context.Background(),
		orders.CreateRequest{CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: "PAGE", Qty: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	gw := &fakeGateway{}
	m := metrics.New()
	p := gatewaycalls.NewPages(db, gw, testenv.Logger(t), time.Now, m)
	p.PollEvery = time.Millisecond
	return &env{t: t, db: db, gw: gw, pages: p, metrics: m, order: o}
}

func (e *env) open() (gatewaycalls.Page, error) {
	return e.pages.Open(context.Background(), e.order, nil, "https://shop.example/orders/"+e.order.ID)
}

func (e *env) row() models.GatewayRequest {
	e.t.Helper()
	var rows []models.GatewayRequest
	if err := e.db.Find(&rows, "order_id = ?", e.order.ID).Error; err != nil {
		e.t.Fatal(err)
	}
	if len(rows) != 1 {
		e.t.Fatalf("%d gateway requests for the order, want 1", len(rows))
	}
	return rows[0]
}

// Opening the page twice asks the gateway once: the second press finds
// the row done and answers with its page.
func TestOpenAsksOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first, err := e.open()
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.open()
	if err != nil || second != first {
		t.Fatalf("second press: %+v, %v; want %+v", second, err, first)
	}
	r := e.row()
	if e.gw.calls.Load() != 1 || r.Phase != models.GatewayDone || r.Attempts != 1 || r.IdempotencyKey != e.order.ID ||
		r.ProviderObjectID != first.ObjectID || r.RedirectURL != first.RedirectURL || r.Amount != 100000 || r.DoneAt == nil {
		t.Errorf("calls %d, row %+v; want one call and a done row with the page", e.gw.calls.Load(), r)
	}
}

// Ten presses at once: one of them calls the gateway, the others wait
// for it, and all ten end on the same page.
func TestConcurrentPressesOpenOnePage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gw.gate = make(chan struct{})
	const n = 10
	start := make(chan struct{})
	got := make([]gatewaycalls.Page, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = e.open()
		})
	}
	close(start)
	// Let the call end only once it has begun: the others have had to
	// find the row claimed.
	testenv.Eventually(t, "the gateway is called", func() bool { return e.gw.calls.Load() == 1 })
	close(e.gw.gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] || got[0].ObjectID == "" {
			t.Errorf("press %d: %+v, %v; want the one page %+v", i, got[i], errs[i], got[0])
		}
	}
	if calls := e.gw.calls.Load(); calls != 1 {
		t.Errorf("the gateway was called %d times, want once", calls)
	}
	if r := e.row(); r.Phase != models.GatewayDone || r.Attempts != 1 {
		t.Errorf("row %+v, want done after one attempt", r)
	}
}

// A call whose answer is lost (a timeout) is not a failure: the press
// says try again, the row stays sent and keeps its lease (the gateway may
// still be at work), and the next press, once the lease has passed,
// repeats the call with the same key — and gets the page the gateway made
// the first time.
func TestLostAnswerIsAskedAgainWithTheSameKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pages.CallTimeout = 20 * time.Millisecond // a lease of 40 ms
	e.gw.answer = func(call int64) error {
		if call == 1 {
			return context.DeadlineExceeded
		}
		return nil
	}
	if _, err := e.open(); models.ErrorCode(err) != models.EUnavailable {
		t.Fatalf("first press: %v, want unavailable", err)
	}
	if r := e.row(); r.Phase != models.GatewaySent || r.Attempts != 1 || r.LastError == "" || r.LockedUntil == nil {
		t.Fatalf("after the lost answer: %+v; want sent, one attempt, the error kept, the lease kept", r)
	}
	page, err := e.open()
	if err != nil {
		t.Fatal(err)
	}
	keys := e.gw.seenKeys()
	if len(keys) != 2 || keys[0] != keys[1] || page.ObjectID != "obj-"+keys[0] {
		t.Errorf("keys %q, page %+v; want the same key twice and the first call's page", keys, page)
	}
	if r := e.row(); r.Phase != models.GatewayDone || r.Attempts != 2 || r.LastError != "" {
		t.Errorf("row %+v, want done after two attempts", r)
	}
	e.assertCalls(map[string]float64{"unanswered": 1, "done": 1, "refused": 0})
}

// assertCalls checks sekali_gateway_calls_total of the pages, by answer.
func (e *env) assertCalls(want map[string]float64) {
	e.t.Helper()
	for answer, n := range want {
		if got := testutil.ToFloat64(e.metrics.GatewayCalls.WithLabelValues("fake", string(models.GatewayCreatePayment), answer)); got != n {
			e.t.Errorf("sekali_gateway_calls_total{kind=create_payment,result=%s} = %v, want %v", answer, got, n)
		}
	}
}

// A press that died while calling (its lease passed) is taken over by
// the next; one whose lease has not passed is waited for.
func TestAPressThatDiedIsTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	past := time.Now().Add(-time.Minute)
	if err := e.db.Create(&models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: e.order.ID, Provider: "fake",
		IdempotencyKey: e.order.ID, Amount: e.order.TotalAmount, Currency: e.order.Currency, Phase: models.GatewaySent,
		Attempts: 1, LockedUntil: &past}).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := e.open(); err != nil {
		t.Fatal(err)
	}
	if r := e.row(); e.gw.calls.Load() != 1 || r.Phase != models.GatewayDone || r.Attempts != 2 {
		t.Errorf("calls %d, row %+v; want the call repeated once and the row done", e.gw.calls.Load(), r)
	}
}

// A gateway's "no" fails the row for good: the press and every later one
// are a conflict, and the gateway is not asked again.
func TestRefusalFailsTheRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gw.answer = func(int64) error {
		return &gatewaycalls.Refused{Status: 400, Message: "order_id has already been taken"}
	}
	for i := range 2 {
		if _, err := e.open(); models.ErrorCode(err) != models.EConflict {
			t.Errorf("press %d: %v, want conflict", i+1, err)
		}
	}
	if r := e.row(); e.gw.calls.Load() != 1 || r.Phase != models.GatewayFailed || r.LastError == "" {
		t.Errorf("calls %d, row %+v; want one call and a failed row", e.gw.calls.Load(), r)
	}
	e.assertCalls(map[string]float64{"refused": 1, "done": 0, "unanswered": 0})
}

// An order that is not pending has nothing to pay: no row, no call.
func TestOnlyAPendingOrderOpensAPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.order.Status = models.OrderPaid
	_, err := e.open()
	var n int64
	e.db.Model(&models.GatewayRequest{}).Count(&n)
	if models.ErrorCode(err) != models.EInvalidTransition || n != 0 || e.gw.calls.Load() != 0 {
		t.Errorf("paid order: %v, %d rows, %d calls; want invalid_transition and nothing", err, n, e.gw.calls.Load())
	}
}

// List reads the requests newest first, all or those not over ("open":
// planned or sent), a page at a time.
func TestListFiltersByPhase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	phases := []models.GatewayPhase{models.GatewayDone, models.GatewaySent, models.GatewayFailed, models.GatewayPlanned}
	for i, ph := range phases {
		r := models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: e.order.ID, Provider: fmt.Sprintf("gw%d", i),
			IdempotencyKey: e.order.ID, Amount: 1, Currency: "IDR", Phase: ph}
		if ph == models.GatewayDone {
			now := time.Now()
			r.ProviderObjectID, r.DoneAt = "obj", &now
		}
		if err := e.db.Create(&r).Error; err != nil {
			t.Fatal(err)
		}
	}
	providers := func(f gatewaycalls.Filter) ([]string, int64) {
		rows, next, err := gatewaycalls.NewLedger(e.db, time.Now, e.metrics).List(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		var ps []string
		for _, r := range rows {
			ps = append(ps, r.Provider)
		}
		return ps, next
	}
	if got, _ := providers(gatewaycalls.Filter{}); !slices.Equal(got, []string{"gw3", "gw2", "gw1", "gw0"}) {
		t.Errorf("all: %q", got)
	}
	if got, _ := providers(gatewaycalls.Filter{Phase: gatewaycalls.PhaseOpen}); !slices.Equal(got, []string{"gw3", "gw1"}) {
		t.Errorf("open: %q, want the planned and the sent one", got)
	}
	if got, _ := providers(gatewaycalls.Filter{Phase: "failed"}); !slices.Equal(got, []string{"gw2"}) {
		t.Errorf("failed: %q", got)
	}
	first, next := providers(gatewaycalls.Filter{Limit: 3})
	rest, last := providers(gatewaycalls.Filter{Limit: 3, Before: next})
	if len(first) != 3 || next == 0 || !slices.Equal(rest, []string{"gw0"}) || last != 0 {
		t.Errorf("pages: %q then %q (cursors %d, %d)", first, rest, next, last)
	}
}

// A spent key (a gateway's order id that cannot be used again after a
// lost answer) is replaced
// in the same press: the row gets {order}~{attempt}, the gateway is
// asked again under it, and the page it makes is the order's.
func TestSpentKeyIsReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gw.answer = func(call int64) error {
		if call == 1 {
			return &gatewaycalls.KeySpent{Message: "order_id has already been taken"}
		}
		return nil
	}
	page, err := e.open()
	if err != nil {
		t.Fatal(err)
	}
	keys := e.gw.seenKeys()
	want := e.order.ID + "~1"
	if !slices.Equal(keys, []string{e.order.ID, want}) || page.ObjectID != "obj-"+want {
		t.Errorf("keys %q, page %+v; want the order id, then %s and its page", keys, page, want)
	}
	if r := e.row(); r.Phase != models.GatewayDone || r.IdempotencyKey != want || r.Attempts != 1 {
		t.Errorf("row %+v, want done under %s", r, want)
	}
	if got := gatewaycalls.OrderOfKey(want); got != e.order.ID {
		t.Errorf("OrderOfKey(%q) = %q, want %q", want, got, e.order.ID)
	}
}
