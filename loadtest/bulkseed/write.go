package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/invoices"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/stats"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

const (
	// defaultChunk orders are planned, then written, at a time.
	defaultChunk = 5000
	// batchRows rows go into one INSERT.
	batchRows = 1000
	// jobLag holds the job rows back behind the other tables: an invoice
	// job starts 30 ms before its invoice is issued, and its row needs
	// the number the invoice gets when it is written.
	jobLag = time.Second
	// provider is the gateway of every bulk callback.
	provider = "sandbox"
)

// retrySchedule is when the gateway redelivers an event, in seconds
// after the first delivery, give or take a fifth.
func retrySchedule() []float64 { return []float64{0.2, 5, 300, 1800, 7200, 18000, 36000, 86400} }

// summary is what a batch made.
type summary struct {
	Orders     int
	ByStatus   map[models.OrderStatus]int
	ByPath     map[string]int
	Items      int
	Deliveries int
}

// batch says what to seed: n orders, made with time to pay ttl, planned
// and written chunk orders at a time.
type batch struct {
	n, chunk int
	ttl      time.Duration
	// keptKey is the key of kept bodies' hashes (payments.KeptBodyKey of
	// the servers' ORDER_TOKEN_SECRET), so that a server can run a
	// seeded kept delivery again (a dry run).
	keptKey []byte
}

// seed generates a batch of orders and everything around them in one
// transaction (a seed that fails leaves nothing behind), then analyses
// the tables and rolls up the delivery counts.
func seed(ctx context.Context, db *gorm.DB, b batch, stdout io.Writer) (summary, error) {
	start := time.Now()
	now := start.UTC().Truncate(time.Microsecond)
	rng := rand.New(rand.NewPCG(uint64(now.UnixNano()), 0x5e4a11))
	var sum summary
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		sum, err = write(tx, rng, newPlanner(rng, b.n, now, b.ttl), b.chunk, now, b.keptKey)
		return err
	})
	if err != nil {
		return sum, fmt.Errorf("bulkseed: %w", err)
	}
	written := time.Now()

	// VACUUM sets the visibility map, so that the dashboard's counts are
	// index-only scans; ANALYZE gives the planner the new sizes.
	tables, err := tableNames(db, &models.Product{}, &models.Order{}, &models.OrderItem{}, &models.StockMovement{},
		&models.Payment{}, &models.PaymentCallback{}, &models.CallbackDelivery{}, &models.OrderTransition{},
		&models.Invoice{}, &models.InvoiceCounter{}, &models.OutboundEmail{}, &models.OutboxMessage{}, &models.JobExecution{})
	if err != nil {
		return sum, fmt.Errorf("bulkseed: %w", err)
	}
	if err := db.WithContext(ctx).Exec("VACUUM (ANALYZE) " + strings.Join(tables, ", ")).Error; err != nil {
		return sum, fmt.Errorf("bulkseed: vacuum: %w", err)
	}
	vacuumed := time.Now()

	minutes, err := stats.Rollup(ctx, db, time.Now())
	if err != nil {
		return sum, fmt.Errorf("bulkseed: %w", err)
	}
	counts, err := tableNames(db, &models.DeliveryCount{})
	if err != nil {
		return sum, fmt.Errorf("bulkseed: %w", err)
	}
	if err := db.WithContext(ctx).Exec("ANALYZE " + counts[0]).Error; err != nil {
		return sum, fmt.Errorf("bulkseed: analyse: %w", err)
	}
	done := time.Now()

	var parts []string
	for _, s := range slices.Sorted(maps.Keys(sum.ByStatus)) {
		parts = append(parts, fmt.Sprintf("%s %d", s, sum.ByStatus[s]))
	}
	fmt.Fprintf(stdout, "bulkseed: %d orders (%s), %d order items, %d callbacks, %d deliveries (%.2f per order); products BULK-0001…%s\n",
		sum.Orders, strings.Join(parts, ", "), sum.Items, sum.Orders, sum.Deliveries,
		float64(sum.Deliveries)/float64(max(sum.Orders, 1)), bulkSKU(bulkSKUs))
	fmt.Fprintf(stdout, "bulkseed: done in %s (plan and write %s, vacuum and analyse %s, roll up %d minutes %s)\n",
		round(done.Sub(start)), round(written.Sub(start)), round(vacuumed.Sub(written)), minutes, round(done.Sub(vacuumed)))
	return sum, nil
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// tableNames are the quoted names of the models' tables.
func tableNames(db *gorm.DB, rows ...any) ([]string, error) {
	var names []string
	for _, r := range rows {
		stmt := &gorm.Statement{DB: db}
		if err := stmt.Parse(r); err != nil {
			return nil, err
		}
		names = append(names, stmt.Quote(stmt.Schema.Table))
	}
	return names, nil
}

// write plans and writes the batch in tx, a chunk of orders at a time.
func write(tx *gorm.DB, rng *rand.Rand, p *planner, chunk int, now time.Time, keptKey []byte) (summary, error) {
	w := &writer{tx: tx, rng: rng, now: now, lim: p.lim, keptKey: keptKey, next: map[int]int64{}, released: map[string]int64{},
		sum: summary{ByStatus: map[models.OrderStatus]int{}, ByPath: map[string]int{}}}
	w.queues()
	if err := tx.Exec("SET LOCAL synchronous_commit = off").Error; err != nil {
		return w.sum, err
	}
	if err := w.products(); err != nil {
		return w.sum, err
	}
	// Invoice numbers continue each year's counter without a gap; the
	// counters stay locked until the commit.
	counters, err := tableNames(tx, &models.InvoiceCounter{})
	if err != nil {
		return w.sum, err
	}
	if err := tx.Exec("LOCK TABLE " + counters[0] + " IN EXCLUSIVE MODE").Error; err != nil {
		return w.sum, fmt.Errorf("invoice counters: %w", err)
	}
	var last []models.InvoiceCounter
	if err := tx.Find(&last).Error; err != nil {
		return w.sum, fmt.Errorf("invoice counters: %w", err)
	}
	for _, c := range last {
		w.next[c.Year] = c.Last
	}

	// Stock: an initial stock and a restock half-way, per SKU: the
	// batch's reservations and a margin.
	n := len(p.created)
	units := p.units()
	first, mid := p.created[0].Add(-time.Hour), p.created[0].Add(p.created[n-1].Sub(p.created[0])/2)
	for _, sku := range slices.Sorted(maps.Keys(units)) {
		initial := int64(math.Ceil(float64(units[sku])*0.6)) + 1000
		w.movements.add(
			models.StockMovement{SKU: sku, Kind: models.MovementAdjust, Qty: initial, CreatedAt: first},
			models.StockMovement{SKU: sku, Kind: models.MovementAdjust, Qty: units[sku] - initial + bulkStockMargin, CreatedAt: mid})
	}

	for a := 0; a < n; a += chunk {
		b := min(a+chunk, n)
		for i := a; i < b; i++ {
			if err := w.add(p.order(i)); err != nil {
				return w.sum, err
			}
		}
		// Later orders are made after p.created[b], and so is everything
		// that follows them: rows older than that are written now.
		var before time.Time // the last chunk: everything
		if b < n {
			before = p.created[b]
		}
		if err := w.flush(before); err != nil {
			return w.sum, err
		}
	}

	// The products' stock moves by the batch's movements: the adjusts,
	// less the reservations, plus the releases.
	for _, sku := range slices.Sorted(maps.Keys(units)) {
		err := tx.Model(&models.Product{}).Where("sku = ?", sku).Updates(map[string]any{
			"stock":      gorm.Expr("stock + ?", bulkStockMargin+w.released[sku]),
			"updated_at": gorm.Expr("greatest(updated_at, ?)", now),
		}).Error
		if err != nil {
			return w.sum, fmt.Errorf("stock of %s: %w", sku, err)
		}
	}
	cs := make([]models.InvoiceCounter, 0, len(w.next))
	for _, y := range slices.Sorted(maps.Keys(w.next)) {
		cs = append(cs, models.InvoiceCounter{Year: y, Last: w.next[y]})
	}
	err = tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "year"}}, DoUpdates: clause.AssignmentColumns([]string{"last"})}).
		Create(&cs).Error
	if err != nil {
		return w.sum, fmt.Errorf("invoice counters: %w", err)
	}
	// The rollup counts only the minutes past its mark: take the mark
	// back, with the batch, so that the minutes the batch wrote into are
	// counted again (a minute's count is recomputed from the rows, never
	// added to).
	back := now.Add(-bulkSpan)
	if err := tx.Model(&models.RollupMark{}).Where("done_until > ?", back).Update("done_until", back).Error; err != nil {
		return w.sum, fmt.Errorf("rollup mark: %w", err)
	}
	return w.sum, nil
}

// writer turns planned orders into rows and writes them in time order.
type writer struct {
	tx       *gorm.DB
	rng      *rand.Rand
	now, lim time.Time
	price    map[string]int64
	name     map[string]string
	next     map[int]int64    // the last invoice number of each year
	released map[string]int64 // units given back, per SKU
	sum      summary
	keptKey  []byte // of kept bodies' hashes

	orders      queue[orderRows]
	movements   queue[models.StockMovement]
	callbacks   queue[*models.PaymentCallback] // pointers: deliveries and transitions point at their ids
	deliveries  queue[models.CallbackDelivery]
	payments    queue[models.Payment]
	transitions queue[models.OrderTransition]
	outbox      queue[models.OutboxMessage]
	emails      queue[models.OutboundEmail]
	invoices    queue[invoiceRow]
	jobs        queue[models.JobExecution]
}

// orderRows is an order with its items.
type orderRows struct {
	order models.Order
	items []models.OrderItem
}

// invoiceRow is an invoice without its number yet, and how many attempts
// its job took.
type invoiceRow struct {
	invoice  models.Invoice
	attempts int
}

func (w *writer) queues() {
	w.orders.at = func(r orderRows) time.Time { return r.order.CreatedAt }
	w.movements.at = func(r models.StockMovement) time.Time { return r.CreatedAt }
	w.callbacks.at = func(r *models.PaymentCallback) time.Time { return r.FirstReceivedAt }
	w.deliveries.at = func(r models.CallbackDelivery) time.Time { return r.ReceivedAt }
	w.payments.at = func(r models.Payment) time.Time { return r.CreatedAt }
	w.transitions.at = func(r models.OrderTransition) time.Time { return r.CreatedAt }
	w.outbox.at = func(r models.OutboxMessage) time.Time { return r.CreatedAt }
	w.emails.at = func(r models.OutboundEmail) time.Time { return r.CreatedAt }
	w.invoices.at = func(r invoiceRow) time.Time { return r.invoice.IssuedAt }
	w.jobs.at = func(r models.JobExecution) time.Time { return r.StartedAt }
}

// products creates the bulk products, once, and reads their prices: a
// later batch uses the prices the first one set.
func (w *writer) products() error {
	skus := make([]string, 0, bulkSKUs)
	for i := 1; i <= bulkSKUs; i++ {
		at := w.now.Add(-bulkSpan - 24*time.Hour)
		p := models.Product{SKU: bulkSKU(i), Name: fmt.Sprintf("Bulk product %04d", i), Price: bulkPrice(i),
			Currency: models.DefaultCurrency, CreatedAt: at, UpdatedAt: at}
		if _, err := catalog.Create(w.tx, &p); err != nil {
			return fmt.Errorf("products: %w", err)
		}
		skus = append(skus, p.SKU)
	}
	var ps []models.Product
	if err := w.tx.Where("sku IN ? AND currency = ?", skus, models.DefaultCurrency).Find(&ps).Error; err != nil {
		return fmt.Errorf("products: %w", err)
	}
	if len(ps) != bulkSKUs {
		return fmt.Errorf("products: %d of the %d BULK products are priced in %s", len(ps), bulkSKUs, models.DefaultCurrency)
	}
	w.price, w.name = make(map[string]int64, len(ps)), make(map[string]string, len(ps))
	for _, p := range ps {
		w.price[p.SKU], w.name[p.SKU] = p.Price, p.Name
	}
	return nil
}

// add makes the rows of one planned order: every row a real run of the
// app would have written for it.
func (w *writer) add(o bulkOrder) error {
	rng := w.rng
	const currency = models.DefaultCurrency
	items := make([]models.OrderItem, len(o.Items))
	var total int64
	for i, it := range o.Items {
		items[i] = models.OrderItem{OrderID: o.ID, SKU: it.SKU, Name: w.name[it.SKU], Qty: it.Qty, UnitPrice: w.price[it.SKU]}
		total += it.Qty * w.price[it.SKU]
	}
	order := models.Order{ID: o.ID, CustomerEmail: o.Email, Status: o.Status, TotalAmount: total, Currency: currency,
		ExpiresAt: o.Expires, CreatedAt: o.Created, UpdatedAt: o.Created}
	if !o.EndAt.IsZero() {
		order.UpdatedAt = o.EndAt
	}
	if o.Status == models.OrderPaid {
		order.PaidAt = &o.EndAt
	}
	w.orders.add(orderRows{order: order, items: items})
	w.sum.Orders++
	w.sum.ByStatus[o.Status]++
	w.sum.ByPath[o.Path]++
	w.sum.Items += len(items)

	// Stock: reserved when the order was made, released when it ended
	// unpaid.
	id := o.ID
	for _, it := range items {
		w.movements.add(models.StockMovement{SKU: it.SKU, OrderID: &id, Kind: models.MovementReserve, Qty: it.Qty, CreatedAt: o.Created})
		if !o.Status.HoldsStock() {
			w.movements.add(models.StockMovement{SKU: it.SKU, OrderID: &id, Kind: models.MovementRelease, Qty: it.Qty, CreatedAt: o.EndAt})
			w.released[it.SKU] += it.Qty
		}
	}

	// The callback: its event, once, then every delivery of it — the
	// first (it applied the event, found it stale, or was rejected), the
	// gateway's retries on its schedule (duplicates, or rejected again),
	// then the conflicting ones.
	rejected := o.CallbackKind == models.ResultRejected
	amount, status, result, code := total, models.CallbackProcessed, o.CallbackKind, 200
	if rejected {
		amount, status, result, code = total+1000, models.CallbackRejected, models.ReasonAmountMismatch, 422
	}
	body, err := canonjson.Encode(map[string]any{"order_id": o.ID, "transaction_id": o.TxID,
		"payment_status": o.EventStatus, "paid_amount": amount, "currency": currency})
	if err != nil {
		return err
	}
	cb := &models.PaymentCallback{Provider: provider, IdempotencyKey: o.CallbackKey, PayloadHash: canonjson.Hash(body),
		OrderID: o.ID, TransactionID: o.TxID, EventStatus: o.EventStatus, Amount: amount, Currency: currency,
		Status: status, Result: result, ConflictCount: o.Conflicts, ResponseCode: code, FirstReceivedAt: o.EventAt}
	if !rejected {
		cb.ProcessedAt = &o.EventAt
	}
	firstOutcome, again := o.CallbackKind, models.OutcomeDuplicate
	duration := 3 + rng.IntN(40)
	if rejected {
		firstOutcome, again, duration = models.OutcomeRejected, models.OutcomeRejected, 2+rng.IntN(15)
	}
	deliveries := []models.CallbackDelivery{w.delivery(cb, o.EventAt, firstOutcome, code, duration)}
	schedule := retrySchedule()
	for k := range o.Dups {
		at := o.EventAt.Add(time.Duration(schedule[k] * (0.8 + 0.4*rng.Float64()) * float64(time.Second)))
		if at.After(w.lim) {
			at = o.EventAt.Add(time.Duration(float64(max(w.lim.Sub(o.EventAt), 0)) * rng.Float64()))
		}
		deliveries = append(deliveries, w.delivery(cb, at.Truncate(time.Microsecond), again, code, rng.IntN(4)))
	}
	for k := range o.Conflicts {
		at := o.EventAt.Add(time.Duration((float64(k+1)*20 + rng.Float64()*40) * float64(time.Second)))
		at = minTime(at, maxTime(w.lim, o.EventAt)).Truncate(time.Microsecond)
		deliveries = append(deliveries, w.delivery(cb, at, models.OutcomeConflict, 409, rng.IntN(4)))
	}
	cb.Attempts = len(deliveries)
	cb.LastReceivedAt = o.EventAt
	for _, d := range deliveries {
		cb.LastReceivedAt = maxTime(cb.LastReceivedAt, d.ReceivedAt)
	}
	w.callbacks.add(cb)
	// Deliveries refused before any event was known.
	for _, at := range o.Refused {
		outcome, code := refusal(rng.Float64())
		deliveries = append(deliveries, w.delivery(nil, at, outcome, code, rng.IntN(3)))
	}
	w.deliveries.add(deliveries...)
	w.sum.Deliveries += len(deliveries)

	// The charge, when the event recorded one.
	var payment models.PaymentStatus
	switch o.Path {
	case pathPaid:
		payment = models.PaymentSucceeded
	case pathFailed:
		payment = models.PaymentFailed
	case pathExpiredEvent:
		payment = models.PaymentExpired
	case pathPending, pathCancelled:
		payment = models.PaymentPending
	}
	if payment != "" {
		w.payments.add(models.Payment{Provider: provider, ProviderReference: o.TxID, OrderID: o.ID, Amount: total,
			Currency: currency, Status: payment, CreatedAt: o.EventAt, UpdatedAt: o.EventAt})
	}

	// The status change.
	if o.Status != models.OrderPending {
		t := models.OrderTransition{OrderID: o.ID, FromStatus: models.OrderPending, ToStatus: o.Status, CreatedAt: o.EndAt}
		switch o.Path {
		case pathExpiredJob, pathExpiredRej:
			t.Cause = models.CauseExpiryJob
		case pathExpiredSweep:
			t.Cause = models.CauseExpirySweep
		case pathCancelled:
			t.Cause = models.CauseCustomer
		default:
			t.Cause, t.CallbackID = models.CauseCallback, &cb.ID
		}
		w.transitions.add(t)
	}

	// The tasks: the order's expiry, handed to the queue when due, and
	// its job, which ran (and failed, for a swept order) unless not yet
	// due; for a paid order, its invoice and email, done.
	w.outbox.add(w.task((jobs.Tasks{}).Expire(o.ID, o.Expires), o.Created))
	if due := o.Expires.Add(60 * time.Millisecond); !due.After(w.now) {
		key := jobs.ExpireArgs{}.Kind().ID(o.ID)
		switch o.Path {
		case pathExpiredSweep:
			w.jobs.add(w.job(key, jobs.ExpireArgs{}.Kind().Queue, o.ID, models.JobFailed, 3, o.Expires.Add(40*time.Millisecond),
				o.Expires.Add(45*time.Second), "context deadline exceeded", ""))
		case pathExpiredJob, pathExpiredRej:
			w.jobs.add(w.job(key, jobs.ExpireArgs{}.Kind().Queue, o.ID, models.JobSucceeded, 1, o.Expires.Add(40*time.Millisecond),
				o.EndAt, "", "expired"))
		default:
			w.jobs.add(w.job(key, jobs.ExpireArgs{}.Kind().Queue, o.ID, models.JobSucceeded, 1, o.Expires.Add(40*time.Millisecond),
				due, "", "no longer pending"))
		}
	}
	if o.Status != models.OrderPaid {
		return nil
	}
	requestID := deliveries[0].RequestID // the delivery that paid it
	w.outbox.add(w.task(jobs.Row(jobs.InvoiceArgs{OrderID: o.ID, RequestID: requestID}, o.EndAt), o.EndAt),
		w.task(jobs.Row(jobs.EmailArgs{Template: mail.OrderPaid, OrderID: o.ID, RequestID: requestID}, o.EndAt), o.EndAt))
	email := mail.OrderPaidEmail(&order)
	sent := o.EndAt.Add(250 * time.Millisecond)
	email.Status, email.Attempts, email.SentAt, email.CreatedAt = models.EmailSent, 1, &sent, o.EndAt.Add(70*time.Millisecond)
	w.emails.add(email)
	w.jobs.add(w.job(jobs.EmailArgs{}.Kind().ID(email.Key), jobs.EmailArgs{}.Kind().Queue, o.ID, models.JobSucceeded, 1,
		email.CreatedAt, o.EndAt.Add(255*time.Millisecond), "", email.MessageID))
	// The invoice, issued by its job's last attempt; numbered when written.
	issued := o.EndAt.Add(time.Duration(o.InvoiceJobAttempts-1)*10*time.Second + 90*time.Millisecond)
	w.invoices.add(invoiceRow{attempts: o.InvoiceJobAttempts, invoice: models.Invoice{OrderID: o.ID,
		Year: issued.Year(), Amount: total, Currency: currency, IssuedAt: issued}})
	return nil
}

// delivery is one delivery of cb (nil: refused before its event was known).
func (w *writer) delivery(cb *models.PaymentCallback, at time.Time, outcome string, code, durationMS int) models.CallbackDelivery {
	d := models.CallbackDelivery{Provider: provider, ReceivedAt: at, Outcome: outcome, ResponseCode: code,
		DurationMS: durationMS, RequestID: randomHex(w.rng, 16)}
	if cb != nil {
		d.CallbackID = &cb.ID // set when cb is written, before d is
	}
	if outcome == models.OutcomeInvalidSignature {
		d.RemoteAddr = fmt.Sprintf("198.51.100.%d", 1+w.rng.IntN(40))
	} else {
		d.RemoteAddr = fmt.Sprintf("10.20.0.%d", 1+w.rng.IntN(4))
	}
	// The body and headers a server keeps for DELIVERY_BODY_RETENTION
	// (its default, 7 days): the console's pages are measured with them.
	if w.now.Sub(at) < keptFor {
		var event string
		d.Headers, d.Body, event = keptDelivery(cb, d.RequestID, outcome)
		if outcome != models.OutcomeInvalidSignature && outcome != models.OutcomeUnsupportedMediaType {
			// as a server writes it, for the search by path = value: only
			// a body whose signature passed is searchable
			d.BodyJSON = payments.SearchableBody(d.Body)
		}
		d.BodyHash = payments.KeptHash(w.keptKey, []string{"webhook-id"}, http.Header{"Webhook-Id": {event}}, d.Body)
	}
	return d
}

// keptFor is how long a server keeps delivery bodies by default.
const keptFor = 7 * 24 * time.Hour

// keptDelivery is a kept body and headers like a sandbox delivery's, of
// about the size of one.
func keptDelivery(cb *models.PaymentCallback, requestID, outcome string) (json.RawMessage, []byte, string) {
	event, order, tx, amount := "evt_"+requestID, "ORD-UNKNOWN", "tx-"+requestID[:8], int64(0)
	if cb != nil {
		event, order, tx, amount = cb.IdempotencyKey, cb.OrderID, cb.TransactionID, cb.Amount
		if outcome == models.OutcomeConflict {
			amount++ // another body under the same key
		}
	}
	body := fmt.Sprintf(`{"order_id":%q,"transaction_id":%q,"payment_status":"paid","paid_amount":%d,"currency":"IDR"}`, order, tx, amount)
	headers := fmt.Sprintf(`{"Content-Type":["application/json"],"Webhook-Id":[%q],"Webhook-Signature":["v1,g0hM9SsE+…"],"Webhook-Timestamp":["1764770000"],"User-Agent":["Go-http-client/1.1"]}`, event)
	return json.RawMessage(headers), []byte(body), event
}

// refusal is the outcome and status of a refused delivery, r in [0, 1).
func refusal(r float64) (string, int) {
	switch {
	case r < 0.002:
		return models.OutcomeError, 503
	case r < 0.6:
		return models.OutcomeInvalidSignature, 401
	case r < 0.75:
		return models.OutcomeInvalidPayload, 400
	case r < 0.87:
		return models.OutcomeMissingField, 422
	case r < 0.95:
		return models.OutcomeUnsupportedMediaType, 415
	}
	return models.OutcomeTooLarge, 413
}

// task is the outbox row m written at created, handed to the queue once
// due.
func (w *writer) task(m models.OutboxMessage, created time.Time) models.OutboxMessage {
	m.CreatedAt = created
	if !m.ProcessAt.After(w.now) {
		at := minTime(m.ProcessAt.Add(30*time.Millisecond), w.now)
		m.Status, m.Attempts, m.DispatchedAt = models.OutboxDispatched, 1, &at
	}
	return m
}

// job is the row of a job that ran, by one of two workers.
func (w *writer) job(key, queue, orderID string, status models.JobStatus, attempts int, started, finished time.Time,
	lastError, result string) models.JobExecution {
	j := models.JobExecution{IdempotencyKey: key, QueueName: queue, ExternalJobID: key, BusinessKey: orderID,
		Status: status, Attempts: attempts, Fence: int64(attempts), WorkerID: fmt.Sprintf("%s:%d", bulkWorker, 1+crc32.ChecksumIEEE([]byte(key))%2),
		StartedAt: started, FinishedAt: &finished, LastError: lastError}
	if result != "" { // as the job guard records it
		sum := sha256.Sum256([]byte(result))
		j.ResultHash = hex.EncodeToString(sum[:])
	}
	return j
}

// flush writes every queued row older than before (zero: all of them),
// table by table, each in time order: a table's rows come after those it
// refers to.
func (w *writer) flush(before time.Time) error {
	bundles := w.orders.take(before)
	orders := make([]models.Order, len(bundles))
	var items []models.OrderItem
	for i, b := range bundles {
		orders[i] = b.order
		items = append(items, b.items...)
	}
	if err := create(w.tx, "orders", orders); err != nil {
		return err
	}
	if err := create(w.tx, "order items", items); err != nil {
		return err
	}
	if err := create(w.tx, "stock movements", w.movements.take(before)); err != nil {
		return err
	}
	if err := create(w.tx, "callbacks", w.callbacks.take(before)); err != nil {
		return err
	}
	deliveries := w.deliveries.take(before)
	for _, d := range deliveries {
		if d.CallbackID != nil && *d.CallbackID == 0 {
			return fmt.Errorf("a delivery at %s is written before its callback", d.ReceivedAt)
		}
	}
	if err := create(w.tx, "deliveries", deliveries); err != nil {
		return err
	}
	if err := create(w.tx, "payments", w.payments.take(before)); err != nil {
		return err
	}
	if err := create(w.tx, "order transitions", w.transitions.take(before)); err != nil {
		return err
	}
	if err := create(w.tx, "outbox", w.outbox.take(before)); err != nil {
		return err
	}
	if err := create(w.tx, "emails", w.emails.take(before)); err != nil {
		return err
	}
	pending := w.invoices.take(before)
	invs := make([]models.Invoice, len(pending))
	for i, p := range pending {
		inv := p.invoice
		w.next[inv.Year]++
		inv.Sequence = w.next[inv.Year]
		inv.Number = invoices.Number(inv.Year, inv.Sequence)
		invs[i] = inv
		w.jobs.add(w.job(jobs.InvoiceArgs{}.Kind().ID(inv.OrderID), jobs.InvoiceArgs{}.Kind().Queue, inv.OrderID, models.JobSucceeded, p.attempts,
			inv.IssuedAt.Add(-30*time.Millisecond), inv.IssuedAt.Add(5*time.Millisecond), "", inv.Number))
	}
	if err := create(w.tx, "invoices", invs); err != nil {
		return err
	}
	jobsBefore := before
	if !before.IsZero() {
		jobsBefore = before.Add(-jobLag)
	}
	return create(w.tx, "job executions", w.jobs.take(jobsBefore))
}

func create[T any](tx *gorm.DB, what string, rows []T) error {
	if len(rows) == 0 {
		return nil
	}
	if err := tx.CreateInBatches(rows, batchRows).Error; err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// queue holds one table's rows until they are due: each table is written
// in the order of its rows' times, as the app writes it, so that ids grow
// with time across the whole batch, not only within a chunk.
type queue[T any] struct {
	rows []T
	at   func(T) time.Time
}

func (q *queue[T]) add(rows ...T) { q.rows = append(q.rows, rows...) }

// take removes and returns, in time order, the rows older than before
// (zero: all of them).
func (q *queue[T]) take(before time.Time) []T {
	slices.SortStableFunc(q.rows, func(a, b T) int { return q.at(a).Compare(q.at(b)) })
	i := len(q.rows)
	if !before.IsZero() {
		i = sort.Search(len(q.rows), func(i int) bool { return !q.at(q.rows[i]).Before(before) })
	}
	due := q.rows[:i:i]
	q.rows = slices.Clone(q.rows[i:])
	return due
}

func randomHex(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return hex.EncodeToString(b)
}
