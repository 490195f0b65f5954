package main

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sekali/sekali/models"
)

// Bulk data settings.
const (
	bulkSKUs = 50 // BULK-0001 … BULK-0050
	// bulkSpan is how far back orders go; bulkRecentShare of them are in
	// the last hour, so the dashboard has something to show.
	bulkSpan        = 30 * 24 * time.Hour
	bulkRecentShare = 0.015
	// bulkNewest is the age of the newest order: older than the live
	// audit's settle window and the rollup's, once paid.
	bulkNewest = 3 * time.Minute
	// bulkRefusedPerOrder deliveries were refused before their event was
	// known (bad signature, payload, type, size); bulkErrorsPerOrder
	// failed with a 503.
	bulkRefusedPerOrder = 0.45
	bulkErrorsPerOrder  = 0.001
	// bulkStockMargin is the stock each SKU keeps beyond a batch's orders.
	bulkStockMargin = 1500
	// bulkWorker names the worker in the generated job rows.
	bulkWorker = "bulk-seed"
)

// What happened to a bulk order. Each order has exactly one callback.
const (
	pathPaid         = "paid"          // 'paid' event processed → paid, invoice, email
	pathFailed       = "failed"        // 'failed' event processed → failed, stock released
	pathExpiredEvent = "expired_event" // 'expired' event processed → expired, stock released
	pathExpiredJob   = "expired_job"   // expired by its order:expire job; a later 'failed' event is stale
	pathExpiredRej   = "expired_rej"   // a 'paid' event with the wrong amount was rejected; then expired by its job
	pathExpiredSweep = "expired_sweep" // its expire job failed; the sweeper expired it; a later 'expired' event is stale
	pathCancelled    = "cancelled"     // a 'pending' event recorded the charge; then the customer cancelled
	pathPending      = "pending"       // a 'pending' event recorded the charge; still pending
	pathPendingRej   = "pending_rej"   // a 'paid' event with the wrong amount was rejected; still pending
)

// bulkOrder is the plan of one order.
type bulkOrder struct {
	ID, Email          string
	Created, Expires   time.Time
	Path               string
	Status             models.OrderStatus
	EventAt            time.Time // the callback's first delivery
	EndAt              time.Time // the status change; zero while pending
	CallbackKey, TxID  string
	EventStatus        models.PaymentEvent
	CallbackKind       string // processed, stale or rejected
	Dups, Conflicts    int    // further deliveries of the event
	InvoiceJobAttempts int
	Items              []bulkItem
	// Refused are the times of deliveries refused before their event was
	// known, received after this order was made and before the next.
	Refused []time.Time
}

type bulkItem struct {
	SKU string
	Qty int64
}

// bulkSKU is the SKU of bulk product i (1-based) and bulkPrice its price.
func bulkSKU(i int) string      { return fmt.Sprintf("BULK-%04d", i) }
func bulkPrice(i int) int64     { return 25_000 * int64(1+(i*7)%20) }
func bulkCustomer(c int) string { return fmt.Sprintf("customer%06d@example.com", c) }

// planner decides what happened to each of n orders, one at a time and in
// creation order (order(0), order(1), …), so that a batch is planned and
// written a chunk at a time. Only the creation times of all n orders are
// drawn up front: they are sorted, and order i is the i-th made.
type planner struct {
	rng          *rand.Rand
	now          time.Time
	ttl          time.Duration
	created      []time.Time
	customers    int
	pathSeq      func() float64
	conflictSeq  func() float64
	lim, paidLim time.Time
	newest       time.Time
	// The items come from a stream of their own, so that they can be
	// drawn twice: by units, to know each product's units in the batch
	// (its stock comes before the first order), and by order.
	itemSeed [2]uint64
	itemRng  *rand.Rand
}

func newPlanner(rng *rand.Rand, n int, now time.Time, ttl time.Duration) *planner {
	newest := now.Add(-bulkNewest)
	hourAgo := now.Add(-time.Hour)
	oldest := now.Add(-bulkSpan)
	created := make([]time.Time, n)
	recent := max(1, int(math.Round(float64(n)*bulkRecentShare)))
	for i := range created {
		if i < recent {
			created[i] = between(rng, hourAgo, newest)
		} else {
			created[i] = between(rng, oldest, hourAgo)
		}
	}
	slices.SortFunc(created, func(a, b time.Time) int { return a.Compare(b) })
	p := &planner{
		rng: rng, now: now, ttl: ttl, created: created, customers: max(1, n/8),
		// The shares of the paths and of the conflicts are kept exact,
		// even in a small batch, by drawing them from evenly spread
		// sequences (fractional parts of multiples of irrational numbers)
		// rather than independently.
		pathSeq:     evenly(rng, 0.6180339887498949),
		conflictSeq: evenly(rng, 0.41421356237309515),
		lim:         now.Add(-30 * time.Second), // no event is newer
		paidLim:     now.Add(-2 * time.Minute),  // nor a payment: the live audit and the rollup have settled it
		newest:      newest,
		itemSeed:    [2]uint64{rng.Uint64(), rng.Uint64()},
	}
	p.itemRng = rand.New(rand.NewPCG(p.itemSeed[0], p.itemSeed[1]))
	return p
}

// units is how many units of each SKU the n orders take: the items that
// order(0) … order(n-1) will have.
func (p *planner) units() map[string]int64 {
	rng := rand.New(rand.NewPCG(p.itemSeed[0], p.itemSeed[1]))
	units := map[string]int64{}
	for range p.created {
		for _, it := range bulkItems(rng) {
			units[it.SKU] += it.Qty
		}
	}
	return units
}

// order plans order i; it must be called for i = 0, 1, … in turn.
func (p *planner) order(i int) bulkOrder {
	rng, t, ttl, now := p.rng, p.created[i], p.ttl, p.now
	var o bulkOrder
	o.Created = t
	o.Expires = t.Add(ttl)
	// The app's own ids: they sort by creation time (to the millisecond),
	// as the console's paging needs.
	o.ID = models.NewOrderID(t)
	o.Email = bulkCustomer(rng.IntN(p.customers))
	o.CallbackKey = "evt_" + randomText(rng, 22)
	o.TxID = "tx_" + randomText(rng, 20)
	o.Dups = rng.IntN(8)
	if p.conflictSeq() < 0.02 {
		o.Conflicts = 1 + rng.IntN(3)
	}
	o.InvoiceJobAttempts = 1
	if rng.Float64() < 0.01 {
		o.InvoiceJobAttempts = 2
	}
	o.Items = bulkItems(p.itemRng)

	// When an event before the expiry may come: soon after creation,
	// never after paidLim.
	early := func() time.Time {
		hi := minTime(t.Add(ttl*8/10), p.paidLim)
		return between(rng, minTime(t.Add(5*time.Second), hi), hi)
	}
	r := p.pathSeq()
	switch {
	case o.Expires.After(now): // still within its TTL
		switch {
		case r < 0.30:
			o.Path = pathPending
		case r < 0.40:
			o.Path = pathPendingRej
		case r < 0.90:
			o.Path = pathPaid
		case r < 0.95:
			o.Path = pathFailed
		default:
			o.Path = pathCancelled
		}
	default:
		switch {
		case r < 0.86:
			o.Path = pathPaid
		case r < 0.90:
			o.Path = pathFailed
		case r < 0.92:
			o.Path = pathExpiredEvent
		case r < 0.95:
			o.Path = pathExpiredJob
		case r < 0.96:
			o.Path = pathExpiredRej
		case r < 0.963:
			o.Path = pathExpiredSweep
		default:
			o.Path = pathCancelled
		}
		// Expiries that came too recently for their late events.
		if o.Expires.Add(15*time.Minute).After(now) && (o.Path == pathExpiredJob || o.Path == pathExpiredRej || o.Path == pathExpiredSweep) {
			o.Path = pathExpiredEvent
		}
	}
	lim := p.lim
	switch o.Path {
	case pathPaid:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderPaid, models.EventPaid, models.ResultProcessed
		o.EventAt = early()
		o.EndAt = o.EventAt
	case pathFailed:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderFailed, models.EventFailed, models.ResultProcessed
		o.EventAt = early()
		o.EndAt = o.EventAt
	case pathExpiredEvent:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderExpired, models.EventExpired, models.ResultProcessed
		o.EventAt = minTime(t.Add(ttl*9/10), lim)
		o.EndAt = o.EventAt
	case pathExpiredJob:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderExpired, models.EventFailed, models.ResultStale
		o.EndAt = o.Expires.Add(time.Duration(50+rng.IntN(1500)) * time.Millisecond)
		o.EventAt = minTime(between(rng, o.EndAt.Add(time.Second), o.EndAt.Add(10*time.Minute)), lim)
	case pathExpiredRej:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderExpired, models.EventPaid, models.ResultRejected
		o.EventAt = early()
		o.EndAt = o.Expires.Add(time.Duration(50+rng.IntN(1500)) * time.Millisecond)
	case pathExpiredSweep:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderExpired, models.EventExpired, models.ResultStale
		o.EndAt = o.Expires.Add(time.Duration(60+rng.IntN(120)) * time.Second)
		o.EventAt = minTime(between(rng, o.EndAt.Add(time.Second), o.EndAt.Add(10*time.Minute)), lim)
	case pathCancelled:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderCancelled, models.EventPending, models.ResultProcessed
		o.EventAt = early()
		// Cancelled while it still held its stock.
		o.EndAt = between(rng, o.EventAt.Add(time.Second), maxTime(o.EventAt.Add(time.Second), minTime(o.Expires.Add(-time.Second), lim)))
	case pathPending:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderPending, models.EventPending, models.ResultProcessed
		o.EventAt = early()
	case pathPendingRej:
		o.Status, o.EventStatus, o.CallbackKind = models.OrderPending, models.EventPaid, models.ResultRejected
		o.EventAt = early()
	}

	// The refused deliveries, as many as the batch's share up to this
	// order (so n·rate in all), between this order and the next: they
	// follow the orders over time.
	const rate = bulkRefusedPerOrder + bulkErrorsPerOrder
	next := p.newest
	if i+1 < len(p.created) {
		next = p.created[i+1]
	}
	for range int(float64(i+1)*rate) - int(float64(i)*rate) {
		o.Refused = append(o.Refused, between(rng, t, next))
	}
	return o
}

// bulkItems picks one to three different products, mostly one unit each.
func bulkItems(rng *rand.Rand) []bulkItem {
	k := 1
	switch r := rng.Float64(); {
	case r > 0.9:
		k = 3
	case r > 0.6:
		k = 2
	}
	var picked [bulkSKUs + 1]bool
	items := make([]bulkItem, 0, k)
	for len(items) < k {
		p := 1 + rng.IntN(bulkSKUs)
		if picked[p] {
			continue
		}
		picked[p] = true
		qty := int64(1)
		if rng.Float64() < 0.3 {
			qty = 2 + rng.Int64N(2)
		}
		items = append(items, bulkItem{SKU: bulkSKU(p), Qty: qty})
	}
	slices.SortFunc(items, func(a, b bulkItem) int { return cmp.Compare(a.SKU, b.SKU) })
	return items
}

// evenly returns the sequence frac(x0 + i·step), i = 0, 1, …, from a
// random x0: values in [0, 1) whose every run covers the interval evenly.
func evenly(rng *rand.Rand, step float64) func() float64 {
	x := rng.Float64()
	return func() float64 {
		v := x
		x = math.Mod(x+step, 1)
		return v
	}
}

func between(rng *rand.Rand, lo, hi time.Time) time.Time {
	if !hi.After(lo) {
		return lo
	}
	return lo.Add(time.Duration(rng.Int64N(int64(hi.Sub(lo))))).Truncate(time.Microsecond)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

const textAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

func randomText(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = textAlphabet[rng.IntN(len(textAlphabet))]
	}
	return string(b)
}
