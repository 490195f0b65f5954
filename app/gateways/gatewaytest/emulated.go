package gatewaytest

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Emulated is a gateway's emulation of its API (payments.Emulator)
// served on a test server below its Path, as the sandbox gateway serves
// it, with a sandbox of its own (payments.Sandbox): fault switches that
// count down over the API calls, as the sandbox gateway's do; a payment
// page at /sandbox/pay/{order}; and the notifications the emulation sends
// kept, not delivered. It is an Emulation, and safe for concurrent use.
type Emulated struct {
	// Base is the server's address; URL the emulated API's, which the
	// gateway's API URL variable would name.
	Base, URL string
	emulator  payments.Emulator
	// Faults are the emulation's fault switches; their Call and
	// FailLater implement payments.Sandbox's.
	emulation.Faults

	// sender, when set, writes the gateway's notifications, whose
	// bodies the emulator is told of (EmulateSending).
	sender payments.Sender
	t      testing.TB

	mu       sync.Mutex
	notified []payments.Fact
	queue    []payments.Fact // told to the emulator next, in order
	telling  bool            // a goroutine is telling the queue
	told     sync.WaitGroup
}

// Delivered implements payments.Sandbox: its notifications are kept,
// never delivered.
func (*Emulated) Delivered(string) bool { return false }

// Emulate serves e until the test ends.
func Emulate(t *testing.T, e payments.Emulator) *Emulated {
	t.Helper()
	return EmulateSending(t, e, nil)
}

// EmulateSending is Emulate for a gateway whose emulation answers with
// the notifications the sandbox gateway sends in its format (a status
// API): sender writes them, and the emulator is told of each
// (payments.Emulator's Notified) with the body written, as the sandbox
// gateway tells it — of a payment (Paid) and of every notification the
// emulation sends (Notify). A nil sender is Emulate.
func EmulateSending(t *testing.T, e payments.Emulator, sender payments.Sender) *Emulated {
	t.Helper()
	x := &Emulated{emulator: e, sender: sender, t: t}
	// Registered before the server's Close, so run after it: Close waits
	// for the calls in flight, whose notifications are then told.
	t.Cleanup(x.told.Wait)
	mux := http.NewServeMux()
	mux.Handle(e.Path()+"/", http.StripPrefix(e.Path(), e.Handler(x)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	x.Base, x.URL = srv.URL, srv.URL+e.Path()
	return x
}

// Paid tells the emulation that charge was paid amount (minor units) of
// currency, as the sandbox gateway does when it reports a payment in the
// gateway's format: what its refunds may take. With a sender, the
// emulator is told of the payment's notification first, as the sandbox
// gateway tells it before it sends one.
func (x *Emulated) Paid(orderID, charge string, amount int64, currency string) {
	f := payments.Fact{EventID: "evt_paid_" + charge, OrderID: orderID, TransactionID: charge,
		Status: models.EventPaid, Amount: amount, Currency: currency}
	if x.sender != nil {
		x.tell(f)
	}
	x.emulator.Reported(f)
}

// tell tells the emulator of f's notification as x's sender writes it.
func (x *Emulated) tell(f payments.Fact) {
	_, body, err := payments.Notification(x.sender, f, time.Now())
	if err != nil {
		x.t.Errorf("gatewaytest: the %s notification of %+v: %v", x.sender.Provider(), f, err)
		return
	}
	x.emulator.Notified(f, body)
}

// Notified are the notifications the emulation sent so far.
func (x *Emulated) Notified() []payments.Fact {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.notified)
}

// PageOf is the payment page the emulation's pages of order lead to,
// opened with token.
func (x *Emulated) PageOf(orderID, token string) string {
	return x.Base + "/sandbox/pay/" + url.PathEscape(orderID) + "?" + url.Values{"t": {token}, "via": {x.emulator.Provider()}}.Encode()
}

// Notify implements payments.Sandbox: the notifications are kept, in
// order. With a sender, the emulator is told of each (Notified) before it
// is kept — on another goroutine, in the order they came, as the sandbox
// gateway delivers them: an emulator may notify with its own lock held
// (a refund's may), and Notified takes it.
func (x *Emulated) Notify(_ string, fs ...payments.Fact) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sender == nil {
		x.notified = append(x.notified, fs...)
		return
	}
	x.queue = append(x.queue, fs...)
	if !x.telling {
		x.telling = true
		x.told.Add(1)
		go x.tellQueue()
	}
}

// tellQueue tells the emulator of the queued notifications, oldest first,
// and keeps each, until none is left.
func (x *Emulated) tellQueue() {
	defer x.told.Done()
	for {
		x.mu.Lock()
		if len(x.queue) == 0 {
			x.telling = false
			x.mu.Unlock()
			return
		}
		f := x.queue[0]
		x.queue = x.queue[1:]
		x.mu.Unlock()
		x.tell(f)
		x.mu.Lock()
		x.notified = append(x.notified, f)
		x.mu.Unlock()
	}
}

// PayURL implements payments.Sandbox: PageOf the order a key names
// (gatewaycalls.OrderOfKey), with the token returnURL carries.
func (x *Emulated) PayURL(_ *http.Request, orderID, returnURL string) string {
	token := ""
	if u, err := url.Parse(returnURL); err == nil {
		token = u.Query().Get("t")
	}
	return x.PageOf(gatewaycalls.OrderOfKey(orderID), token)
}

// Tell sends the request sender writes to tell the sandbox gateway at
// base of f (payments.Teller), as the replayer does before it sends f's
// notification, and returns the answer's status: 0 when there is
// nothing to tell.
func Tell(t testing.TB, base string, sender payments.Sender, f payments.Fact) int {
	t.Helper()
	teller, ok := sender.(payments.Teller)
	if !ok {
		t.Fatalf("the %s sender tells nothing", sender.Provider())
	}
	body, err := sender.Body(f)
	if err != nil {
		t.Fatal(err)
	}
	req, err := teller.Tell(f, body)
	if err != nil {
		t.Fatal(err)
	}
	if req == nil {
		return 0
	}
	if req.URL, err = url.Parse(base + req.URL.String()); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
