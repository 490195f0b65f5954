package story_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/invoices"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/story"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

const price = 1000 // every product here costs this much

// world makes orders and pays them through the real services, on the
// test's own database.
type world struct {
	t      *testing.T
	db     *gorm.DB
	orders *orders.Service
	pay    *payments.Service
	// closePay writes the queued delivery rows and stops the payment
	// service's writers; it runs once, whether a test calls it or the
	// cleanup does.
	closePay func()
	reader   *story.Reader
}

func newWorld(t *testing.T) *world {
	t.Helper()
	db := testenv.NewDB(t)
	log := testenv.Logger(t)
	pay := payments.NewService(db, log, time.Now, metrics.New(), jobs.Tasks{}, sandbox.NewProvider([][]byte{testenv.SandboxKey}))
	w := &world{t: t, db: db, orders: orders.NewService(db, log, time.Now, time.Hour, jobs.Tasks{}), pay: pay,
		closePay: sync.OnceFunc(pay.Close), reader: story.New(db, jobs.Tasks{})}
	t.Cleanup(w.closePay)
	return w
}

// order creates a pending order of qty units of sku.
func (w *world) order(sku string, qty int64) *models.Order {
	w.t.Helper()
	o, err := w.orders.Create(context.Background(), orders.CreateRequest{
		CustomerEmail: "buyer@example.com", Items: []orders.ItemRequest{{SKU: sku, Qty: qty}},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return o
}

// deliver sends one signed sandbox event under eventID through the
// payment pipeline.
func (w *world) deliver(eventID, orderID, ref string, ev models.PaymentEvent, amount int64) payments.Outcome {
	w.t.Helper()
	body := testenv.SandboxBody(orderID, ref, ev, amount)
	return w.pay.Receive(context.Background(), payments.Delivery{
		Provider:    sandbox.Name,
		Header:      testenv.SandboxHeaders(eventID, body, time.Now()),
		Body:        strings.NewReader(string(body)),
		ContentType: "application/json",
		RequestID:   "req-" + eventID,
	})
}

// mustDeliver is deliver that must be processed into status want.
func (w *world) mustDeliver(eventID, orderID, ref string, ev models.PaymentEvent, amount int64, want models.OrderStatus) {
	w.t.Helper()
	if out := w.deliver(eventID, orderID, ref, ev, amount); out.Result != models.ResultProcessed || out.OrderStatus != want {
		w.t.Fatalf("delivering %s %s: %+v, want processed into %s", eventID, ev, out, want)
	}
}

// read is the story of order id, which must exist.
func (w *world) read(id string) *story.Order {
	w.t.Helper()
	s, err := w.reader.Order(context.Background(), id)
	if err != nil {
		w.t.Fatalf("story of %s: %v", id, err)
	}
	return s
}

// sendEmail sends the order's payment confirmation as the email job
// does: the intent row, the delivery through sender, the row marked sent.
func (w *world) sendEmail(orderID string, sender mail.Mailer) {
	w.t.Helper()
	e, err := mail.OrderPaidIntent(context.Background(), w.db, orderID)
	if err != nil || e == nil {
		w.t.Fatalf("email intent of %s: %+v, %v", orderID, e, err)
	}
	if err := mail.Deliver(context.Background(), w.db, sender, "shop@example.com", e); err != nil {
		w.t.Fatal(err)
	}
	if sent, err := mail.MarkSentTx(w.db, e.Key, time.Now(), mail.Logs(sender)); err != nil || !sent {
		w.t.Fatalf("mark %s sent: %v, %v", e.Key, sent, err)
	}
}

// sender keeps the messages it is asked to send.
type sender struct {
	mu   sync.Mutex
	sent []mail.Message
}

func (s *sender) Send(_ context.Context, m mail.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, m)
	return nil
}

func whats(evs []story.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.What
	}
	return out
}

// inTimeOrder fails the test if the timeline goes back in time.
func inTimeOrder(t *testing.T, evs []story.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].At.Before(evs[i-1].At) {
			t.Errorf("timeline goes back in time at %d: %q at %s after %q at %s",
				i, evs[i].What, evs[i].At.Format(time.RFC3339Nano), evs[i-1].What, evs[i-1].At.Format(time.RFC3339Nano))
		}
	}
}

// event returns the one timeline event whose What is what.
func event(t *testing.T, evs []story.Event, what string) story.Event {
	t.Helper()
	var found []story.Event
	for _, e := range evs {
		if e.What == what {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("timeline %q has %d events %q, want 1", whats(evs), len(found), what)
	}
	return found[0]
}

// The story of an order created and then paid by a sandbox callback
// reads the order with its item and its one succeeded payment, the one
// pending → paid transition caused by that callback, the one reserve
// movement, the callback with its one processed delivery, and the three
// outbox rows (expiry, invoice, email). Its timeline is in time order and
// is exactly: the creation, the stock reservation, the expiry task, the
// callback, the status change pending → paid, then the invoice and email
// tasks the payment wrote — each once.
func TestOrderTellsTheStoryOfAPaidOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "STORY", price, 10)
	o := w.order("STORY", 2)
	w.mustDeliver("evt_story", o.ID, "tx-story", models.EventPaid, 2*price, models.OrderPaid)

	s := w.read(o.ID)
	if s.Order.ID != o.ID || s.Order.Status != models.OrderPaid || len(s.Order.Items) != 1 || s.Order.Items[0].Qty != 2 ||
		len(s.Order.Payments) != 1 || s.Order.Payments[0].Status != models.PaymentSucceeded || s.Order.Payments[0].ProviderReference != "tx-story" ||
		s.Order.Invoice != nil {
		t.Errorf("order %+v, want it paid with its item of 2, one succeeded payment tx-story and no invoice yet", s.Order)
	}
	if len(s.Callbacks) != 1 {
		t.Fatalf("callbacks %+v, want the one that paid", s.Callbacks)
	}
	cb := s.Callbacks[0]
	if cb.IdempotencyKey != "evt_story" || cb.Result != models.ResultProcessed {
		t.Errorf("callback %+v, want evt_story processed", cb)
	}
	if ds := s.Deliveries[cb.ID]; len(ds) != 1 || ds[0].Outcome != models.OutcomeProcessed {
		t.Errorf("deliveries of the callback %+v, want one processed", ds)
	}
	if len(s.Transitions) != 1 || s.Transitions[0].FromStatus != models.OrderPending || s.Transitions[0].ToStatus != models.OrderPaid ||
		s.Transitions[0].Cause != models.CauseCallback || s.Transitions[0].CallbackID == nil || *s.Transitions[0].CallbackID != cb.ID {
		t.Errorf("transitions %+v, want one pending → paid by callback %d", s.Transitions, cb.ID)
	}
	if len(s.Movements) != 1 || s.Movements[0].Kind != models.MovementReserve || s.Movements[0].SKU != "STORY" || s.Movements[0].Qty != 2 {
		t.Errorf("movements %+v, want one reserve of STORY × 2", s.Movements)
	}
	var tasks []string
	for _, m := range s.Outbox {
		tasks = append(tasks, m.TaskID)
	}
	expire, invoice, email := "order:expire:"+o.ID, "invoice:generate:"+o.ID, "email:send:order_paid:"+o.ID
	if want := []string{expire, invoice, email}; !slices.Equal(tasks, want) {
		t.Errorf("outbox %q, want %q", tasks, want)
	}
	if len(s.Jobs) != 0 || len(s.Emails) != 0 {
		t.Errorf("jobs %+v and emails %+v before any worker ran, want none", s.Jobs, s.Emails)
	}

	inTimeOrder(t, s.Timeline)
	want := []string{
		"order created",
		"stock reserve: STORY × 2",
		"task written: " + expire,
		`callback sandbox "evt_story": processed`,
		"status pending → paid",
		"task written: " + invoice,
		"task written: " + email,
	}
	if got := whats(s.Timeline); !slices.Equal(got, want) {
		t.Fatalf("timeline\n%q\nwant\n%q", got, want)
	}
	cbRef := "callback:" + strconv.FormatInt(cb.ID, 10)
	if e := event(t, s.Timeline, "order created"); !strings.Contains(e.Detail, fmt.Sprintf("1 item(s), total %d IDR", 2*price)) || !e.At.Equal(s.Order.CreatedAt) {
		t.Errorf("creation event %+v", e)
	}
	if e := event(t, s.Timeline, `callback sandbox "evt_story": processed`); e.Ref != cbRef || e.Tone != "ok" ||
		!strings.Contains(e.Detail, "tx-story") || !strings.HasSuffix(e.Detail, "deliveries: 1 processed") {
		t.Errorf("callback event %+v, want ok, ref %s, naming tx-story and its one processed delivery", e, cbRef)
	}
	if e := event(t, s.Timeline, "status pending → paid"); e.Ref != cbRef || e.Tone != "ok" || e.Detail != "by "+models.CauseCallback {
		t.Errorf("status event %+v, want ok, ref %s, by callback", e, cbRef)
	}
	if e := event(t, s.Timeline, "stock reserve: STORY × 2"); e.Ref != "product:STORY" {
		t.Errorf("movement event %+v, want ref product:STORY", e)
	}
	if e := event(t, s.Timeline, "task written: "+invoice); e.Ref != "outbox:"+invoice || !strings.HasPrefix(e.Detail, "queue "+jobs.QueueCritical) {
		t.Errorf("invoice task event %+v", e)
	}
}

// The payment's later effects join the story: after the invoice is issued
// and the confirmation email sent, the order has its invoice and email
// row, and the timeline, still in time order, ends with "invoice … issued"
// then "email order_paid:…: sent", each once.
func TestOrderStoryEndsWithInvoiceAndEmail(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "AFTER", price, 3)
	o := w.order("AFTER", 1)
	w.mustDeliver("evt_after", o.ID, "tx-after", models.EventPaid, price, models.OrderPaid)
	var inv *models.Invoice
	err := w.db.Transaction(func(tx *gorm.DB) error {
		var err error
		inv, _, err = invoices.IssueTx(tx, o.ID, time.Now())
		return err
	})
	if err != nil || inv == nil {
		t.Fatalf("issue the invoice: %+v, %v", inv, err)
	}
	w.sendEmail(o.ID, &sender{})

	s := w.read(o.ID)
	if s.Order.Invoice == nil || s.Order.Invoice.Number != inv.Number {
		t.Errorf("invoice %+v, want %s", s.Order.Invoice, inv.Number)
	}
	if len(s.Emails) != 1 || s.Emails[0].Status != models.EmailSent || s.Emails[0].SentAt == nil {
		t.Errorf("emails %+v, want the confirmation, sent", s.Emails)
	}
	inTimeOrder(t, s.Timeline)
	got := whats(s.Timeline)
	key := mail.Key(mail.OrderPaid, o.ID)
	tail := []string{"invoice " + inv.Number + " issued", "email " + key + ": sent"}
	if len(got) < 2 || !slices.Equal(got[len(got)-2:], tail) {
		t.Errorf("timeline %q does not end with %q", got, tail)
	}
	if e := event(t, s.Timeline, "email "+key+": sent"); e.Tone != "ok" || !e.At.Equal(*s.Emails[0].SentAt) ||
		!strings.HasPrefix(e.Detail, "to buyer@example.com") || !strings.HasSuffix(e.Detail, "1 attempt(s)") {
		t.Errorf("email event %+v, want ok, at its sending, to buyer@example.com after 1 attempt", e)
	}
	event(t, s.Timeline, "invoice "+inv.Number+" issued")
	event(t, s.Timeline, "status pending → paid")
}

// A paid event delivered three times is one callback with one processed
// and two duplicate deliveries, one pending → paid transition and one
// invoice and one email task: the story shows that it happened once.
func TestOrderStoryShowsRepeatedDeliveriesOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "AGAIN", price, 3)
	o := w.order("AGAIN", 1)
	w.mustDeliver("evt_again", o.ID, "tx-again", models.EventPaid, price, models.OrderPaid)
	for range 2 {
		if out := w.deliver("evt_again", o.ID, "tx-again", models.EventPaid, price); out.Result != models.ResultDuplicate {
			t.Fatalf("repeated delivery: %+v, want duplicate", out)
		}
	}
	w.closePay() // writes the duplicates' delivery rows

	s := w.read(o.ID)
	if len(s.Callbacks) != 1 {
		t.Fatalf("callbacks %+v, want one", s.Callbacks)
	}
	var outcomes []string
	for _, d := range s.Deliveries[s.Callbacks[0].ID] {
		outcomes = append(outcomes, d.Outcome)
	}
	if want := []string{models.OutcomeProcessed, models.OutcomeDuplicate, models.OutcomeDuplicate}; !slices.Equal(outcomes, want) {
		t.Errorf("deliveries %q, want %q", outcomes, want)
	}
	if len(s.Transitions) != 1 || len(s.Outbox) != 3 || len(s.Movements) != 1 {
		t.Errorf("%d transitions, %d outbox rows, %d movements; want 1, 3 (expiry, invoice, email), 1", len(s.Transitions), len(s.Outbox), len(s.Movements))
	}
	inTimeOrder(t, s.Timeline)
	e := event(t, s.Timeline, `callback sandbox "evt_again": processed`)
	if !strings.HasSuffix(e.Detail, "deliveries: 1 processed, 2 duplicate") {
		t.Errorf("callback event detail %q, want it to count 1 processed and 2 duplicate deliveries", e.Detail)
	}
	event(t, s.Timeline, "status pending → paid")
}

// The story of a failed order has the pending → failed change (tone bad)
// after the callback, and the stock's release after its reservation.
func TestOrderStoryOfAFailedPayment(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "FAIL", price, 3)
	o := w.order("FAIL", 2)
	w.mustDeliver("evt_fail", o.ID, "tx-fail", models.EventFailed, 0, models.OrderFailed)
	s := w.read(o.ID)
	inTimeOrder(t, s.Timeline)
	want := []string{"order created", "stock reserve: FAIL × 2", `callback sandbox "evt_fail": processed`, "status pending → failed", "stock release: FAIL × 2"}
	got := whats(s.Timeline)
	at := 0
	for _, line := range got {
		if at < len(want) && line == want[at] {
			at++
		}
	}
	if at != len(want) {
		t.Errorf("timeline %q lacks, in order, %q", got, want[at:])
	}
	if e := event(t, s.Timeline, "status pending → failed"); e.Tone != "bad" {
		t.Errorf("failure event %+v, want tone bad", e)
	}
	for _, line := range got {
		if strings.HasPrefix(line, "task written: "+jobs.TaskInvoiceGenerate) || strings.HasPrefix(line, "task written: "+jobs.TaskEmailSend) {
			t.Errorf("a failed order's timeline has %q", line)
		}
	}
}

// An order that does not exist is not_found, whether its id is well
// formed (a fresh order id, the id of an order of another database) or
// not an order id at all.
func TestOrderOfAnUnknownIDIsNotFound(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "REAL", price, 3)
	w.order("REAL", 1) // the database is not empty
	for _, id := range []string{models.NewOrderID(time.Now()), "", "nope", "ORD-", "ORD-not-a-ulid", "'; DROP TABLE orders; --"} {
		s, err := w.reader.Order(context.Background(), id)
		if models.ErrorCode(err) != models.ENotFound || s != nil {
			t.Errorf("story of %q: %+v, %v; want not_found", id, s, err)
		}
	}
}

// ConfirmationEmail is "" for an order not paid yet, still "" for a paid
// one whose confirmation is written but pending — even after it was
// handed to the mail server, until the row says sent — and "sent" once
// the row says sent. Another order's sent email does not count. An email
// that went to the log only (no SMTP_URL) is "logged", never "sent".
func TestConfirmationEmailFollowsTheEmailRow(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	testenv.MustCreateProduct(t, w.db, "MAIL", price, 5)
	o := w.order("MAIL", 1)
	other := w.order("MAIL", 1)
	logged := w.order("MAIL", 1)
	state := func(id string) string {
		t.Helper()
		s, err := w.reader.ConfirmationEmail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := state(o.ID); s != "" {
		t.Errorf("an unpaid order's email is %q", s)
	}
	w.mustDeliver("evt_mail", o.ID, "tx-mail", models.EventPaid, price, models.OrderPaid)
	w.mustDeliver("evt_other", other.ID, "tx-other", models.EventPaid, price, models.OrderPaid)
	w.mustDeliver("evt_logged", logged.ID, "tx-logged", models.EventPaid, price, models.OrderPaid)
	w.sendEmail(other.ID, &sender{})
	if s := state(o.ID); s != "" {
		t.Errorf("another order's sent email makes this one's %q", s)
	}
	e, err := mail.OrderPaidIntent(ctx, w.db, o.ID)
	if err != nil || e == nil {
		t.Fatalf("intent: %+v, %v", e, err)
	}
	if s := state(o.ID); s != "" {
		t.Errorf("a pending email row is %q", s)
	}
	mailer := &sender{}
	if err := mail.Deliver(ctx, w.db, mailer, "shop@example.com", e); err != nil || len(mailer.sent) != 1 {
		t.Fatalf("deliver: %v, %d message(s)", err, len(mailer.sent))
	}
	if s := state(o.ID); s != "" {
		t.Errorf("an email handed to the server but not marked sent is %q", s)
	}
	if ok, err := mail.MarkSentTx(w.db, e.Key, time.Now(), false); err != nil || !ok {
		t.Fatalf("mark sent: %v, %v", ok, err)
	}
	if s := state(o.ID); s != story.EmailSent {
		t.Errorf("the email row says sent, ConfirmationEmail says %q", s)
	}
	if s := state(other.ID); s != story.EmailSent {
		t.Errorf("the other order's email was sent, ConfirmationEmail says %q", s)
	}
	w.sendEmail(logged.ID, mail.LogMailer{Log: testenv.Logger(t)})
	if s := state(logged.ID); s != story.EmailLogged {
		t.Errorf("an email written to the log only is %q, want %q", s, story.EmailLogged)
	}
}

// Callback tells what one paid callback was and caused: its delivery, its
// one pending → paid transition, the payment it names, the invoice and
// email tasks (not the expiry task, which the order's creation wrote),
// and no stock movement, since paying a pending order moves none.
func TestCallbackOfAPayment(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "CB", price, 3)
	o := w.order("CB", 1)
	w.mustDeliver("evt_cb", o.ID, "tx-cb", models.EventPaid, price, models.OrderPaid)
	id := w.read(o.ID).Callbacks[0].ID
	c, err := w.reader.Callback(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Callback.ID != id || c.Callback.IdempotencyKey != "evt_cb" || c.Callback.OrderID != o.ID {
		t.Errorf("callback %+v, want evt_cb of %s", c.Callback, o.ID)
	}
	if len(c.Deliveries) != 1 || c.Deliveries[0].Outcome != models.OutcomeProcessed || c.Deliveries[0].RequestID != "req-evt_cb" {
		t.Errorf("deliveries %+v, want one processed, with its request id", c.Deliveries)
	}
	if len(c.Transitions) != 1 || c.Transitions[0].ToStatus != models.OrderPaid {
		t.Errorf("transitions %+v, want one to paid", c.Transitions)
	}
	if c.Payment == nil || c.Payment.ProviderReference != "tx-cb" || c.Payment.Status != models.PaymentSucceeded || c.Payment.OrderID != o.ID {
		t.Errorf("payment %+v, want tx-cb succeeded", c.Payment)
	}
	var tasks []string
	for _, m := range c.Outbox {
		tasks = append(tasks, m.TaskID)
	}
	if want := []string{"invoice:generate:" + o.ID, "email:send:order_paid:" + o.ID}; !slices.Equal(tasks, want) {
		t.Errorf("outbox %q, want the invoice and email tasks %q", tasks, want)
	}
	if len(c.Movements) != 0 || len(c.Jobs) != 0 {
		t.Errorf("movements %+v, jobs %+v; want none", c.Movements, c.Jobs)
	}
}

// Callback of a failure that released the stock shows that release, the
// pending → failed change and no tasks; a callback id that does not exist
// is not_found.
func TestCallbackOfAFailureAndOfNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "CBF", price, 3)
	o := w.order("CBF", 2)
	w.mustDeliver("evt_cbf", o.ID, "tx-cbf", models.EventFailed, 0, models.OrderFailed)
	id := w.read(o.ID).Callbacks[0].ID
	c, err := w.reader.Callback(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Transitions) != 1 || c.Transitions[0].ToStatus != models.OrderFailed {
		t.Errorf("transitions %+v, want one to failed", c.Transitions)
	}
	if len(c.Movements) != 1 || c.Movements[0].Kind != models.MovementRelease || c.Movements[0].Qty != 2 {
		t.Errorf("movements %+v, want the release of 2", c.Movements)
	}
	if len(c.Outbox) != 0 {
		t.Errorf("outbox %+v, want no tasks", c.Outbox)
	}
	for _, missing := range []int64{id + 1000, 0, -1} {
		if c, err := w.reader.Callback(context.Background(), missing); models.ErrorCode(err) != models.ENotFound || c != nil {
			t.Errorf("callback %d: %+v, %v; want not_found", missing, c, err)
		}
	}
}

// An order's story shows the calls Sekali made to a gateway for it: the
// row, and a timeline line with its phase, key, attempts and object.
func TestOrderStoryShowsGatewayRequests(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "ASK", price, 3)
	o := w.order("ASK", 1)
	done := time.Now()
	if err := w.db.Create(&models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: o.ID, Provider: "acmepay",
		IdempotencyKey: o.ID, Amount: o.TotalAmount, Currency: o.Currency, Phase: models.GatewayDone, Attempts: 2,
		ProviderObjectID: "cs_test_1", RedirectURL: "https://checkout.example/cs_test_1", DoneAt: &done}).Error; err != nil {
		t.Fatal(err)
	}
	s := w.read(o.ID)
	if len(s.GatewayRequests) != 1 || s.GatewayRequests[0].ProviderObjectID != "cs_test_1" {
		t.Fatalf("gateway requests %+v, want the one row", s.GatewayRequests)
	}
	e := event(t, s.Timeline, "asked acmepay: create_payment, done")
	if e.Tone != "ok" || !strings.Contains(e.Detail, "2 attempt(s)") || !strings.Contains(e.Detail, "object cs_test_1") || !strings.Contains(e.Detail, "key "+o.ID) {
		t.Errorf("event %+v, want ok with the key, the attempts and the object", e)
	}
}

// A refund asked of the gateway is in the story with its own job: the
// refund:send task in the outbox and its job row are the order's too,
// and the timeline says how much, of whom, by whom and why.
func TestOrderStoryShowsARefundAndItsJob(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "RFS", price, 3)
	o := w.order("RFS", 1)
	w.mustDeliver("evt_rfs", o.ID, "tx-rfs", models.EventPaid, price, models.OrderPaid)
	var p models.Payment
	if err := w.db.Take(&p, "order_id = ?", o.ID).Error; err != nil {
		t.Fatal(err)
	}
	r := models.GatewayRequest{Kind: models.GatewayRefund, OrderID: o.ID, Provider: "sandbox", PaymentID: &p.ID,
		IdempotencyKey: o.ID + "-R1", Amount: 5000, Currency: o.Currency, Phase: models.GatewaySent, Attempts: 1,
		Reason: "a broken cup", RequestedBy: "admin@example.com"}
	if err := w.db.Create(&r).Error; err != nil {
		t.Fatal(err)
	}
	task := jobs.Tasks{}.Refund(r.ID, o.ID, "req-1", time.Now())
	if err := w.db.Create(&task).Error; err != nil {
		t.Fatal(err)
	}
	if err := w.db.Create(&models.JobExecution{IdempotencyKey: task.TaskID, QueueName: task.Queue, ExternalJobID: task.TaskID, BusinessKey: o.ID,
		Status: models.JobFailed, Attempts: 1, StartedAt: time.Now()}).Error; err != nil {
		t.Fatal(err)
	}
	s := w.read(o.ID)
	var outbox, job bool
	for _, m := range s.Outbox {
		outbox = outbox || m.TaskID == task.TaskID
	}
	for _, j := range s.Jobs {
		job = job || j.IdempotencyKey == task.TaskID
	}
	if !outbox || !job {
		t.Errorf("the refund's task in the outbox: %v, its job: %v; want both in the order's story", outbox, job)
	}
	e := event(t, s.Timeline, "refund of 5000 IDR asked of sandbox: sent")
	if e.Tone != "warn" || !strings.Contains(e.Detail, "by admin@example.com: a broken cup") {
		t.Errorf("event %+v, want the admin and the reason", e)
	}
}

// A refunded event found stale tells of Sekali's own refund only when
// that order asked that gateway for that amount and the call went out:
// the callbacks list reads a page of callbacks of many orders at once,
// and another order's refund of the same amount is not this one's.
func TestOwnRefundsMatchTheOrdersOwnCalls(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	testenv.MustCreateProduct(t, w.db, "OWN", price, 5)
	asked, other := w.order("OWN", 1), w.order("OWN", 1)
	planned := w.order("OWN", 1)
	paymentOf := func(o *models.Order) *int64 {
		w.mustDeliver("evt-own-"+o.ID, o.ID, "ch-own-"+o.ID, models.EventPaid, price, models.OrderPaid)
		var p models.Payment
		if err := w.db.Take(&p, "order_id = ?", o.ID).Error; err != nil {
			t.Fatal(err)
		}
		return &p.ID
	}
	for _, r := range []models.GatewayRequest{
		{OrderID: asked.ID, PaymentID: paymentOf(asked), Phase: models.GatewayDone, IdempotencyKey: "refund-own-1", ProviderObjectID: "rf_1", DoneAt: new(time.Now())},
		{OrderID: planned.ID, PaymentID: paymentOf(planned), Phase: models.GatewayPlanned, IdempotencyKey: "refund-own-2"},
	} {
		r.Kind, r.Provider, r.Amount, r.Currency = models.GatewayRefund, sandbox.Name, price, asked.Currency
		if err := w.db.Create(&r).Error; err != nil {
			t.Fatal(err)
		}
	}
	callback := func(id int64, orderID string, ev models.PaymentEvent, result string, amount int64) models.PaymentCallback {
		return models.PaymentCallback{ID: id, OrderID: orderID, Provider: sandbox.Name, EventStatus: ev, Result: result,
			Amount: amount, Currency: asked.Currency}
	}
	cbs := []models.PaymentCallback{
		callback(1, asked.ID, models.EventRefunded, models.ResultStale, price),     // ours
		callback(2, other.ID, models.EventRefunded, models.ResultStale, price),     // another order's
		callback(3, asked.ID, models.EventRefunded, models.ResultProcessed, price), // it changed something
		callback(4, asked.ID, models.EventRefunded, models.ResultStale, price-1),   // another amount
		callback(5, planned.ID, models.EventRefunded, models.ResultStale, price),   // the call never went out
		callback(6, asked.ID, models.EventPaid, models.ResultStale, price),         // not a refund
	}
	own, err := w.reader.OwnRefunds(context.Background(), cbs)
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != 1 || !own[1] {
		t.Errorf("own refunds %v, want callback 1 only", own)
	}
}
