// Package sandboxgw is a pretend payment gateway for trying Sekali in a
// browser: a hosted payment page, like a real gateway's checkout, that
// sends real, signed callbacks over HTTP to
// Sekali's own /callbacks/sandbox — once, or as often and as strangely as
// QA asks: many copies at once, a conflicting body under the same event
// id, a failure after the payment. It retries a non-2xx answer as a
// gateway would (on a shortened schedule) and lists every delivery live.
// It also serves the emulation of each gateway's API that the gateway's
// package offers (payments.Emulator, Emulate), with its fault switches,
// its notifications and its pay page; it imports no gateway package but
// the sandbox's and the registry.
//
// It is for development and QA only, never for production: it is mounted
// only when SANDBOX_GATEWAY=on, and a fork removes it by deleting this
// package and the lines in cmd/sekali/serve.go that build it.
package sandboxgw

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Limits of one request to the gateway.
const (
	MaxCopies = 100
	// keptDeliveries bounds the deliveries listed per order; keptOrders
	// the orders whose deliveries are kept (in memory: this is a sandbox).
	keptDeliveries = 1000
	keptOrders     = 1000
)

// retrySchedule is when a delivery answered with a non-2xx (or not at
// all) is tried again: a real gateway's exponential schedule, shortened
// from hours to seconds.
var retrySchedule = []time.Duration{time.Second, 3 * time.Second}

// Modes of the QA panel.
const (
	ModeSequential = "sequential" // the copies one after another
	ModeConcurrent = "concurrent" // the copies all at once
	ModeConflict   = "conflict"   // the first copy, then the others with a changed body under the same event id
	ModeOutOfOrder = "out_of_order"
	ModeLost       = "lost" // the notification is never sent: Sekali's status poll has to find the payment
)

// Modes lists the modes, for the form.
var Modes = []string{ModeSequential, ModeConcurrent, ModeConflict, ModeOutOfOrder, ModeLost}

// Outcomes lists the payment statuses the gateway can report: a payment,
// a declined attempt (the customer may try again), the payment cancelled
// (it ends), the payment expired.
var Outcomes = []string{string(models.EventPaid), string(models.EventDeclined), string(models.EventFailed), string(models.EventExpired)}

// orderOpener is what the gateway needs of the orders service: the order,
// if the token opens it.
type orderOpener interface {
	Open(ctx context.Context, id, token string, admin bool) (*models.Order, error)
}

// Sandbox is the sandbox payment gateway (named apart from payments.Gateway,
// a configured real gateway's parts).
type Sandbox struct {
	orders      orderOpener
	senders     map[string]payments.Sender // the formats it speaks, by provider
	formats     []string                   // their providers, sandbox first
	callbackURL string                     // base URL of the Sekali that receives the callbacks
	client      *http.Client
	log         *slog.Logger
	now         func() time.Time

	// Retries is when a non-2xx delivery is tried again; retrySchedule by
	// default.
	Retries []time.Duration

	mu         sync.Mutex
	deliveries map[string][]Delivery        // by order id, oldest first
	last       map[string]payments.Fact     // by order id: the latest sandbox event, for the status endpoint
	orderIDs   []string                     // in the order their first delivery came, for eviction
	emulators  map[string]payments.Emulator // the gateways' emulations of their APIs, by provider (Emulate)
	faults     emulation.Faults             // of the emulated APIs and its refunds
	refunds    sandboxRefunds               // of its own charges (refunds.go)
	returns    returnURLs                   // where the emulated pages send the customer back (pages.go)
	delivered  *emulation.Kept[struct{}]    // the event ids Sekali answered 2xx
	wg         sync.WaitGroup
	stop       chan struct{} // closed by Close: no more retries
	stopOnce   sync.Once

	// Misstate makes its refunds' answers state another amount or
	// currency than they were made with (MisstateNext): a gateway whose
	// answer is not what was asked.
	emulation.Misstate
}

// Delivery is one HTTP delivery the gateway made.
type Delivery struct {
	At      time.Time
	EventID string // for a format without event ids (some gateways'), the key Sekali derives
	Format  string // the provider whose format it was sent in
	Event   string // paid, failed, expired
	Attempt int    // 1, then each retry
	Status  int    // 0: no answer
	Result  string // the answer's result member, or the error
	Note    string // "conflicting body", "retry in 3s", …
}

// New returns the gateway. callbackURL is where Sekali listens
// (SANDBOX_CALLBACK_URL); key signs the deliveries (the first
// SANDBOX_WEBHOOK_SECRET). It speaks the sandbox format; Speak adds more.
func New(orders orderOpener, key []byte, callbackURL string, log *slog.Logger) *Sandbox {
	g := &Sandbox{
		orders: orders, callbackURL: callbackURL, log: log, now: time.Now,
		client: &http.Client{Timeout: 10 * time.Second}, senders: map[string]payments.Sender{},
		deliveries: map[string][]Delivery{}, last: map[string]payments.Fact{}, Retries: slices.Clone(retrySchedule),
		emulators: map[string]payments.Emulator{}, delivered: emulation.NewKept[struct{}](keptOrders * 10),
		stop: make(chan struct{}),
	}
	g.Speak(sandbox.NewSender(key))
	return g
}

// Speak lets the QA panel send callbacks in another gateway's format, to
// that gateway's endpoint, signed with the secret Sekali checks them with.
func (g *Sandbox) Speak(s payments.Sender) {
	if _, ok := g.senders[s.Provider()]; !ok {
		g.formats = append(g.formats, s.Provider())
	}
	g.senders[s.Provider()] = s
}

// Emulate makes the gateway answer as another gateway's API, at
// em.Path(), with the fault switches, its notifications and its pay
// page (sandboxFor); before Mount.
func (g *Sandbox) Emulate(em payments.Emulator) { g.emulators[em.Provider()] = em }

// Formats lists the providers whose format the gateway speaks.
func (g *Sandbox) Formats() []string { return slices.Clone(g.formats) }

// Close stops the retries and waits for the deliveries in flight: a
// server that stops does not wait out the retry schedule of deliveries
// it can no longer answer.
func (g *Sandbox) Close() {
	g.stopOnce.Do(func() { close(g.stop) })
	g.wg.Wait()
}

// Mount registers the gateway's pages under /sandbox, each with mw (per
// route, so that a known path asked with another method is a 405).
func (g *Sandbox) Mount(e *echo.Echo, mw ...echo.MiddlewareFunc) {
	e.GET("/sandbox/pay/:id", g.page, mw...)
	e.POST("/sandbox/pay/:id", g.pay, mw...)
	e.GET("/sandbox/status/:id", g.status, mw...)
	for _, em := range g.emulators {
		e.Any(em.Path()+"/*", echo.WrapHandler(http.StripPrefix(em.Path(), em.Handler(sandboxFor{g, em.Provider()}))), mw...)
	}
}

// status is GET /sandbox/status/:id, the gateway's status API: the latest
// event it sent for the order, for Sekali's poller when a notification
// never came (as some gateways' status APIs are). 404 when it sent
// none. Like a real gateway's status API it answers only the merchant —
// the sandbox secret as the basic-auth user, as Sekali's poller sends it
// — or the order's own customer, with its access token (?t=); anyone
// else gets the 404 of an order that does not exist.
func (g *Sandbox) status(c echo.Context) error {
	if !g.sandboxSender().Authorizes(c.Request()) {
		if _, err := g.orders.Open(c.Request().Context(), c.Param("id"), c.QueryParam("t"), false); err != nil {
			return c.JSON(http.StatusNotFound, map[string]string{"error": "no payment for this order"})
		}
	}
	g.mu.Lock()
	f, ok := g.last[c.Param("id")]
	g.mu.Unlock()
	if !ok {
		return c.JSON(http.StatusNotFound, map[string]string{"error": "no payment for this order"})
	}
	body, err := g.senders[sandbox.Name].Body(f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"event_id": f.EventID, "body": json.RawMessage(body)})
}

func (g *Sandbox) sandboxSender() sandbox.Sender {
	s, _ := g.senders[sandbox.Name].(sandbox.Sender)
	return s
}

// PayURL is the payment page of an order.
func (g *Sandbox) PayURL(orderID, token string) string { return payPath(orderID, token) }

// payPath is the payment page of an order, with its access token when
// one is known.
func payPath(orderID, token string) string { return payPathVia(orderID, token, "") }

// payPathVia is the payment page of an order as the emulated page of
// gateway via (a Checkout Session's, a Snap transaction's, an invoice's):
// its Pay reports the payment in that gateway's format, where the gateway
// speaks it, so the order is paid through that gateway — and refunded
// through it.
func payPathVia(orderID, token, via string) string {
	q := url.Values{}
	if token != "" {
		q.Set("t", token)
	}
	if via != "" {
		q.Set("via", via)
	}
	p := "/sandbox/pay/" + url.PathEscape(orderID)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// Provider implements gatewaycalls.PageOpener: with PAYMENT_GATEWAY=sandbox,
// the shop's Pay opens this gateway's page.
func (g *Sandbox) Provider() string { return sandbox.Name }

// PageOrigins implements gatewaycalls.PageOpener: its page is on this server.
func (g *Sandbox) PageOrigins() []string { return nil }

// OpenPage implements gatewaycalls.PageOpener. The sandbox's page is served
// here, so opening it asks nobody; the order id is its object.
func (g *Sandbox) OpenPage(_ context.Context, r gatewaycalls.PageRequest) (gatewaycalls.Page, error) {
	return gatewaycalls.Page{ObjectID: r.OrderID, RedirectURL: g.PayURL(r.OrderID, tokenOf(r.ReturnURL))}, nil
}

// FindPage implements gatewaycalls.PageFinder: the sandbox's page of an
// order is always there — opening it asks nobody — so a call to open it
// whose answer was lost (a process that died before recording it) made
// it. Stored without a token, as every page is.
func (g *Sandbox) FindPage(_ context.Context, r gatewaycalls.PageRequest) (gatewaycalls.Page, bool, error) {
	return gatewaycalls.Page{ObjectID: r.OrderID, RedirectURL: g.PayURL(r.OrderID, "")}, true, nil
}

// tokenOf is the order's access token that a return URL carries (?t=):
// the sandbox's pages — its own, and those of the gateways it emulates —
// open the order with it, as the shop's order page does. A real
// gateway's page needs no token: it shows what it was sent.
func tokenOf(returnURL string) string {
	u, err := url.Parse(returnURL)
	if err != nil {
		return ""
	}
	return u.Query().Get("t")
}

// Plan is what one request to the gateway asks for.
type Plan struct {
	Outcome  models.PaymentEvent
	Copies   int
	Mode     string
	Provider string
}

// ParsePlan reads and checks a plan from the form's fields.
func (g *Sandbox) ParsePlan(outcome, copies, mode, provider string) (Plan, error) {
	p := Plan{Outcome: models.PaymentEvent(outcome), Mode: mode, Provider: provider}
	n, err := strconv.Atoi(copies)
	sender := g.senders[provider]
	switch {
	case !slices.Contains(Outcomes, outcome):
		return p, models.Errorf(models.EInvalid, "outcome must be one of %s", strings.Join(Outcomes, ", "))
	case err != nil || n < 1 || n > MaxCopies:
		return p, models.Errorf(models.EInvalid, "copies must be a whole number from 1 to %d", MaxCopies)
	case !slices.Contains(Modes, p.Mode):
		return p, models.Errorf(models.EInvalid, "mode must be one of %s", strings.Join(Modes, ", "))
	case sender == nil:
		return p, models.Errorf(models.EInvalid, "provider must be one of %s (a gateway is here when its secret is set)",
			strings.Join(g.formats, ", "))
	case p.Mode == ModeLost && provider != sandbox.Name:
		return p, models.Errorf(models.EInvalid, "lost works in the sandbox format: the status endpoint answers in it")
	}
	for _, status := range []models.PaymentEvent{p.Outcome, models.EventFailed} {
		if status == models.EventFailed && p.Mode != ModeOutOfOrder && p.Outcome != models.EventFailed {
			continue // out of order sends a failure too
		}
		if _, err := sender.Body(payments.Fact{Status: status, Currency: "IDR"}); err != nil {
			return p, models.Errorf(models.EInvalid, "%s sends no %s notification", provider, status)
		}
	}
	p.Copies = n
	return p, nil
}

// event is one notification the gateway sends: a fact in a format.
// changed marks the QA panel's conflicting copy, which says what did not
// happen: the gateway's status API does not learn it.
type event struct {
	format  string
	fact    payments.Fact
	changed bool
}

// Start sends the plan's deliveries for order o in the background; they
// appear in Deliveries as they are answered.
func (g *Sandbox) Start(o *models.Order, p Plan) {
	tx := emulation.NewID("sbx-tx-")
	amount := int64(0)
	if p.Outcome == models.EventPaid {
		amount = o.TotalAmount
	}
	fact := func(status models.PaymentEvent, amount int64) payments.Fact {
		return payments.Fact{EventID: emulation.NewID("evt_sbx_"), OrderID: o.ID, TransactionID: tx, Status: status,
			Amount: amount, Currency: o.Currency}
	}
	main := event{format: p.Provider, fact: fact(p.Outcome, amount)}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		switch p.Mode {
		case ModeSequential:
			for range p.Copies {
				g.deliver(o.ID, main, "")
			}
		case ModeConcurrent:
			g.together(o.ID, main, p.Copies)
		case ModeConflict:
			g.deliver(o.ID, main, "")
			changed := main
			changed.fact.Amount++
			changed.changed = true
			for range p.Copies - 1 {
				g.deliver(o.ID, changed, "conflicting body: same event id, amount + 1")
			}
		case ModeOutOfOrder:
			for range p.Copies {
				g.deliver(o.ID, main, "")
			}
			late := event{format: p.Provider, fact: fact(models.EventFailed, 0)}
			for range p.Copies {
				g.deliver(o.ID, late, "a failure after the payment, out of order")
			}
		case ModeLost:
			g.lose(o.ID, main)
		}
	}()
}

// together sends n copies of ev at once: released together.
func (g *Sandbox) together(orderID string, ev event, n int) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			g.deliver(orderID, ev, "")
		})
	}
	close(start)
	wg.Wait()
}

// lose records ev as the order's payment, for the status endpoint, and
// never sends it: a notification the network lost.
func (g *Sandbox) lose(orderID string, ev event) {
	g.mu.Lock()
	g.last[orderID] = ev.fact
	g.mu.Unlock()
	g.record(orderID, Delivery{At: g.now(), EventID: ev.fact.EventID, Format: ev.format, Event: string(ev.fact.Status),
		Result: "lost", Note: "never sent: Sekali's status poll finds it in the minutes before the order expires (POLL_WITHIN)"})
}

// keyed is a sender whose notifications carry no event id:
// its deliveries are listed by the key Sekali derives from the fact.
type keyed interface {
	Key(payments.Fact) string
}

// deliver sends ev until it is answered 2xx or the retry schedule runs
// out, recording each attempt.
func (g *Sandbox) deliver(orderID string, ev event, note string) {
	if ev.format == sandbox.Name { // the status endpoint answers in the sandbox format
		g.mu.Lock()
		g.last[orderID] = ev.fact
		g.mu.Unlock()
	}
	g.learn(ev)
	id := ev.fact.EventID
	if k, ok := g.senders[ev.format].(keyed); ok {
		id = k.Key(ev.fact)
	}
	if g.faults.Losing() {
		g.record(orderID, Delivery{At: g.now(), EventID: id, Format: ev.format, Event: string(ev.fact.Status),
			Result: "lost", Note: joinNote(note, "never sent (Faults.LoseNotifications): catching up finds it")})
		return
	}
	for attempt := 1; ; attempt++ {
		status, result := g.send(ev)
		d := Delivery{At: g.now(), EventID: id, Format: ev.format, Event: string(ev.fact.Status), Attempt: attempt,
			Status: status, Result: result, Note: note}
		retry := status < 200 || status > 299
		if !retry {
			g.mu.Lock()
			g.delivered.Put(ev.fact.EventID, struct{}{})
			g.mu.Unlock()
		}
		if retry && attempt <= len(g.Retries) {
			d.Note = joinNote(note, "retry in "+g.Retries[attempt-1].String())
		}
		g.record(orderID, d)
		if !retry || attempt > len(g.Retries) {
			return
		}
		select { // the gateway's own retry schedule
		case <-time.After(g.Retries[attempt-1]):
		case <-g.stop:
			return
		}
	}
}

// learn tells the emulation of the API of ev's gateway, if it runs here,
// what ev says (Notified) and, for a payment, the charge its refunds may
// refund (Reported). The QA panel's conflicting copy says what did not
// happen: nobody learns it.
func (g *Sandbox) learn(ev event) {
	f := ev.fact
	em, ok := g.emulators[ev.format]
	if !ok || ev.changed {
		return
	}
	if sender, ok := g.senders[ev.format]; ok {
		if _, body, err := payments.Notification(sender, f, g.now()); err == nil {
			em.Notified(f, body)
		}
	}
	if f.Status == models.EventPaid {
		em.Reported(f)
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// send makes one signed HTTP delivery and returns its status and result.
func (g *Sandbox) send(ev event) (int, string) {
	header, body, err := payments.Notification(g.senders[ev.format], ev.fact, g.now())
	if err != nil {
		return 0, err.Error()
	}
	req, err := http.NewRequest(http.MethodPost, g.callbackURL+"/callbacks/"+ev.format, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header = header
	res, err := g.client.Do(req)
	if err != nil {
		g.log.Warn("sandbox gateway: delivery failed", "provider", ev.format, "event_id", ev.fact.EventID, "error", err)
		return 0, "no answer: " + err.Error()
	}
	defer res.Body.Close()
	var answer struct {
		Result string `json:"result"`
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if json.Unmarshal(b, &answer) != nil || answer.Result == "" {
		answer.Result = fmt.Sprintf("(%d bytes)", len(b))
	}
	return res.StatusCode, answer.Result
}

func (g *Sandbox) record(orderID string, d Delivery) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.deliveries[orderID]; !ok {
		g.orderIDs = append(g.orderIDs, orderID)
		if len(g.orderIDs) > keptOrders {
			delete(g.deliveries, g.orderIDs[0])
			delete(g.last, g.orderIDs[0])
			g.orderIDs = g.orderIDs[1:]
		}
	}
	ds := append(g.deliveries[orderID], d)
	if len(ds) > keptDeliveries {
		ds = ds[len(ds)-keptDeliveries:]
	}
	g.deliveries[orderID] = ds
}

// Delivered says whether a notification of event id was answered 2xx.
func (g *Sandbox) Delivered(eventID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.delivered.Get(eventID)
	return ok
}

// Deliveries returns the deliveries made for an order, newest first.
func (g *Sandbox) Deliveries(orderID string) []Delivery {
	g.mu.Lock()
	defer g.mu.Unlock()
	ds := g.deliveries[orderID]
	out := make([]Delivery, len(ds))
	for i, d := range ds {
		out[len(ds)-1-i] = d
	}
	return out
}

// Faults returns the fault switches of the APIs the gateway emulates and
// of its own refunds.
func (g *Sandbox) Faults() *emulation.Faults { return &g.faults }
