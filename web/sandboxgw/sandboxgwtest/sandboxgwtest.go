// Package sandboxgwtest holds what the tests of the gateways' emulations
// (app/gateways/{name}, in their external test packages) and of the
// sandbox gateway share: a sandbox gateway served on a test server, a
// stand-in for Sekali's callbacks, deadlines that pass on cue, and a shop
// whose payments pipeline receives the gateway's notifications and whose
// refunds service asks the gateway. It names no gateway. Tests only.
package sandboxgwtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

// New is a sandbox gateway that delivers its notifications to
// callbackURL ("": nobody, at once), closed when the test ends.
func New(t testing.TB, callbackURL string) *sandboxgw.Sandbox {
	t.Helper()
	if callbackURL == "" {
		callbackURL = "http://127.0.0.1:1"
	}
	g := sandboxgw.New(nil, testenv.SandboxKey, callbackURL, testenv.Logger(t))
	t.Cleanup(g.Close)
	return g
}

// Serve mounts g on a test server, and returns its address. When the
// test ends, g is closed before the server: the deliveries in flight,
// which may ask the server (Sekali confirms some gateways'
// notifications with their status APIs), end first.
func Serve(t testing.TB, g *sandboxgw.Sandbox) string {
	t.Helper()
	e := echo.New()
	g.Mount(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	t.Cleanup(g.Close) // cleanups run last first
	return srv.URL
}

// AtOnce runs f(0), …, f(n-1) in n goroutines released together, and
// waits for them.
func AtOnce(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// Callbacks stands in for Sekali's /callbacks/{provider}: it answers
// every delivery 200 and keeps it.
type Callbacks struct {
	URL string
	mu  sync.Mutex
	got []Callback
}

// Callback is one delivery Callbacks received.
type Callback struct {
	Provider string
	Header   http.Header
	Body     []byte
}

// RecordCallbacks serves a Callbacks until the test ends.
func RecordCallbacks(t testing.TB) *Callbacks {
	t.Helper()
	c := &Callbacks{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.got = append(c.got, Callback{strings.TrimPrefix(r.URL.Path, "/callbacks/"), r.Header.Clone(), body})
		c.mu.Unlock()
		w.Write([]byte(`{"result":"processed"}`))
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Received are the deliveries so far.
func (c *Callbacks) Received() []Callback {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// Wait waits for n deliveries, and returns them.
func (c *Callbacks) Wait(t testing.TB, n int) []Callback {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d deliveries", n), func() bool { return len(c.Received()) >= n })
	return c.Received()
}

// OpenLate opens r with a deadline that passes once the gateway has
// acted and holds its answer, and returns the error.
func OpenLate(t testing.TB, g *sandboxgw.Sandbox, o gatewaycalls.PageOpener, r gatewaycalls.PageRequest) error {
	t.Helper()
	return gatewaytest.Late(t, g.Faults(), "the gateway acted and holds its answer", func(ctx context.Context) error {
		_, err := o.OpenPage(ctx, r)
		return err
	})
}

// RefundLate asks for r with a deadline that passes once the gateway
// has refunded and holds its answer, and returns the error.
func RefundLate(t testing.TB, g *sandboxgw.Sandbox, f gatewaycalls.Refunder, r gatewaycalls.RefundRequest) error {
	t.Helper()
	return gatewaytest.Late(t, g.Faults(), "the gateway refunded and holds its answer", func(ctx context.Context) error {
		_, err := f.Refund(ctx, r)
		return err
	})
}

// PageOf is the page request of order, opened under key.
func PageOf(order, key string) gatewaycalls.PageRequest {
	r := gatewaytest.PageRequest(key)
	r.OrderID, r.ReturnURL = order, "https://shop.example/orders/"+order+"?t=tok"
	return r
}

// RefundOf is the refund of amount of charge under key, at attempt.
func RefundOf(order, key, charge string, amount int64, attempt int) gatewaycalls.RefundRequest {
	return gatewaycalls.RefundRequest{OrderID: order, Key: key, Charge: charge, Amount: amount, Currency: "IDR",
		Reason: "damaged in transit", Attempt: attempt}
}

// Unknown fails the test unless err is an error that says nothing of
// whether the gateway acted: not nil, not a refusal.
func Unknown(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil || gatewaycalls.IsRefused(err) {
		t.Fatalf("%s: %v, want an error that is not a refusal", what, err)
	}
}

// Refused fails the test unless err is the gateway's refusal, with
// status.
func Refused(t testing.TB, what string, err error, status int) {
	t.Helper()
	var r *gatewaycalls.Refused
	if !errors.As(err, &r) || r.Status != status {
		t.Errorf("%s: %v, want refused with status %d", what, err, status)
	}
}

// OneOrder opens the one order it holds, whatever the token.
type OneOrder struct{ Order *models.Order }

// Open implements the sandbox gateway's orders.
func (f OneOrder) Open(context.Context, string, string, bool) (*models.Order, error) {
	return f.Order, nil
}

// PageReturnsToTheShop checks a gateway's emulated page, as opened by
// the opener open builds at the sandbox's address under key, where the
// sandbox is set up to emulate the gateway (setup): it is on the address
// its API was asked at (127.0.0.1 here), and, as a real gateway's, sends
// the customer back to the return URL the shop gave when it made the
// page — the host the customer left the shop from — not to that address:
// the "Back to the order" link, and each button, as the customer's
// payment attempt.
func PageReturnsToTheShop(t *testing.T, setup func(g *sandboxgw.Sandbox), open func(base string) (gatewaycalls.PageOpener, error), key string) {
	t.Helper()
	const shop = "http://localhost:8080/orders/ORD-RET?t=tok" // as web builds it from the customer's Host
	order := &models.Order{ID: "ORD-RET", Status: models.OrderPending, TotalAmount: 150000, Currency: "IDR"}
	g := sandboxgw.New(OneOrder{order}, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
	g.Retries = nil // its callbacks find nobody: tried once
	setup(g)
	base := Serve(t, g)
	o, err := open(base)
	if err != nil {
		t.Fatal(err)
	}
	r := PageOf("ORD-RET", key)
	r.ReturnURL = shop
	page, err := o.OpenPage(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(page.RedirectURL, base+"/sandbox/pay/") {
		t.Fatalf("the page is at %s, want the emulated API's address %s", page.RedirectURL, base)
	}
	res, err := http.Get(page.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the page: %d, %v", res.StatusCode, err)
	}
	if back, _ := doc.Find(".gateway-card a").Attr("href"); back != shop {
		t.Errorf("back to the order: %q, want %q", back, shop)
	}
	format, _ := doc.Find(`form:has(input[name=outcome][value=paid]):has(input[name=return][value=order]) input[name=provider]`).Attr("value")
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = noRedirects.PostForm(base+"/sandbox/pay/ORD-RET", url.Values{"t": {"tok"}, "outcome": {"paid"},
		"copies": {"1"}, "mode": {"sequential"}, "provider": {format}, "return": {"order"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got, want := res.Header.Get("Location"), "http://localhost:8080/orders/ORD-RET?t=tok&attempt=1"; res.StatusCode != http.StatusSeeOther || got != want {
		t.Errorf("Pay: %d to %q, want 303 to %q", res.StatusCode, got, want)
	}
}

// Must is v, or the test stops at err.
func Must[V any](v V, err error) V {
	if err != nil {
		panic(err)
	}
	return v
}
