// Package sandboxgw is a pretend payment gateway for trying Sekali in a
// browser: a hosted payment page, like Midtrans Snap, Xendit Invoice or
// Stripe Checkout, that sends real, signed callbacks over HTTP to
// Sekali's own /callbacks/sandbox — once, or as often and as strangely as
// QA asks: many copies at once, a conflicting body under the same event
// id, a failure after the payment. It retries a non-2xx answer as a
// gateway would (on a shortened schedule) and lists every delivery live.
//
// It is for development and QA only, never for production: it is mounted
// only when SANDBOX_GATEWAY=on, and a fork removes it by deleting this
// package and the lines in cmd/sekali/serve.go that build it.
package sandboxgw

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	stripegw "github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/outbound"
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

// Gateway is the sandbox payment gateway.
type Gateway struct {
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
	deliveries map[string][]Delivery    // by order id, oldest first
	last       map[string]payments.Fact // by order id: the latest sandbox event, for the status endpoint
	orderIDs   []string                 // in the order their first delivery came, for eviction
	// midtrans is what its status API answers (midtrans.go): the signed
	// notification of each transaction id, and of each order id its
	// latest; midtransOrder lists the pairs, oldest first, for eviction.
	midtrans      map[string][]byte
	midtransOrder []string
	midtransAPI   midtransAPI    // its Snap and refund calls (midtransapi.go)
	stripe        stripeAPI      // its API (stripeapi.go), once SpeakStripeAPI is told the key
	xendit        xenditAPI      // its invoice API (xenditapi.go), once SpeakXenditAPI is told the key
	faults        Faults         // of the emulated APIs
	refunds       sandboxRefunds // of its own charges (refunds.go)
	wg            sync.WaitGroup
	stop          chan struct{} // closed by Close: no more retries
	stopOnce      sync.Once
}

// Delivery is one HTTP delivery the gateway made.
type Delivery struct {
	At      time.Time
	EventID string // for Midtrans, which has none, its key: transaction:status
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
func New(orders orderOpener, key []byte, callbackURL string, log *slog.Logger) *Gateway {
	g := &Gateway{
		orders: orders, callbackURL: callbackURL, log: log, now: time.Now,
		client: &http.Client{Timeout: 10 * time.Second}, senders: map[string]payments.Sender{},
		deliveries: map[string][]Delivery{}, last: map[string]payments.Fact{}, midtrans: map[string][]byte{}, Retries: slices.Clone(retrySchedule),
		stop: make(chan struct{}),
	}
	g.Speak(sandbox.NewSender(key))
	return g
}

// Speak lets the QA panel send callbacks in another gateway's format, to
// that gateway's endpoint, signed with the secret Sekali checks them with.
func (g *Gateway) Speak(s payments.Sender) {
	if _, ok := g.senders[s.Provider()]; !ok {
		g.formats = append(g.formats, s.Provider())
	}
	g.senders[s.Provider()] = s
}

// Formats lists the providers whose format the gateway speaks.
func (g *Gateway) Formats() []string { return slices.Clone(g.formats) }

// Close stops the retries and waits for the deliveries in flight: a
// server that stops does not wait out the retry schedule of deliveries
// it can no longer answer.
func (g *Gateway) Close() {
	g.stopOnce.Do(func() { close(g.stop) })
	g.wg.Wait()
}

// Mount registers the gateway's pages under /sandbox, each with mw (per
// route, so that a known path asked with another method is a 405).
func (g *Gateway) Mount(e *echo.Echo, mw ...echo.MiddlewareFunc) {
	e.GET("/sandbox/pay/:id", g.page, mw...)
	e.POST("/sandbox/pay/:id", g.pay, mw...)
	e.GET("/sandbox/status/:id", g.status, mw...)
	e.GET(midtrans.SandboxAPIPath+"/v2/:id/status", g.midtransStatus, mw...)
	e.PUT(midtrans.SandboxAPIPath+"/v2/:id/status", g.midtransSetStatus, mw...)
	g.mountMidtrans(e, mw...)
	g.mountStripe(e, mw...)
	g.mountXendit(e, mw...)
}

// status is GET /sandbox/status/:id, the gateway's status API: the latest
// event it sent for the order, for Sekali's poller when a notification
// never came (as Midtrans's /v2/{order_id}/status is). 404 when it sent
// none. Like a real gateway's status API it answers only the merchant —
// the sandbox secret as the basic-auth user, as Sekali's poller sends it
// — or the order's own customer, with its access token (?t=); anyone
// else gets the 404 of an order that does not exist.
func (g *Gateway) status(c echo.Context) error {
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

// PayURL is the payment page of an order.
func (g *Gateway) PayURL(orderID, token string) string { return payPath(orderID, token) }

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

// Provider implements outbound.PageOpener: with PAYMENT_GATEWAY=sandbox,
// the shop's Pay opens this gateway's page.
func (g *Gateway) Provider() string { return sandbox.Name }

// PageOrigins implements outbound.PageOpener: its page is on this server.
func (g *Gateway) PageOrigins() []string { return nil }

// OpenPage implements outbound.PageOpener. The sandbox's page is served
// here, so opening it asks nobody; the order id is its object.
func (g *Gateway) OpenPage(_ context.Context, r outbound.PageRequest) (outbound.Page, error) {
	return outbound.Page{ObjectID: r.OrderID, RedirectURL: g.PayURL(r.OrderID, tokenOf(r.ReturnURL))}, nil
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
func (g *Gateway) ParsePlan(outcome, copies, mode, provider string) (Plan, error) {
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

func newID(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Start sends the plan's deliveries for order o in the background; they
// appear in Deliveries as they are answered.
func (g *Gateway) Start(o *models.Order, p Plan) {
	tx := newID("sbx-tx-")
	amount := int64(0)
	if p.Outcome == models.EventPaid {
		amount = o.TotalAmount
	}
	fact := func(status models.PaymentEvent, amount int64) payments.Fact {
		return payments.Fact{EventID: newID("evt_sbx_"), OrderID: o.ID, TransactionID: tx, Status: status,
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
func (g *Gateway) together(orderID string, ev event, n int) {
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
func (g *Gateway) lose(orderID string, ev event) {
	g.mu.Lock()
	g.last[orderID] = ev.fact
	g.mu.Unlock()
	g.record(orderID, Delivery{At: g.now(), EventID: ev.fact.EventID, Format: ev.format, Event: string(ev.fact.Status),
		Result: "lost", Note: "never sent: Sekali's status poll finds it in the minutes before the order expires (POLL_WITHIN)"})
}

// deliver sends ev until it is answered 2xx or the retry schedule runs
// out, recording each attempt.
func (g *Gateway) deliver(orderID string, ev event, note string) {
	g.rememberMidtransEvent(ev)
	if ev.format == sandbox.Name { // the status endpoint answers in the sandbox format
		g.mu.Lock()
		g.last[orderID] = ev.fact
		g.mu.Unlock()
	}
	g.learn(ev)
	id := ev.fact.EventID
	if ev.format == midtrans.Name {
		id = midtrans.Key(ev.fact) // it sends no event id
	}
	for attempt := 1; ; attempt++ {
		status, result := g.send(ev)
		d := Delivery{At: g.now(), EventID: id, Format: ev.format, Event: string(ev.fact.Status), Attempt: attempt,
			Status: status, Result: result, Note: note}
		retry := status < 200 || status > 299
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

// rememberMidtransEvent makes a Midtrans notification the state its
// status API answers with, from now on.
func (g *Gateway) rememberMidtransEvent(ev event) {
	if ev.format != midtrans.Name || ev.changed {
		return
	}
	if _, body, err := payments.Notification(g.senders[ev.format], ev.fact, g.now()); err == nil {
		var n midtrans.Notification
		json.Unmarshal(body, &n)
		g.rememberMidtrans(n, body)
	}
}

// learn keeps what a payment the gateway reports tells its emulated
// Stripe and Xendit APIs: the charge their refunds may refund, and its
// amount. (Midtrans's status API keeps the notification itself.)
func (g *Gateway) learn(ev event) {
	f := ev.fact
	if ev.changed || f.Status != models.EventPaid {
		return
	}
	switch ev.format {
	case stripegw.Name:
		if amount, ok := stripegw.Amount(f.Amount, f.Currency); ok {
			g.stripe.paid(f.TransactionID, amount, f.Currency)
		}
	case xendit.Name:
		g.xendit.paid(f.TransactionID, f.Amount, f.Currency)
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// send makes one signed HTTP delivery and returns its status and result.
func (g *Gateway) send(ev event) (int, string) {
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

func (g *Gateway) record(orderID string, d Delivery) {
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

// Deliveries returns the deliveries made for an order, newest first.
func (g *Gateway) Deliveries(orderID string) []Delivery {
	g.mu.Lock()
	defer g.mu.Unlock()
	ds := g.deliveries[orderID]
	out := make([]Delivery, len(ds))
	for i, d := range ds {
		out[len(ds)-1-i] = d
	}
	return out
}
