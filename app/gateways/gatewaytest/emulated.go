package gatewaytest

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"

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

	mu       sync.Mutex
	notified []payments.Fact
}

// Emulate serves e until the test ends.
func Emulate(t *testing.T, e payments.Emulator) *Emulated {
	t.Helper()
	x := &Emulated{emulator: e}
	mux := http.NewServeMux()
	mux.Handle(e.Path()+"/", http.StripPrefix(e.Path(), e.Handler(x)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	x.Base, x.URL = srv.URL, srv.URL+e.Path()
	return x
}

// Paid tells the emulation that charge was paid amount (minor units) of
// currency, as the sandbox gateway does when it reports a payment in the
// gateway's format: what its refunds may take.
func (x *Emulated) Paid(orderID, charge string, amount int64, currency string) {
	x.emulator.Reported(payments.Fact{EventID: "evt_paid_" + charge, OrderID: orderID, TransactionID: charge,
		Status: models.EventPaid, Amount: amount, Currency: currency})
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
// order. (It does not call the emulator's Notified, which needs the
// body the gateway's sender writes: Xendit's, the one gateway these
// checks run for yet, ignores it.)
func (x *Emulated) Notify(_ string, fs ...payments.Fact) {
	x.mu.Lock()
	x.notified = append(x.notified, fs...)
	x.mu.Unlock()
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
