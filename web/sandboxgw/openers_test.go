package sandboxgw_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
	stripegw "github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/outbound"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/web/sandboxgw"
)

// The openers Sekali calls the gateways with, against the sandbox
// gateway's emulation of their APIs and its faults.

// stripeOpener is the Stripe opener pointed at the gateway's Stripe API,
// with the base URL's path (stripe.NewAPIClient puts it below stripe-go).
func stripeOpener(t *testing.T, base string) *stripegw.PageOpener {
	t.Helper()
	o, err := stripegw.NewPageOpener(stripeKey, base+sandboxgw.StripeAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// pageOf is the page request of order, opened under key.
func pageOf(order, key string) outbound.PageRequest {
	r := gatewaytest.PageRequest(key)
	r.OrderID, r.ReturnURL = order, "https://shop.example/orders/"+order+"?t=tok"
	return r
}

// The same page opened twice under one key is one Checkout Session: the
// second call is answered with the first.
func TestStripeOpenerSameKeyOneSession(t *testing.T) {
	t.Parallel()
	_, base, sc := stripeEmulator(t)
	o := stripeOpener(t, base)
	first, err := o.OpenPage(t.Context(), pageOf("ORD-OP-1", "page:ORD-OP-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ObjectID, "cs_") || first.RedirectURL != base+"/sandbox/pay/ORD-OP-1?t=tok&via=stripe" {
		t.Errorf("page %+v", first)
	}
	again, err := o.OpenPage(t.Context(), pageOf("ORD-OP-1", "page:ORD-OP-1"))
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

// A 500 before the gateway acted is not a refusal; the repeat under the
// same key opens the one session.
func TestStripeOpenerFailNext(t *testing.T) {
	t.Parallel()
	g, base, sc := stripeEmulator(t)
	o := stripeOpener(t, base)
	g.Faults().FailNext(1)
	if _, err := o.OpenPage(t.Context(), pageOf("ORD-OP-2", "page:ORD-OP-2")); err == nil || outbound.IsRefused(err) {
		t.Fatalf("FailNext: %v, want a plain error", err)
	}
	page, err := o.OpenPage(t.Context(), pageOf("ORD-OP-2", "page:ORD-OP-2"))
	if err != nil {
		t.Fatal(err)
	}
	if all := sessions(t, sc); len(all) != 1 || all[0].ID != page.ObjectID {
		t.Errorf("sessions %v, want only %s", all, page.ObjectID)
	}
}

// passingDeadline is a context whose deadline passes when the test calls
// pass: a short deadline, coming at the moment the test chooses — after
// the gateway acted — so that a busy machine cannot make it come before
// the request arrives.
type passingDeadline struct {
	context.Context
	done chan struct{}
	pass func()
}

func newPassingDeadline(parent context.Context) *passingDeadline {
	c := &passingDeadline{Context: parent, done: make(chan struct{})}
	c.pass = sync.OnceFunc(func() { close(c.done) })
	return c
}

func (c *passingDeadline) Done() <-chan struct{} { return c.done }

func (c *passingDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// openLate opens r with a deadline that passes once the gateway has acted
// and holds its answer (Faults.TimeOutAfterActing), and returns the error.
func openLate(t *testing.T, g *sandboxgw.Gateway, o outbound.PageOpener, r outbound.PageRequest) error {
	t.Helper()
	g.Faults().TimeOutAfterActing(1)
	ctx := newPassingDeadline(t.Context())
	t.Cleanup(ctx.pass)
	done := make(chan error, 1)
	go func() {
		_, err := o.OpenPage(ctx, r)
		done <- err
	}()
	testenv.Eventually(t, "the gateway acted and holds its answer", func() bool { return g.Faults().Held() == 1 })
	ctx.pass()
	return <-done
}

// The gateway creates the session and does not answer; the caller's
// deadline passes: not a refusal. The repeat with a fresh context gets
// the session the first call created, and there is only that one.
func TestStripeOpenerTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, base, sc := stripeEmulator(t)
	o := stripeOpener(t, base)
	err := openLate(t, g, o, pageOf("ORD-OP-3", "page:ORD-OP-3"))
	if err == nil || outbound.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no answer: %v, want the deadline", err)
	}
	created := sessions(t, sc)
	if len(created) != 1 {
		t.Fatalf("%d sessions, want 1", len(created))
	}
	page, err := o.OpenPage(t.Context(), pageOf("ORD-OP-3", "page:ORD-OP-3"))
	if err != nil || page.ObjectID != created[0].ID || page.RedirectURL != created[0].URL {
		t.Errorf("the repeat: %+v, %v; want %s", page, err, created[0].ID)
	}
	if n := len(sessions(t, sc)); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// A Snap order_id is single-use: the second page opened under one key is
// refused (400 "has already been taken"), also when the first answer was
// lost — the caller must try a new key.
func TestMidtransOpenerKeyOnce(t *testing.T) {
	t.Parallel()
	g, m := midtransEmulator(t)
	o, err := midtrans.NewPageOpener(midtransKey, m.base+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	first, err := o.OpenPage(t.Context(), pageOf("ORD-OP-4", "ORD-OP-4-1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.ObjectID == "" || first.RedirectURL != m.base+"/sandbox/pay/ORD-OP-4-1?t=tok&via=midtrans" {
		t.Errorf("page %+v", first)
	}
	taken := func(err error) bool {
		var spent *outbound.KeySpent
		return errors.As(err, &spent) && spent.Message == "transaction_details.order_id has already been taken"
	}
	if _, err := o.OpenPage(t.Context(), pageOf("ORD-OP-4", "ORD-OP-4-1")); !taken(err) {
		t.Errorf("the same key again: %v, want the key spent", err)
	}

	err = openLate(t, g, o, pageOf("ORD-OP-5", "ORD-OP-5-1"))
	if err == nil || outbound.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no answer: %v, want the deadline", err)
	}
	if _, err := o.OpenPage(t.Context(), pageOf("ORD-OP-5", "ORD-OP-5-1")); !taken(err) {
		t.Errorf("the repeat after no answer: %v, want the key spent", err)
	}
	if _, err := o.OpenPage(t.Context(), pageOf("ORD-OP-5", "ORD-OP-5-2")); err != nil {
		t.Errorf("a new key: %v", err)
	}
}

// xenditOpener is the Xendit opener pointed at the gateway's Xendit API.
func xenditOpener(t *testing.T, base string) *xendit.PageOpener {
	t.Helper()
	o, err := xendit.NewPageOpener(xenditKey, base+sandboxgw.XenditAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// An invoice has no idempotency key, and Xendit would make a second one
// of the same external_id: the opener looks first. The same key twice is
// one invoice — the second call finds it by external_id.
func TestXenditOpenerSameKeyOneInvoice(t *testing.T) {
	t.Parallel()
	_, x := xenditEmulator(t)
	o := xenditOpener(t, x.base)
	first, err := o.OpenPage(t.Context(), pageOf("ORD-OP-6", "ORD-OP-6"))
	if err != nil {
		t.Fatal(err)
	}
	if first.ObjectID == "" || first.RedirectURL != x.base+"/sandbox/pay/ORD-OP-6?t=tok&via=xendit" {
		t.Errorf("page %+v", first)
	}
	again, err := o.OpenPage(t.Context(), pageOf("ORD-OP-6", "ORD-OP-6"))
	if err != nil || again != first {
		t.Errorf("again: %+v, %v; want %+v", again, err, first)
	}
	all := x.invoices("ORD-OP-6")
	if len(all) != 1 {
		t.Fatalf("%d invoices, want 1", len(all))
	}
	if inv := all[0]; inv["amount"] != 150000.0 || inv["currency"] != "IDR" || inv["payer_email"] != "budi@example.id" ||
		inv["success_redirect_url"] != "https://shop.example/orders/ORD-OP-6?t=tok" {
		t.Errorf("invoice %v", inv)
	}
}

// A 500 before the gateway acted is not a refusal; the repeat finds no
// invoice and makes the one.
func TestXenditOpenerFailNext(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	o := xenditOpener(t, x.base)
	g.Faults().FailNext(1)
	if _, err := o.OpenPage(t.Context(), pageOf("ORD-OP-7", "ORD-OP-7")); err == nil || outbound.IsRefused(err) {
		t.Fatalf("FailNext: %v, want a plain error", err)
	}
	page, err := o.OpenPage(t.Context(), pageOf("ORD-OP-7", "ORD-OP-7"))
	if err != nil {
		t.Fatal(err)
	}
	if all := x.invoices("ORD-OP-7"); len(all) != 1 || all[0]["id"] != page.ObjectID {
		t.Errorf("invoices %v, want only %s", all, page.ObjectID)
	}
}

// The gateway makes the invoice and does not answer; the caller's
// deadline passes: not a refusal. The repeat finds that invoice by
// external_id and answers with it: one invoice.
func TestXenditOpenerTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	o := xenditOpener(t, x.base)
	err := openLate(t, g, o, pageOf("ORD-OP-8", "ORD-OP-8"))
	if err == nil || outbound.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no answer: %v, want the deadline", err)
	}
	created := x.invoices("ORD-OP-8")
	if len(created) != 1 {
		t.Fatalf("%d invoices, want 1", len(created))
	}
	page, err := o.OpenPage(t.Context(), pageOf("ORD-OP-8", "ORD-OP-8"))
	if err != nil || page.ObjectID != created[0]["id"] || page.RedirectURL != created[0]["invoice_url"] {
		t.Errorf("the repeat: %+v, %v; want %v", page, err, created[0]["id"])
	}
	if n := len(x.invoices("ORD-OP-8")); n != 1 {
		t.Errorf("%d invoices, want 1", n)
	}
}

// A wrong key stops the call at the look: nothing is created, and the
// error is not a "no" to the order (the key is Sekali's setting: fixed, a
// repeat goes through).
func TestXenditOpenerWrongKey(t *testing.T) {
	t.Parallel()
	_, x := xenditEmulator(t)
	o, err := xendit.NewPageOpener("xnd_development_wrong_key_00", x.base+sandboxgw.XenditAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.OpenPage(t.Context(), pageOf("ORD-OP-9", "ORD-OP-9")); err == nil || outbound.IsRefused(err) || !strings.Contains(err.Error(), "401") {
		t.Errorf("a wrong key: %v, want an error that is not a refusal, naming the 401", err)
	}
	if n := len(x.invoices("ORD-OP-9")); n != 0 {
		t.Errorf("%d invoices, want 0", n)
	}
}
