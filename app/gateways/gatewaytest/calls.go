package gatewaytest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// What every gateway's page opener and refunder must do, checked against
// the gateway's emulation of its API (an Emulation: Emulate serves one):
// the calls Sekali makes to a gateway (app/gatewaycalls) count on it.
// Each gateway package's tests run Pages and Refunds with its emulator;
// what only one gateway does is its own tests'.

// Emulation is what Pages and Refunds need of a gateway's emulation of
// its API and of the sandbox that serves it: *Emulated is one; the
// fault switches (*emulation.Faults) have all but Paid, PageOf and
// Notified.
type Emulation interface {
	Holding
	// FailNext makes the next n API calls answer the gateway's 500
	// before they act.
	FailNext(n int)
	// FailRefundsLater makes the next n refunds accepted fail afterwards.
	FailRefundsLater(n int)
	// Paid tells the emulation that charge of order was paid amount
	// (minor units) of currency: what its refunds may take.
	Paid(orderID, charge string, amount int64, currency string)
	// PageOf is the payment page the emulation's pages of order lead to,
	// opened with token.
	PageOf(orderID, token string) string
	// Notified are the notifications the emulation sent so far.
	Notified() []payments.Fact
}

// PageCase is a gateway's page opener, pointed at its emulation.
type PageCase struct {
	Emulation Emulation
	Opener    gatewaycalls.PageOpener
	// KeyOnce says the gateway takes a key once and never replays its
	// answer (an order id used once): the same key again is
	// *gatewaycalls.KeySpent, and the caller opens under a new key.
	// Otherwise the same key again is the same page.
	KeyOnce bool
}

// pageFor is the page request of order, under key, answered to the
// shop's order page with its token.
func pageFor(order, key string) gatewaycalls.PageRequest {
	r := PageRequest(key)
	r.OrderID, r.ReturnURL = order, "https://shop.example/orders/"+order+"?t=tok"
	return r
}

// Pages checks c.Opener against its gateway's emulation: a page for an
// order (an object's id, and the URL the gateway's page is at, on an
// origin of PageOrigins); the same key again (the same page, or the key
// spent); a failure before the gateway acted (a plain error, and the
// repeat opens the page); no answer after it acted (the context's
// deadline, not a refusal, and the repeat gets what the first call made,
// or the key spent); a request that cannot be sent (refused before
// sending).
func Pages(t *testing.T, c PageCase) {
	t.Helper()
	x, o := c.Emulation, c.Opener
	// sameKey checks what the same key again gets: first's page, or the
	// key spent.
	sameKey := func(what string, r gatewaycalls.PageRequest, first gatewaycalls.Page) {
		t.Helper()
		again, err := o.OpenPage(t.Context(), r)
		switch {
		case c.KeyOnce && !gatewaycalls.IsKeySpent(err):
			t.Errorf("%s: %+v, %v; want the key spent", what, again, err)
		case !c.KeyOnce && (err != nil || again != first):
			t.Errorf("%s: %+v, %v; want %+v", what, again, err, first)
		}
	}

	// A page for an order.
	first, err := o.OpenPage(t.Context(), pageFor("ORD-PG-1", "ORD-PG-1"))
	if err != nil {
		t.Fatalf("a page: %v", err)
	}
	if want := x.PageOf("ORD-PG-1", "tok"); first.ObjectID == "" || first.RedirectURL != want {
		t.Errorf("a page: %+v; want an object's id and %s", first, want)
	}
	if origin := gatewaycalls.Origin(first.RedirectURL); !slices.Contains(o.PageOrigins(), origin) {
		t.Errorf("the page's origin %s is not one of PageOrigins %q: the shop's form could not go there", origin, o.PageOrigins())
	}
	sameKey("the same key again", pageFor("ORD-PG-1", "ORD-PG-1"), first)

	// A failure before the gateway acted: not a refusal; the repeat opens
	// the page, and no other.
	x.FailNext(1)
	if _, err := o.OpenPage(t.Context(), pageFor("ORD-PG-2", "ORD-PG-2")); err == nil || gatewaycalls.IsRefused(err) || gatewaycalls.IsKeySpent(err) {
		t.Errorf("the gateway's 500 before it acted: %v, want a plain error", err)
	}
	page, err := o.OpenPage(t.Context(), pageFor("ORD-PG-2", "ORD-PG-2"))
	if err != nil || page.RedirectURL != x.PageOf("ORD-PG-2", "tok") {
		t.Errorf("the repeat after a 500: %+v, %v", page, err)
	} else {
		sameKey("the key again after the repeat", pageFor("ORD-PG-2", "ORD-PG-2"), page)
	}

	// No answer after the gateway acted: the caller's deadline, not a
	// refusal; the repeat gets what the first call made.
	err = Late(t, x, "the gateway acted and holds its answer", func(ctx context.Context) error {
		_, err := o.OpenPage(ctx, pageFor("ORD-PG-3", "ORD-PG-3"))
		return err
	})
	if err == nil || gatewaycalls.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer after acting: %v, want the deadline", err)
	}
	if c.KeyOnce {
		sameKey("the repeat after no answer", pageFor("ORD-PG-3", "ORD-PG-3"), gatewaycalls.Page{})
		key := "ORD-PG-3" + gatewaycalls.KeySeparator + "2"
		if page, err := o.OpenPage(t.Context(), pageFor("ORD-PG-3", key)); err != nil || page.RedirectURL != x.PageOf("ORD-PG-3", "tok") {
			t.Errorf("a new key after no answer: %+v, %v", page, err)
		}
	} else {
		page, err := o.OpenPage(t.Context(), pageFor("ORD-PG-3", "ORD-PG-3"))
		if err != nil || page.ObjectID == "" || page.RedirectURL != x.PageOf("ORD-PG-3", "tok") {
			t.Errorf("the repeat after no answer: %+v, %v", page, err)
		} else {
			sameKey("the key again after no answer", pageFor("ORD-PG-3", "ORD-PG-3"), page)
		}
	}

	// A request that cannot be sent is refused before it is.
	noKey, free := pageFor("ORD-PG-4", ""), pageFor("ORD-PG-4", "ORD-PG-4")
	free.Amount, free.Items = 0, nil
	for what, r := range map[string]gatewaycalls.PageRequest{"no key": noKey, "no amount": free} {
		var refused *gatewaycalls.Refused
		if _, err := o.OpenPage(t.Context(), r); !errors.As(err, &refused) || refused.Status != 0 {
			t.Errorf("%s: %v, want refused before sending", what, err)
		}
	}

	// A gateway that can be asked what a call made (the janitor asks it
	// about a page whose answer was lost) finds the page, without making
	// one, and finds none for an order it was never asked for.
	if f, ok := o.(gatewaycalls.PageFinder); ok {
		if found, ok, err := f.FindPage(t.Context(), pageFor("ORD-PG-1", "ORD-PG-1")); err != nil || !ok || found != first {
			t.Errorf("the page looked up: %+v, %v, %v; want %+v", found, ok, err, first)
		}
		if found, ok, err := f.FindPage(t.Context(), pageFor("ORD-PG-5", "ORD-PG-5")); err != nil || ok {
			t.Errorf("a page never asked for, looked up: %+v, %v, %v; want none", found, ok, err)
		}
		if found, ok, err := f.FindPage(t.Context(), pageFor("ORD-PG-5", "ORD-PG-5")); err != nil || ok {
			t.Errorf("looked up again: %+v, %v, %v; still none: a look-up makes nothing", found, ok, err)
		}
	}
}

// RefundCase is a gateway's refunder, pointed at its emulation.
type RefundCase struct {
	Emulation Emulation
	Refunder  gatewaycalls.Refunder
	// FailsLater says the gateway may accept a refund that fails
	// afterwards: such a refund is answered pending, and
	// the gateway's notification of its failure names it.
	FailsLater bool
}

// refundOf is the refund of amount (IDR) of charge under key, at attempt.
func refundOf(order, key, charge string, amount int64, attempt int) gatewaycalls.RefundRequest {
	return gatewaycalls.RefundRequest{OrderID: order, Key: key, Charge: charge, Amount: amount, Currency: "IDR",
		Reason: "damaged in transit", Attempt: attempt}
}

// Refunds checks c.Refunder against its gateway's emulation: a refund
// answers the refund's id and amount, and the gateway's notification of
// it names it so; the same key again is the same refund; a refund above
// what is left is refused and takes nothing; a failure before the
// gateway acted is a plain error, and the repeat refunds once; no answer
// after it acted is the context's deadline, not a refusal, and the
// repeat answers the refund it made; a request that cannot be sent is
// refused before sending. With FailsLater, a refund accepted and failed
// afterwards is answered pending, told failed, and gives its amount back.
func Refunds(t *testing.T, c RefundCase) {
	t.Helper()
	x, f := c.Emulation, c.Refunder
	// same checks that the key of r, asked again as a repeat, answers
	// the refund first.
	same := func(what string, r gatewaycalls.RefundRequest, first gatewaycalls.Refunded) {
		t.Helper()
		r.Attempt++
		again, err := f.Refund(t.Context(), r)
		if err != nil || again.ObjectID != first.ObjectID || again.RefundKey != first.RefundKey || again.Amount != first.Amount {
			t.Errorf("%s: %+v, %v; want the refund %+v", what, again, err, first)
		}
	}
	// told checks that the gateway's notifications name refund, of
	// charge, in state.
	told := func(what, order, charge string, refund gatewaycalls.Refunded, state models.RefundStatus) {
		t.Helper()
		name := cmp.Or(refund.RefundKey, refund.ObjectID)
		testenv.Eventually(t, fmt.Sprintf("%s: a notification of refund %s, %s", what, name, state), func() bool {
			return slices.ContainsFunc(x.Notified(), func(n payments.Fact) bool {
				return n.Status == models.EventRefunded && n.RefundID == name && n.TransactionID == charge &&
					n.OrderID == order && n.Amount == refund.Amount && cmp.Or(n.RefundStatus, models.RefundSucceeded) == state
			})
		})
	}

	// A refund, answered and told; the same key again is that refund.
	x.Paid("ORD-RF-1", "ch-rf-1", 150000, "IDR")
	r := refundOf("ORD-RF-1", "ORD-RF-1-R1", "ch-rf-1", 50000, 1)
	first, err := f.Refund(t.Context(), r)
	if err != nil || first.ObjectID == "" || first.Amount != 50000 {
		t.Fatalf("a refund: %+v, %v; want its id and amount", first, err)
	}
	told("a refund", "ORD-RF-1", "ch-rf-1", first, models.RefundSucceeded)
	same("the same key again", r, first)
	// A gateway that can be asked what became of a refund (the janitor
	// asks it about one pending) finds it by its key, in its state, and
	// none under a key never sent.
	if l, ok := f.(gatewaycalls.RefundLooker); ok {
		st, found, err := l.LookUpRefund(t.Context(), r)
		if err != nil || !found || st.ObjectID != first.ObjectID || st.Amount != 50000 || st.Status != models.RefundSucceeded {
			t.Errorf("the refund looked up: %+v, %v, %v; want %s, succeeded", st, found, err, first.ObjectID)
		}
		if st, found, err := l.LookUpRefund(t.Context(), refundOf("ORD-RF-1", "ORD-RF-1-R9", "ch-rf-1", 50000, 1)); err != nil || found {
			t.Errorf("a refund never asked for, looked up: %+v, %v, %v; want none", st, found, err)
		}
	}

	// Above what is left: refused, and it takes nothing — the rest can
	// still be refunded.
	if _, err := f.Refund(t.Context(), refundOf("ORD-RF-1", "ORD-RF-1-R2", "ch-rf-1", 100001, 1)); !gatewaycalls.IsRefused(err) {
		t.Errorf("above what is left: %v, want refused", err)
	}
	if rest, err := f.Refund(t.Context(), refundOf("ORD-RF-1", "ORD-RF-1-R3", "ch-rf-1", 100000, 1)); err != nil || rest.Amount != 100000 || rest.ObjectID == first.ObjectID {
		t.Errorf("the rest after a refusal: %+v, %v", rest, err)
	}

	// A failure before the gateway acted: not a refusal; the repeat
	// refunds, once.
	x.Paid("ORD-RF-2", "ch-rf-2", 150000, "IDR")
	r = refundOf("ORD-RF-2", "ORD-RF-2-R1", "ch-rf-2", 50000, 1)
	x.FailNext(1)
	if _, err := f.Refund(t.Context(), r); err == nil || gatewaycalls.IsRefused(err) {
		t.Errorf("the gateway's 500 before it acted: %v, want a plain error", err)
	}
	r.Attempt = 2
	if a, err := f.Refund(t.Context(), r); err != nil || a.ObjectID == "" || a.Amount != 50000 {
		t.Errorf("the repeat after a 500: %+v, %v", a, err)
	} else {
		same("the key again after the repeat", r, a)
	}

	// No answer after the gateway acted: the caller's deadline, not a
	// refusal; the repeat answers the refund made.
	x.Paid("ORD-RF-3", "ch-rf-3", 150000, "IDR")
	r = refundOf("ORD-RF-3", "ORD-RF-3-R1", "ch-rf-3", 50000, 1)
	err = Late(t, x, "the gateway acted and holds its answer", func(ctx context.Context) error {
		_, err := f.Refund(ctx, r)
		return err
	})
	if err == nil || gatewaycalls.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer after acting: %v, want the deadline", err)
	}
	r.Attempt = 2
	if a, err := f.Refund(t.Context(), r); err != nil || a.ObjectID == "" || a.Amount != 50000 {
		t.Errorf("the repeat after no answer: %+v, %v", a, err)
	} else {
		same("the key again after no answer", r, a)
		// Only that one was made: the whole of the rest is still there.
		if rest, err := f.Refund(t.Context(), refundOf("ORD-RF-3", "ORD-RF-3-R2", "ch-rf-3", 100000, 1)); err != nil || rest.Amount != 100000 {
			t.Errorf("the rest after the repeat: %+v, %v; want 100000 left", rest, err)
		}
	}

	// A request that cannot be sent is refused before it is.
	for what, r := range map[string]gatewaycalls.RefundRequest{
		"no key":    refundOf("ORD-RF-4", "", "ch-rf-1", 1000, 1),
		"no charge": refundOf("ORD-RF-4", "ORD-RF-4-R1", "", 1000, 1),
		"no amount": refundOf("ORD-RF-4", "ORD-RF-4-R1", "ch-rf-1", 0, 1),
	} {
		var refused *gatewaycalls.Refused
		if _, err := f.Refund(t.Context(), r); !errors.As(err, &refused) || refused.Status != 0 {
			t.Errorf("%s: %v, want refused before sending", what, err)
		}
	}

	if !c.FailsLater {
		return
	}
	// Accepted, then failed: answered pending, told failed, and its
	// amount given back — the whole charge can be refunded after.
	x.Paid("ORD-RF-5", "ch-rf-5", 150000, "IDR")
	x.FailRefundsLater(1)
	a, err := f.Refund(t.Context(), refundOf("ORD-RF-5", "ORD-RF-5-R1", "ch-rf-5", 150000, 1))
	if err != nil || !a.Pending || a.Amount != 150000 {
		t.Fatalf("a refund that fails later: %+v, %v; want it answered pending", a, err)
	}
	told("a refund that failed later", "ORD-RF-5", "ch-rf-5", a, models.RefundFailed)
	if again, err := f.Refund(t.Context(), refundOf("ORD-RF-5", "ORD-RF-5-R2", "ch-rf-5", 150000, 1)); err != nil || again.Amount != 150000 {
		t.Errorf("the charge after its refund failed: %+v, %v; want it refundable again", again, err)
	}
}
