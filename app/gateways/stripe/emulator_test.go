package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/web/sandboxgw"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// The Emulator, served by the sandbox gateway as Sekali's settings
// point at it, with the sandbox's fault switches: the calls as stripe-go
// makes them, and as the page opener and the refunder make them.

const emulatorKey = "sk_test_sandboxgw_0123456789"

// stripeEmulator serves a sandbox gateway that emulates Stripe's API to
// emulatorKey, and returns it, its emulation, its address and a
// stripe-go client pointed at it that makes no retries of its own (the
// tests are the retries).
func stripeEmulator(t *testing.T) (*sandboxgw.Sandbox, *stripe.Emulator, string, *stripego.Client) {
	t.Helper()
	g := sandboxgwtest.New(t, "")
	em := stripe.NewEmulator(emulatorKey)
	g.Emulate(em)
	base := sandboxgwtest.Serve(t, g)
	return g, em, base, stripeClient(t, base, emulatorKey)
}

// stripeClient is stripe-go pointed at the emulation, as Sekali points
// it (stripe.NewAPIClient: no retries of its own; the tests are the
// retries).
func stripeClient(t *testing.T, serverURL, key string) *stripego.Client {
	t.Helper()
	sc, err := stripe.NewAPIClient(key, serverURL+stripe.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// sessionParams asks for a Checkout Session of an order, as Sekali will.
func sessionParams(orderID string, amount int64, key string) *stripego.CheckoutSessionCreateParams {
	p := &stripego.CheckoutSessionCreateParams{
		Mode:              stripego.String(string(stripego.CheckoutSessionModePayment)),
		SuccessURL:        stripego.String("https://shop.example/orders/" + orderID + "?session_id={CHECKOUT_SESSION_ID}"),
		CancelURL:         stripego.String("https://shop.example/orders/" + orderID),
		ClientReferenceID: stripego.String(orderID),
		Metadata:          map[string]string{"order_id": orderID},
		PaymentIntentData: &stripego.CheckoutSessionCreatePaymentIntentDataParams{Metadata: map[string]string{"order_id": orderID}},
		LineItems: []*stripego.CheckoutSessionCreateLineItemParams{{
			Quantity: stripego.Int64(1),
			PriceData: &stripego.CheckoutSessionCreateLineItemPriceDataParams{
				Currency: stripego.String("idr"), UnitAmount: stripego.Int64(amount),
				ProductData: &stripego.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripego.String("Order " + orderID)},
			},
		}},
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// sessions lists the Checkout Sessions the gateway holds, every page.
func sessions(t *testing.T, sc *stripego.Client) []*stripego.CheckoutSession {
	t.Helper()
	var out []*stripego.CheckoutSession
	for cs, err := range sc.V1CheckoutSessions.List(t.Context(), &stripego.CheckoutSessionListParams{ListParams: stripego.ListParams{Limit: stripego.Int64(2)}}) {
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		out = append(out, cs)
	}
	return out
}

// stripeErr is the Stripe error behind err, or fails the test.
func stripeErr(t *testing.T, err error, status int, typ stripego.ErrorType) *stripego.Error {
	t.Helper()
	var se *stripego.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *stripego.Error", err)
	}
	if se.HTTPStatusCode != status || se.Type != typ {
		t.Fatalf("error %d %s %q, want %d %s", se.HTTPStatusCode, se.Type, se.Msg, status, typ)
	}
	return se
}

// The same key and parameters answer the same session, marked replayed;
// other parameters, or another endpoint, under that key are Stripe's 400
// idempotency_error. The session is in Stripe's shape, its url the
// sandbox pay page of the order, its PaymentIntent not yet created.
func TestStripeCheckoutSessionIdempotency(t *testing.T) {
	t.Parallel()
	_, _, base, sc := stripeEmulator(t)
	ctx := t.Context()
	first, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ORD-ST-1", 150000, "checkout:ORD-ST-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, "cs_") || first.Object != "checkout.session" || first.URL != base+"/sandbox/pay/ORD-ST-1?via=stripe" ||
		first.PaymentIntent != nil || first.AmountTotal != 150000 || first.Currency != "idr" || first.Metadata["order_id"] != "ORD-ST-1" ||
		first.ClientReferenceID != "ORD-ST-1" || first.Status != stripego.CheckoutSessionStatusOpen ||
		first.PaymentStatus != stripego.CheckoutSessionPaymentStatusUnpaid || first.Mode != stripego.CheckoutSessionModePayment ||
		!strings.HasPrefix(first.SuccessURL, "https://shop.example/") {
		t.Errorf("session %+v", first)
	}
	if h := first.LastResponse.Header.Get("Idempotent-Replayed"); h != "" {
		t.Errorf("the first answer is marked replayed: %q", h)
	}

	again, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ORD-ST-1", 150000, "checkout:ORD-ST-1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" ||
		again.LastResponse.IdempotencyKey != "checkout:ORD-ST-1" {
		t.Errorf("the same request again: %s, replayed %q, key %q; want %s replayed", again.ID,
			again.LastResponse.Header.Get("Idempotent-Replayed"), again.LastResponse.IdempotencyKey, first.ID)
	}

	_, err = sc.V1CheckoutSessions.Create(ctx, sessionParams("ORD-ST-1", 150001, "checkout:ORD-ST-1"))
	if se := stripeErr(t, err, http.StatusBadRequest, stripego.ErrorTypeIdempotency); !strings.Contains(se.Msg, "same parameters") {
		t.Errorf("other parameters: %q", se.Msg)
	}
	_, err = sc.V1Refunds.Create(ctx, refundParams("pi_1", 1000, "checkout:ORD-ST-1"))
	if se := stripeErr(t, err, http.StatusBadRequest, stripego.ErrorTypeIdempotency); !strings.Contains(se.Msg, "same endpoint") {
		t.Errorf("another endpoint: %q", se.Msg)
	}

	got, err := sc.V1CheckoutSessions.Retrieve(ctx, first.ID, nil)
	if err != nil || got.ID != first.ID || got.URL != first.URL {
		t.Errorf("retrieve: %+v, %v", got, err)
	}
	_, err = sc.V1CheckoutSessions.Retrieve(ctx, "cs_test_none", nil)
	stripeErr(t, err, http.StatusNotFound, stripego.ErrorTypeInvalidRequest)
	if n := len(sessions(t, sc)); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// Without a key each call acts: two sessions. stripe-go sends a key of
// its own making on every POST (a new one per call), so a caller that
// sets none gets two; so does a request without the header at all.
func TestStripeWithoutKeyCreatesTwice(t *testing.T) {
	t.Parallel()
	_, _, base, sc := stripeEmulator(t)
	a, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-2", 5000, ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-2", 5000, ""))
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"mode": {"payment"}, "metadata[order_id]": {"ORD-ST-2"}, "line_items[0][quantity]": {"1"},
		"line_items[0][price_data][currency]": {"idr"}, "line_items[0][price_data][unit_amount]": {"5000"}}
	for range 2 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+stripe.EmulatorPath+"/v1/checkout/sessions",
			strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+emulatorKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("without Idempotency-Key: %d", res.StatusCode)
		}
	}
	if a.ID == b.ID {
		t.Errorf("two calls without a key answered one session %s", a.ID)
	}
	if n := len(sessions(t, sc)); n != 4 {
		t.Errorf("%d sessions, want 4", n)
	}
}

// A wrong secret key is Stripe's 401, and creates nothing.
func TestStripeWrongKey(t *testing.T) {
	t.Parallel()
	_, _, base, sc := stripeEmulator(t)
	_, err := stripeClient(t, base, "sk_test_wrong_0123456789").V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-3", 5000, "k"))
	if se := stripeErr(t, err, http.StatusUnauthorized, stripego.ErrorTypeInvalidRequest); strings.Contains(se.Msg, "wrong_0123456") {
		t.Errorf("the error shows the key: %q", se.Msg)
	}
	if n := len(sessions(t, sc)); n != 0 {
		t.Errorf("%d sessions, want 0", n)
	}
}

// FailNext: a 500 before acting saves nothing under the key, so the
// retry with the same key acts, once.
func TestStripeFailNext(t *testing.T) {
	t.Parallel()
	g, _, _, sc := stripeEmulator(t)
	g.Faults().FailNext(1)
	_, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-4", 5000, "checkout:ORD-ST-4"))
	stripeErr(t, err, http.StatusInternalServerError, stripego.ErrorTypeAPI)
	cs, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-4", 5000, "checkout:ORD-ST-4"))
	if err != nil {
		t.Fatal(err)
	}
	if all := sessions(t, sc); len(all) != 1 || all[0].ID != cs.ID {
		t.Errorf("sessions %v, want only %s", all, cs.ID)
	}
}

// TimeOutAfterActing: the gateway creates the session and does not
// answer; the caller gives up; its retry with the same key gets the
// session the first call created, and there is only that one.
func TestStripeTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, _, _, sc := stripeEmulator(t)
	g.Faults().TimeOutAfterActing(1)
	ctx, giveUp := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ORD-ST-5", 5000, "checkout:ORD-ST-5"))
		done <- err
	}()
	// Held, not the session in the list: the session is listed while the
	// call is still saving its answer under the key, and a retry then
	// would meet the key in progress.
	testenv.Eventually(t, "the gateway created the session and holds its answer", func() bool { return g.Faults().Held() == 1 })
	created := sessions(t, sc)
	if len(created) != 1 {
		t.Fatalf("%d sessions while the answer is held, want 1", len(created))
	}
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the call answered, want no answer")
	}
	cs, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-5", 5000, "checkout:ORD-ST-5"))
	if err != nil {
		t.Fatal(err)
	}
	if cs.ID != created[0].ID || cs.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry got %s (replayed %q), want %s replayed", cs.ID, cs.LastResponse.Header.Get("Idempotent-Replayed"), created[0].ID)
	}
	if n := len(sessions(t, sc)); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// Ten calls with one key at once: one session. Each call gets it, or,
// while the first is still in progress, Stripe's 409.
func TestStripeConcurrentSameKey(t *testing.T) {
	t.Parallel()
	_, _, _, sc := stripeEmulator(t)
	const n = 10
	ids := make([]string, n)
	errs := make([]error, n)
	sandboxgwtest.AtOnce(n, func(i int) {
		cs, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-6", 5000, "checkout:ORD-ST-6"))
		if err == nil {
			ids[i] = cs.ID
		}
		errs[i] = err
	})
	all := sessions(t, sc)
	if len(all) != 1 {
		t.Fatalf("%d sessions, want 1", len(all))
	}
	for i := range n {
		if errs[i] != nil {
			stripeErr(t, errs[i], http.StatusConflict, stripego.ErrorTypeIdempotency)
		} else if ids[i] != all[0].ID {
			t.Errorf("call %d got session %s, want %s", i, ids[i], all[0].ID)
		}
	}
}

// A request whose key is still in progress is Stripe's 409, and saves
// nothing: once the first is done, the same request gets its answer.
func TestStripeKeyInProgress(t *testing.T) {
	t.Parallel()
	_, em, _, sc := stripeEmulator(t)
	begun, hold := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)                                // before the server closes, also when the test fails
	em.HoldBeginning(func() { close(begun); <-hold }) // the test's only request under a new key
	type result struct {
		cs  *stripego.CheckoutSession
		err error
	}
	first := make(chan result, 1)
	go func() {
		cs, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-8", 5000, "checkout:ORD-ST-8"))
		first <- result{cs, err}
	}()
	<-begun
	_, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-8", 5000, "checkout:ORD-ST-8"))
	if se := stripeErr(t, err, http.StatusConflict, stripego.ErrorTypeIdempotency); !strings.Contains(se.Msg, "in-progress") {
		t.Errorf("in progress: %q", se.Msg)
	}
	release()
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	again, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-8", 5000, "checkout:ORD-ST-8"))
	if err != nil || again.ID != r.cs.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("after it: %v, %v; want %s replayed", again, err, r.cs.ID)
	}
}

// stripeOpener is the Stripe opener pointed at the emulation, with the
// base URL's path (stripe.NewAPIClient puts it below stripe-go).
func stripeOpener(t *testing.T, base string) *stripe.PageOpener {
	t.Helper()
	o, err := stripe.NewPageOpener(emulatorKey, base+stripe.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The same page opened twice under one key is one Checkout Session: the
// second call is answered with the first.
func TestStripeOpenerSameKeyOneSession(t *testing.T) {
	t.Parallel()
	_, _, base, sc := stripeEmulator(t)
	o := stripeOpener(t, base)
	first, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-1", "page:ORD-OP-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ObjectID, "cs_") || first.RedirectURL != base+"/sandbox/pay/ORD-OP-1?t=tok&via=stripe" {
		t.Errorf("page %+v", first)
	}
	again, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-1", "page:ORD-OP-1"))
	if err != nil || again != first {
		t.Errorf("again: %+v, %v; want %+v", again, err, first)
	}
	all := sessions(t, sc)
	if len(all) != 1 {
		t.Fatalf("%d sessions, want 1", len(all))
	}
	cs := all[0]
	if cs.ClientReferenceID != "ORD-OP-1" || cs.Metadata["order_id"] != "ORD-OP-1" || cs.AmountTotal != 15000000 ||
		cs.Currency != "idr" || cs.CustomerEmail != "budi@example.id" || cs.SuccessURL != "https://shop.example/orders/ORD-OP-1?t=tok" {
		t.Errorf("session %+v", cs)
	}
}

// A 500 before the emulation acted is not a refusal; the repeat under the
// same key opens the one session.
func TestStripeOpenerFailNext(t *testing.T) {
	t.Parallel()
	g, _, base, sc := stripeEmulator(t)
	o := stripeOpener(t, base)
	g.Faults().FailNext(1)
	if _, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-2", "page:ORD-OP-2")); err == nil || gatewaycalls.IsRefused(err) {
		t.Fatalf("FailNext: %v, want a plain error", err)
	}
	page, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-2", "page:ORD-OP-2"))
	if err != nil {
		t.Fatal(err)
	}
	if all := sessions(t, sc); len(all) != 1 || all[0].ID != page.ObjectID {
		t.Errorf("sessions %v, want only %s", all, page.ObjectID)
	}
}

// The emulation creates the session and does not answer; the caller's
// deadline passes: not a refusal. The repeat with a fresh context gets
// the session the first call created, and there is only that one.
func TestStripeOpenerTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, _, base, sc := stripeEmulator(t)
	o := stripeOpener(t, base)
	err := sandboxgwtest.OpenLate(t, g, o, sandboxgwtest.PageOf("ORD-OP-3", "page:ORD-OP-3"))
	if err == nil || gatewaycalls.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no answer: %v, want the deadline", err)
	}
	created := sessions(t, sc)
	if len(created) != 1 {
		t.Fatalf("%d sessions, want 1", len(created))
	}
	page, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-3", "page:ORD-OP-3"))
	if err != nil || page.ObjectID != created[0].ID || page.RedirectURL != created[0].URL {
		t.Errorf("the repeat: %+v, %v; want %s", page, err, created[0].ID)
	}
	if n := len(sessions(t, sc)); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// The emulated Checkout page is on the address its API was asked at,
// and sends the customer back to the shop's return URL
// (sandboxgwtest.PageReturnsToTheShop).
func TestStripePageReturnsToTheShopsReturnURL(t *testing.T) {
	t.Parallel()
	sandboxgwtest.PageReturnsToTheShop(t, func(g *sandboxgw.Sandbox) { g.Emulate(stripe.NewEmulator(emulatorKey)) },
		func(base string) (gatewaycalls.PageOpener, error) {
			return stripe.NewPageOpener(emulatorKey, base+stripe.EmulatorPath)
		},
		"page:ORD-RET")
}
