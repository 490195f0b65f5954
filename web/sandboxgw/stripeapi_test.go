package sandboxgw_test

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
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stripe/stripe-go/v82"

	stripegw "github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
)

const stripeKey = "sk_test_sandboxgw_0123456789"

// stripeEmulator serves a gateway that speaks Stripe's API with
// stripeKey, and returns it, its address and a stripe-go client pointed
// at it that makes no retries of its own (the tests are the retries).
func stripeEmulator(t *testing.T) (*sandboxgw.Gateway, string, *stripe.Client) {
	t.Helper()
	g := sandboxgw.New(nil, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
	g.SpeakStripeAPI(stripeKey)
	base := serve(t, g)
	return g, base, stripeClient(t, base, stripeKey)
}

// atOnce runs f(0), …, f(n-1) in n goroutines released together, and
// waits for them.
func atOnce(n int, f func(i int)) {
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

// serve mounts the gateway on a test server, and returns its address.
func serve(t *testing.T, g *sandboxgw.Gateway) string {
	t.Helper()
	e := echo.New()
	g.Mount(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv.URL
}

// stripeClient is stripe-go pointed at the gateway's Stripe API, as
// Sekali points it (stripegw.NewAPIClient: no retries of its own; the
// tests are the retries).
func stripeClient(t *testing.T, serverURL, key string) *stripe.Client {
	t.Helper()
	sc, err := stripegw.NewAPIClient(key, serverURL+sandboxgw.StripeAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// sessionParams asks for a Checkout Session of an order, as Sekali will.
func sessionParams(orderID string, amount int64, key string) *stripe.CheckoutSessionCreateParams {
	p := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		SuccessURL:        stripe.String("https://shop.example/orders/" + orderID + "?session_id={CHECKOUT_SESSION_ID}"),
		CancelURL:         stripe.String("https://shop.example/orders/" + orderID),
		ClientReferenceID: stripe.String(orderID),
		Metadata:          map[string]string{"order_id": orderID},
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{Metadata: map[string]string{"order_id": orderID}},
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency: stripe.String("idr"), UnitAmount: stripe.Int64(amount),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String("Order " + orderID)},
			},
		}},
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// sessions lists the Checkout Sessions the gateway holds, every page.
func sessions(t *testing.T, sc *stripe.Client) []*stripe.CheckoutSession {
	t.Helper()
	var out []*stripe.CheckoutSession
	for cs, err := range sc.V1CheckoutSessions.List(t.Context(), &stripe.CheckoutSessionListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(2)}}) {
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		out = append(out, cs)
	}
	return out
}

// stripeErr is the Stripe error behind err, or fails the test.
func stripeErr(t *testing.T, err error, status int, typ stripe.ErrorType) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *stripe.Error", err)
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
	_, base, sc := stripeEmulator(t)
	ctx := t.Context()
	first, err := sc.V1CheckoutSessions.Create(ctx, sessionParams("ORD-ST-1", 150000, "checkout:ORD-ST-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, "cs_") || first.Object != "checkout.session" || first.URL != base+"/sandbox/pay/ORD-ST-1?via=stripe" ||
		first.PaymentIntent != nil || first.AmountTotal != 150000 || first.Currency != "idr" || first.Metadata["order_id"] != "ORD-ST-1" ||
		first.ClientReferenceID != "ORD-ST-1" || first.Status != stripe.CheckoutSessionStatusOpen ||
		first.PaymentStatus != stripe.CheckoutSessionPaymentStatusUnpaid || first.Mode != stripe.CheckoutSessionModePayment ||
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
	if se := stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency); !strings.Contains(se.Msg, "same parameters") {
		t.Errorf("other parameters: %q", se.Msg)
	}
	_, err = sc.V1Refunds.Create(ctx, refundParams("pi_1", 1000, "checkout:ORD-ST-1"))
	if se := stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency); !strings.Contains(se.Msg, "same endpoint") {
		t.Errorf("another endpoint: %q", se.Msg)
	}

	got, err := sc.V1CheckoutSessions.Retrieve(ctx, first.ID, nil)
	if err != nil || got.ID != first.ID || got.URL != first.URL {
		t.Errorf("retrieve: %+v, %v", got, err)
	}
	_, err = sc.V1CheckoutSessions.Retrieve(ctx, "cs_test_none", nil)
	stripeErr(t, err, http.StatusNotFound, stripe.ErrorTypeInvalidRequest)
	if n := len(sessions(t, sc)); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// Without a key each call acts: two sessions. stripe-go sends a key of
// its own making on every POST (a new one per call), so a caller that
// sets none gets two; so does a request without the header at all.
func TestStripeWithoutKeyCreatesTwice(t *testing.T) {
	t.Parallel()
	_, base, sc := stripeEmulator(t)
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
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+sandboxgw.StripeAPIPath+"/v1/checkout/sessions",
			strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+stripeKey)
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
	_, base, sc := stripeEmulator(t)
	_, err := stripeClient(t, base, "sk_test_wrong_0123456789").V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-3", 5000, "k"))
	if se := stripeErr(t, err, http.StatusUnauthorized, stripe.ErrorTypeInvalidRequest); strings.Contains(se.Msg, "wrong_0123456") {
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
	g, _, sc := stripeEmulator(t)
	g.Faults().FailNext(1)
	_, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-4", 5000, "checkout:ORD-ST-4"))
	stripeErr(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI)
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
	g, _, sc := stripeEmulator(t)
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
	_, _, sc := stripeEmulator(t)
	const n = 10
	ids := make([]string, n)
	errs := make([]error, n)
	atOnce(n, func(i int) {
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
			stripeErr(t, errs[i], http.StatusConflict, stripe.ErrorTypeIdempotency)
		} else if ids[i] != all[0].ID {
			t.Errorf("call %d got session %s, want %s", i, ids[i], all[0].ID)
		}
	}
}

// A request whose key is still in progress is Stripe's 409, and saves
// nothing: once the first is done, the same request gets its answer.
func TestStripeKeyInProgress(t *testing.T) {
	t.Parallel()
	g, _, sc := stripeEmulator(t)
	begun, hold := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)                                     // before the server closes, also when the test fails
	g.HoldStripeBeginning(func() { close(begun); <-hold }) // the test's only request under a new key
	type result struct {
		cs  *stripe.CheckoutSession
		err error
	}
	first := make(chan result, 1)
	go func() {
		cs, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-8", 5000, "checkout:ORD-ST-8"))
		first <- result{cs, err}
	}()
	<-begun
	_, err := sc.V1CheckoutSessions.Create(t.Context(), sessionParams("ORD-ST-8", 5000, "checkout:ORD-ST-8"))
	if se := stripeErr(t, err, http.StatusConflict, stripe.ErrorTypeIdempotency); !strings.Contains(se.Msg, "in-progress") {
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

func refundParams(pi string, amount int64, key string) *stripe.RefundCreateParams {
	p := &stripe.RefundCreateParams{
		PaymentIntent: stripe.String(pi),
		Amount:        stripe.Int64(amount),
		Reason:        stripe.String(string(stripe.RefundReasonRequestedByCustomer)),
		Metadata:      map[string]string{"order_id": "ORD-ST-7", "refund_id": "R-1"},
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// A refund asked twice with one key is one refund; without a key, two.
func TestStripeRefundIdempotency(t *testing.T) {
	t.Parallel()
	_, _, sc := stripeEmulator(t)
	ctx := t.Context()
	first, err := sc.V1Refunds.Create(ctx, refundParams("pi_sandbox_1", 5000, "refund:R-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, "re_") || first.Amount != 5000 || first.Status != stripe.RefundStatusSucceeded ||
		first.PaymentIntent == nil || first.PaymentIntent.ID != "pi_sandbox_1" || first.Metadata["refund_id"] != "R-1" ||
		first.Reason != stripe.RefundReasonRequestedByCustomer {
		t.Errorf("refund %+v", first)
	}
	again, err := sc.V1Refunds.Create(ctx, refundParams("pi_sandbox_1", 5000, "refund:R-1"))
	if err != nil || again.ID != first.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the same refund again: %v, %v; want %s replayed", again, err, first.ID)
	}
	other, err := sc.V1Refunds.Create(ctx, refundParams("pi_sandbox_1", 5000, ""))
	if err != nil || other.ID == first.ID {
		t.Errorf("without a key: %v, %v; want a second refund", other, err)
	}
	got, err := sc.V1Refunds.Retrieve(ctx, first.ID, nil)
	if err != nil || got.ID != first.ID || got.Amount != 5000 {
		t.Errorf("retrieve: %+v, %v", got, err)
	}
	_, err = sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{Amount: stripe.Int64(1)})
	stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest)
}

// callbacks stands in for Sekali's /callbacks/{provider}: it answers
// every delivery 200 and keeps it.
type callbacks struct {
	URL string
	mu  sync.Mutex
	got []callback
}

type callback struct {
	provider string
	header   http.Header
	body     []byte
}

func recordCallbacks(t *testing.T) *callbacks {
	t.Helper()
	c := &callbacks{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.got = append(c.got, callback{strings.TrimPrefix(r.URL.Path, "/callbacks/"), r.Header.Clone(), body})
		c.mu.Unlock()
		w.Write([]byte(`{"result":"processed"}`))
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// received are the deliveries so far.
func (c *callbacks) received() []callback {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// wait waits for n deliveries, and returns them.
func (c *callbacks) wait(t *testing.T, n int) []callback {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d deliveries", n), func() bool { return len(c.received()) >= n })
	return c.received()
}

const stripeWebhookSecret = "whsec_sandboxgw_0123456789"

// stripeNotifying is a gateway that speaks Stripe's API and its events,
// delivered to c; and a stripe-go client of it.
func stripeNotifying(t *testing.T, c *callbacks) (*sandboxgw.Gateway, *stripe.Client) {
	t.Helper()
	g := sandboxgw.New(nil, testenv.SandboxKey, c.URL, testenv.Logger(t))
	sender, err := stripegw.NewSender(stripeWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	g.Speak(sender)
	g.SpeakStripeAPI(stripeKey)
	g.Retries = nil
	base := serve(t, g)
	t.Cleanup(g.Close) // before the servers close: the deliveries in flight end
	return g, stripeClient(t, base, stripeKey)
}

// A PaymentIntent the gateway reported paid: its refunds add up to its
// amount and no further, the charge (expanded) keeps the total, a refund
// without an amount takes the rest, and each new refund is a signed
// charge.refunded event stating the total.
func TestStripeRefundsOfAKnownPaymentIntent(t *testing.T) {
	t.Parallel()
	c := recordCallbacks(t)
	g, sc := stripeNotifying(t, c)
	ctx := t.Context()
	g.Reported(stripegw.Name, payments.Fact{OrderID: "ORD-ST-R1", TransactionID: "pi_known_1", Status: models.EventPaid,
		Amount: 150000, Currency: "IDR"})
	params := func(amount int64, key string) *stripe.RefundCreateParams {
		p := &stripe.RefundCreateParams{PaymentIntent: stripe.String("pi_known_1"), Metadata: map[string]string{"order_id": "ORD-ST-R1"}}
		if amount > 0 {
			p.Amount = stripe.Int64(amount)
		}
		p.AddExpand("charge")
		p.SetIdempotencyKey(key)
		return p
	}
	first, err := sc.V1Refunds.Create(ctx, params(5000000, "ORD-ST-R1-R1"))
	if err != nil {
		t.Fatal(err)
	}
	if ch := first.Charge; first.Amount != 5000000 || ch == nil || ch.Object != "charge" || ch.ID != "ch_pi_known_1" ||
		ch.Amount != 15000000 || ch.AmountRefunded != 5000000 || ch.Refunded || ch.PaymentIntent == nil || ch.PaymentIntent.ID != "pi_known_1" {
		t.Errorf("first refund %+v, charge %+v", first, ch)
	}
	rest, err := sc.V1Refunds.Create(ctx, params(0, "ORD-ST-R1-R2"))
	if err != nil {
		t.Fatal(err)
	}
	if rest.Amount != 10000000 || rest.Charge.AmountRefunded != 15000000 || !rest.Charge.Refunded {
		t.Errorf("the rest %+v, charge %+v", rest, rest.Charge)
	}
	_, err = sc.V1Refunds.Create(ctx, params(1, "ORD-ST-R1-R3"))
	if se := stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest); se.Code != "charge_already_refunded" {
		t.Errorf("after all: %+v", se)
	}

	g.Reported(stripegw.Name, payments.Fact{TransactionID: "pi_known_2", Status: models.EventPaid, Amount: 1000, Currency: "IDR"})
	_, err = sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String("pi_known_2"), Amount: stripe.Int64(100001)})
	if se := stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest); se.Param != "amount" {
		t.Errorf("above the payment: %+v", se)
	}

	lp := &stripe.RefundListParams{PaymentIntent: stripe.String("pi_known_1")}
	lp.Limit = stripe.Int64(1) // a page each
	lp.AddExpand("data.charge")
	var listed []string
	for re, err := range sc.V1Refunds.List(ctx, lp) {
		if err != nil {
			t.Fatal(err)
		}
		if re.Charge == nil || re.Charge.AmountRefunded != 15000000 {
			t.Errorf("listed %s with charge %+v", re.ID, re.Charge)
		}
		listed = append(listed, re.ID)
	}
	if !slices.Equal(listed, []string{rest.ID, first.ID}) {
		t.Errorf("listed %v, want %s then %s", listed, rest.ID, first.ID)
	}
	rp := &stripe.RefundRetrieveParams{}
	rp.AddExpand("charge")
	if got, err := sc.V1Refunds.Retrieve(ctx, first.ID, rp); err != nil || got.Charge == nil || got.Charge.AmountRefunded != 15000000 {
		t.Errorf("retrieve: %+v, %v", got, err)
	}
	if got, err := sc.V1Refunds.Retrieve(ctx, first.ID, nil); err != nil || got.Charge == nil || got.Charge.ID != "ch_pi_known_1" || got.Charge.Object != "" {
		t.Errorf("retrieve, not expanded: %+v, %v", got, err)
	}

	provider, err := stripegw.NewProvider(stripeWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	var totals []int64
	named := map[string]int64{}
	for _, d := range c.wait(t, 4) {
		if err := provider.Verify(d.header, d.body, time.Now()); err != nil || d.provider != stripegw.Name {
			t.Fatalf("delivery to %s: %v", d.provider, err)
		}
		ev, err := provider.Parse(d.header, d.body)
		if err != nil || ev.Status != models.EventRefunded || ev.TransactionID != "pi_known_1" || ev.OrderID != "ORD-ST-R1" || ev.Currency != "IDR" {
			t.Errorf("event %+v, %v", ev, err)
		}
		if len(ev.Refunds) == 0 { // charge.refunded: the total
			totals = append(totals, ev.Amount)
			continue
		}
		for _, r := range ev.Refunds { // refund.updated: the refund, by its id
			if r.Status != models.RefundSucceeded {
				t.Errorf("refund %s is %s, want succeeded", r.Key, r.Status)
			}
			named[r.Key] = r.Amount
		}
	}
	slices.Sort(totals)
	if !slices.Equal(totals, []int64{50000, 150000}) {
		t.Errorf("charge.refunded totals %v, want 50000 and 150000", totals)
	}
	if len(named) != 2 || named[first.ID] != 50000 || named[rest.ID] != 100000 {
		t.Errorf("refunds named %v, want %s of 50000 and %s of 100000", named, first.ID, rest.ID)
	}
}

// A metadata value longer than Stripe's 500 characters is refused, and
// nothing is refunded.
func TestStripeRefundMetadataBound(t *testing.T) {
	t.Parallel()
	_, _, sc := stripeEmulator(t)
	p := refundParams("pi_sandbox_2", 5000, "refund:long")
	p.Metadata["reason"] = strings.Repeat("é", 501)
	_, err := sc.V1Refunds.Create(t.Context(), p)
	stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest)
	p.Metadata["reason"] = strings.Repeat("é", 500)
	if _, err := sc.V1Refunds.Create(t.Context(), p); err != nil {
		t.Errorf("500 characters: %v", err)
	}
}
