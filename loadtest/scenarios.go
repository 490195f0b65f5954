package loadtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Config is one replay's target and size. The sizes apply to every
// scenario; the defaults keep each one to seconds.
type Config struct {
	Target       string        // base URL of the server
	MetricsURL   string        // the server's /metrics, for the delivery rows it dropped; "" is Target's
	Provider     string        // the gateway whose format the callbacks are in; "" is sandbox
	Secret       string        // the secret the server checks that gateway's callbacks with
	Token        string        // the server's ADMIN_API_TOKEN
	Events       int           // events (orders) per scenario
	Copies       int           // deliveries of each event
	Concurrency  int           // requests in flight at once
	Duration     time.Duration // length of the steady scenario
	Rate         int           // requests per second of the steady scenario
	DrainTimeout time.Duration // how long the audit may wait for the jobs
	SkipAudit    bool          // leave out the audit that ends each scenario (a caller that judges otherwise)
	Progress     io.Writer     // where progress goes; nil for none
	TTY          bool          // Progress is a terminal: redraw a bar in place
}

// Defaults are the sizes of the issue: 100 events × 50 copies × 200 clients.
var Defaults = Config{Events: 100, Copies: 50, Concurrency: 200, Duration: 5 * time.Second, Rate: 200, DrainTimeout: time.Minute}

// Scenario is one replayable situation.
type Scenario struct {
	Name  string
	About string
	run   func(ctx context.Context, r *runner) error
}

// Scenarios share their names with the k6 scripts in loadtest/k6.
var Scenarios = []Scenario{
	{"duplicate-storm", "each event delivered COPIES times by CONCURRENCY clients at once: 1 processed, the rest duplicate", duplicateStorm},
	{"burst", "each event's COPIES identical deliveries fired together: 1 processed, the rest duplicate", burst},
	{"race", "paid, failed and expired events for one order, each delivered repeatedly, all at once", race},
	{"conflict", "an event id delivered again with another body: 409 conflict, nothing changes", conflict},
	{"oversell", "2×EVENTS buyers at once for EVENTS units: exactly EVENTS orders", oversell},
	{"steady", "RATE requests/s of new orders, first deliveries and gateway retries for DURATION", steady},
}

// runner runs one scenario.
type runner struct {
	cfg   Config
	c     *client
	stats *stats
	name  string
	run   string // unique per run, so event ids never collide with an earlier run
}

// Run runs the named scenario ("all" for every one) and returns a report
// per scenario; a report is OK only when every answer was expected and
// the audit is green.
func Run(ctx context.Context, cfg Config, name string) ([]Report, error) {
	if cfg.Provider == "" {
		cfg.Provider = sandbox.Name
	}
	send, err := gateways.NewSender(cfg.Provider, cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("-secret: %w", err)
	}
	c := &client{base: strings.TrimRight(cfg.Target, "/"), token: cfg.Token, send: send,
		http: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	metricsURL := cmp.Or(cfg.MetricsURL, c.base+"/metrics")
	var reports []Report
	found := false
	for _, s := range Scenarios {
		if name != "all" && name != s.Name {
			continue
		}
		found = true
		r := &runner{cfg: cfg, c: c, stats: newStats(), name: s.Name, run: randomHex(4)}
		droppedBefore, droppedErr := DroppedDeliveryRows(ctx, c.http, metricsURL)
		err := s.run(ctx, r)
		rep := r.stats.report(s.Name)
		for _, err := range []error{err, c.registrationError()} {
			if err != nil {
				rep.Problems = append(rep.Problems, err.Error())
			}
		}
		if ctx.Err() == nil && !cfg.SkipAudit {
			a, err := c.audit(ctx, cfg.DrainTimeout)
			if err != nil {
				rep.Problems = append(rep.Problems, err.Error())
			} else {
				rep.Audit = &a
			}
		}
		if ctx.Err() == nil {
			// After the audit's drain: the rows are written after the answers.
			droppedAfter, err := DroppedDeliveryRows(ctx, c.http, metricsURL)
			NoteDroppedRows(&rep, droppedBefore, droppedAfter, errors.Join(droppedErr, err))
		}
		rep.OK = rep.Unexpected == 0 && len(rep.Problems) == 0 && (cfg.SkipAudit || rep.Audit != nil && rep.Audit.OK)
		reports = append(reports, rep)
	}
	if !found {
		return nil, fmt.Errorf("unknown scenario %q", name)
	}
	return reports, ctx.Err()
}

// fireAll sends a fixed list of shots as fast as Concurrency allows.
func (r *runner) fireAll(ctx context.Context, phase string, shots []*shot) []answer {
	stop := progress(r.cfg.Progress, r.cfg.TTY, r.name, r.stats, len(shots))
	defer stop()
	return r.fire(ctx, phase, r.cfg.Concurrency, vegeta.Rate{Freq: 0}, 0, func(i int) *shot {
		if i >= len(shots) {
			return nil
		}
		return shots[i]
	})
}

// orders creates a product with enough stock and n orders of one unit.
func (r *runner) orders(ctx context.Context, n int, price int64) ([]string, error) {
	sku, err := r.c.createProduct(ctx, r.name, price, int64(n))
	if err != nil {
		return nil, err
	}
	ids := make([]string, n)
	for i := range ids {
		if ids[i], _, err = r.c.createOrder(ctx, sku, 1); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func (r *runner) paid(orderID, event, tx string, price int64) *shot {
	return r.c.notification(payments.Fact{EventID: event, OrderID: orderID, TransactionID: tx,
		Status: models.EventPaid, Amount: price}, 200)
}

// expectOnce checks that every event (tag) was applied once — processed
// or stale — and that every other delivery of it was a duplicate.
func (r *runner) expectOnce(answers []answer, copies int) {
	for tag, results := range count(answers) {
		applied := results["processed"] + results["stale"]
		if applied != 1 || results["duplicate"] != copies-1 {
			r.stats.problem("%s: %v, want 1 processed and %d duplicate", tag, results, copies-1)
		}
	}
}

const price = 10000

func duplicateStorm(ctx context.Context, r *runner) error {
	ids, err := r.orders(ctx, r.cfg.Events, price)
	if err != nil {
		return err
	}
	var shots []*shot
	for range r.cfg.Copies { // copies of one event are spread among the others, as retries are
		for e, id := range ids {
			shots = append(shots, r.paid(id, fmt.Sprintf("ds-%s-%d", r.run, e), "tx-ds-"+id, price))
		}
	}
	r.expectOnce(r.fireAll(ctx, "duplicate-storm", shots), r.cfg.Copies)
	return nil
}

func burst(ctx context.Context, r *runner) error {
	ids, err := r.orders(ctx, r.cfg.Events, price)
	if err != nil {
		return err
	}
	var shots []*shot
	for e, id := range ids { // the copies of one event leave together
		for range r.cfg.Copies {
			shots = append(shots, r.paid(id, fmt.Sprintf("bu-%s-%d", r.run, e), "tx-bu-"+id, price))
		}
	}
	r.expectOnce(r.fireAll(ctx, "burst", shots), r.cfg.Copies)
	return nil
}

func race(ctx context.Context, r *runner) error {
	ids, err := r.orders(ctx, r.cfg.Events, price)
	if err != nil {
		return err
	}
	var shots []*shot
	for e, id := range ids {
		for _, status := range []models.PaymentEvent{models.EventPaid, models.EventFailed, models.EventExpired} {
			event := fmt.Sprintf("ra-%s-%d-%s", r.run, e, status)
			amount := int64(0)
			if status == models.EventPaid {
				amount = price
			}
			s := r.c.notification(payments.Fact{EventID: event, OrderID: id, TransactionID: "tx-ra-" + string(status) + "-" + id,
				Status: status, Amount: amount}, 200)
			if s == nil {
				continue // the gateway has no such notification (Xendit: failed; Stripe: expired)
			}
			for range r.cfg.Copies {
				shots = append(shots, s)
			}
		}
	}
	rand.Shuffle(len(shots), func(i, j int) { shots[i], shots[j] = shots[j], shots[i] })
	r.expectOnce(r.fireAll(ctx, "race", shots), r.cfg.Copies)
	return nil
}

func conflict(ctx context.Context, r *runner) error {
	ids, err := r.orders(ctx, r.cfg.Events, price)
	if err != nil {
		return err
	}
	var first, again []*shot
	for e, id := range ids {
		pending := payments.Fact{EventID: fmt.Sprintf("cf-%s-%d", r.run, e), OrderID: id, TransactionID: "tx-cf-" + id,
			Status: models.EventPending}
		// The same event again, saying something else: that it paid — or,
		// for Midtrans, whose key includes the status, that it is pending
		// for another amount.
		other := pending
		other.Status, other.Amount = models.EventPaid, price
		if r.cfg.Provider == midtrans.Name {
			other.Status = models.EventPending
		}
		first = append(first, r.c.notification(pending, 200))
		for range r.cfg.Copies {
			again = append(again, r.c.untrue(other, 409))
		}
	}
	r.fireAll(ctx, "conflict: first", first)
	for tag, results := range count(r.fireAll(ctx, "conflict: again", again)) {
		if results["conflict"] != r.cfg.Copies {
			r.stats.problem("%s: %v, want %d conflict", tag, results, r.cfg.Copies)
		}
	}
	for _, id := range ids { // nothing changed: still pending
		var o struct {
			Status string `json:"status"`
		}
		if _, err := r.c.do(ctx, "GET", "/api/orders/"+id, nil, nil, &o); err != nil || o.Status != "pending" {
			r.stats.problem("order %s is %q after conflicting deliveries, want pending (%v)", id, o.Status, err)
		}
	}
	return nil
}

func oversell(ctx context.Context, r *runner) error {
	units := r.cfg.Events
	sku, err := r.c.createProduct(ctx, r.name, price, int64(units))
	if err != nil {
		return err
	}
	body := []byte(fmt.Sprintf(`{"customer_email":"buyer@example.com","items":[{"sku":%q,"qty":1}]}`, sku))
	var shots []*shot
	for i := range 2 * units {
		shots = append(shots, &shot{method: "POST", path: "/api/orders", body: body, tag: sku, allowed: []int{201, 409},
			header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {fmt.Sprintf("oversell-%s-%04d", r.run, i)}}})
	}
	got := count(r.fireAll(ctx, "oversell", shots))[sku]
	if got["created"] != units || got["insufficient_stock"] != units {
		r.stats.problem("%d buyers for %d units: %v, want %d created and %d insufficient_stock", 2*units, units, got, units, units)
	}
	return nil
}

// steady mixes, at a constant rate: 20% new orders, 40% first deliveries
// of a paid event, 40% retries of an event already delivered — the
// gateways retry what they think was not received.
func steady(ctx context.Context, r *runner) error {
	total := int(r.cfg.Duration.Seconds()*float64(r.cfg.Rate)) + 1
	pool, err := r.orders(ctx, total*4/10+1, price)
	if err != nil {
		return err
	}
	sku, err := r.c.createProduct(ctx, r.name, price, int64(total))
	if err != nil {
		return err
	}
	newOrder := []byte(fmt.Sprintf(`{"customer_email":"buyer@example.com","items":[{"sku":%q,"qty":1}]}`, sku))
	var sent []*shot
	nextPaid := 0
	stop := progress(r.cfg.Progress, r.cfg.TTY, r.name, r.stats, total)
	defer stop()
	answers := r.fire(ctx, "steady", r.cfg.Concurrency, vegeta.Rate{Freq: r.cfg.Rate, Per: time.Second}, r.cfg.Duration,
		func(i int) *shot {
			switch k := i % 10; {
			case k >= 6 && len(sent) > 0:
				s := *sent[rand.IntN(len(sent))]
				return &s
			case k >= 2 && nextPaid < len(pool):
				id := pool[nextPaid]
				nextPaid++
				s := r.paid(id, fmt.Sprintf("st-%s-%d", r.run, nextPaid), "tx-st-"+id, price)
				sent = append(sent, s)
				return s
			default:
				return &shot{method: "POST", path: "/api/orders", body: newOrder, tag: "new order", allowed: []int{201},
					header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {fmt.Sprintf("steady-%s-order-%d", r.run, i)}}}
			}
		})
	for tag, results := range count(answers) {
		if tag != "new order" && results["processed"] != 1 {
			r.stats.problem("%s: %v, want exactly 1 processed", tag, results)
		}
	}
	return nil
}
