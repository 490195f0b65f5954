package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v82"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

const webhookSecret = "whsec_sandboxgw_0123456789"

// stripeNotifying is a sandbox gateway that emulates Stripe's API and
// speaks its events, delivered to c; and the emulation, and a stripe-go
// client of it.
func stripeNotifying(t *testing.T, c *sandboxgwtest.Callbacks) (*stripe.Emulator, *stripego.Client) {
	t.Helper()
	g := sandboxgwtest.New(t, c.URL)
	sender, err := stripe.NewSender(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	g.Speak(sender)
	em := stripe.NewEmulator(emulatorKey)
	g.Emulate(em)
	g.Retries = nil
	return em, stripeClient(t, sandboxgwtest.Serve(t, g), emulatorKey)
}

func refundParams(pi string, amount int64, key string) *stripego.RefundCreateParams {
	p := &stripego.RefundCreateParams{
		PaymentIntent: stripego.String(pi),
		Amount:        stripego.Int64(amount),
		Reason:        stripego.String(string(stripego.RefundReasonRequestedByCustomer)),
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
	_, _, _, sc := stripeEmulator(t)
	ctx := t.Context()
	first, err := sc.V1Refunds.Create(ctx, refundParams("pi_sandbox_1", 5000, "refund:R-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, "re_") || first.Amount != 5000 || first.Status != stripego.RefundStatusSucceeded ||
		first.PaymentIntent == nil || first.PaymentIntent.ID != "pi_sandbox_1" || first.Metadata["refund_id"] != "R-1" ||
		first.Reason != stripego.RefundReasonRequestedByCustomer {
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
	_, err = sc.V1Refunds.Create(ctx, &stripego.RefundCreateParams{Amount: stripego.Int64(1)})
	stripeErr(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest)
}

// A PaymentIntent the sandbox gateway reported paid: its refunds add up to its
// amount and no further, the charge (expanded) keeps the total, a refund
// without an amount takes the rest, and each new refund is a signed
// charge.refunded event stating the total.
func TestStripeRefundsOfAKnownPaymentIntent(t *testing.T) {
	t.Parallel()
	c := sandboxgwtest.RecordCallbacks(t)
	em, sc := stripeNotifying(t, c)
	ctx := t.Context()
	em.Reported(payments.Fact{OrderID: "ORD-ST-R1", TransactionID: "pi_known_1", Status: models.EventPaid,
		Amount: 150000, Currency: "IDR"})
	params := func(amount int64, key string) *stripego.RefundCreateParams {
		p := &stripego.RefundCreateParams{PaymentIntent: stripego.String("pi_known_1"), Metadata: map[string]string{"order_id": "ORD-ST-R1"}}
		if amount > 0 {
			p.Amount = stripego.Int64(amount)
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
	if se := stripeErr(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest); se.Code != "charge_already_refunded" {
		t.Errorf("after all: %+v", se)
	}

	em.Reported(payments.Fact{TransactionID: "pi_known_2", Status: models.EventPaid, Amount: 1000, Currency: "IDR"})
	_, err = sc.V1Refunds.Create(ctx, &stripego.RefundCreateParams{PaymentIntent: stripego.String("pi_known_2"), Amount: stripego.Int64(100001)})
	if se := stripeErr(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest); se.Param != "amount" {
		t.Errorf("above the payment: %+v", se)
	}

	lp := &stripego.RefundListParams{PaymentIntent: stripego.String("pi_known_1")}
	lp.Limit = stripego.Int64(1) // a page each
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
	rp := &stripego.RefundRetrieveParams{}
	rp.AddExpand("charge")
	if got, err := sc.V1Refunds.Retrieve(ctx, first.ID, rp); err != nil || got.Charge == nil || got.Charge.AmountRefunded != 15000000 {
		t.Errorf("retrieve: %+v, %v", got, err)
	}
	if got, err := sc.V1Refunds.Retrieve(ctx, first.ID, nil); err != nil || got.Charge == nil || got.Charge.ID != "ch_pi_known_1" || got.Charge.Object != "" {
		t.Errorf("retrieve, not expanded: %+v, %v", got, err)
	}

	provider, err := stripe.NewProvider(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	var totals []int64
	named := map[string]int64{}
	for _, d := range c.Wait(t, 4) {
		if err := provider.Verify(d.Header, d.Body, time.Now()); err != nil || d.Provider != stripe.Name {
			t.Fatalf("delivery to %s: %v", d.Provider, err)
		}
		ev, err := provider.Parse(d.Header, d.Body)
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
	_, _, _, sc := stripeEmulator(t)
	p := refundParams("pi_sandbox_2", 5000, "refund:long")
	p.Metadata["reason"] = strings.Repeat("é", 501)
	_, err := sc.V1Refunds.Create(t.Context(), p)
	stripeErr(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest)
	p.Metadata["reason"] = strings.Repeat("é", 500)
	if _, err := sc.V1Refunds.Create(t.Context(), p); err != nil {
		t.Errorf("500 characters: %v", err)
	}
}

// The refunder Sekali asks Stripe with, against the emulation and the
// sandbox's faults: whatever the faults, a refund asked again with its
// key is the one refund.

func stripeRefunder(t *testing.T, base string) *stripe.Refunder {
	t.Helper()
	f, err := stripe.NewRefunder(emulatorKey, base+stripe.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// stripeRefunds lists the refunds Stripe holds of PaymentIntent pi.
func stripeRefunds(t *testing.T, sc *stripego.Client, pi string) []*stripego.Refund {
	t.Helper()
	var out []*stripego.Refund
	for re, err := range sc.V1Refunds.List(t.Context(), &stripego.RefundListParams{PaymentIntent: stripego.String(pi)}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, re)
	}
	return out
}

// paid makes the emulation know that PaymentIntent pi was paid amount,
// as the sandbox gateway does when it reports the payment.
func paid(em *stripe.Emulator, pi string, amount int64) {
	em.Reported(payments.Fact{TransactionID: pi, Status: models.EventPaid, Amount: amount, Currency: "IDR"})
}

// A Stripe refund answers with the refund, by its id, and the charge's
// refunded total, as charge.refunded states it; two partial refunds
// state the growing total. The same request again is Stripe's replay of
// the one refund. A repeat looks first: it finds the refund by its
// metadata.refund_key even where Stripe's key would refuse it (other
// parameters, or a key Stripe no longer keeps). A key reused with other
// parameters on a first call is Stripe's idempotency_error: refused.
func TestStripeRefunderOnce(t *testing.T) {
	t.Parallel()
	_, em, base, sc := stripeEmulator(t)
	f := stripeRefunder(t, base)
	ctx := t.Context()
	paid(em, "pi_rf_1", 150000)
	first, err := f.Refund(ctx, sandboxgwtest.RefundOf("ORD-RF-1", "ORD-RF-1-R1", "pi_rf_1", 50000, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ObjectID, "re_") || first.Amount != 50000 || first.Total != 50000 || first.RefundKey != first.ObjectID || first.Pending {
		t.Fatalf("first %+v", first)
	}
	if again, err := f.Refund(ctx, sandboxgwtest.RefundOf("ORD-RF-1", "ORD-RF-1-R1", "pi_rf_1", 50000, 1)); err != nil || again != first {
		t.Errorf("the same request again: %+v, %v; want %+v", again, err, first)
	}
	second, err := f.Refund(ctx, sandboxgwtest.RefundOf("ORD-RF-1", "ORD-RF-1-R2", "pi_rf_1", 25000, 1))
	if err != nil || second.Amount != 25000 || second.Total != 75000 || second.ObjectID == first.ObjectID {
		t.Errorf("second: %+v, %v; want 25000 of a total of 75000", second, err)
	}
	r := sandboxgwtest.RefundOf("ORD-RF-1", "ORD-RF-1-R1", "pi_rf_1", 50000, 2)
	r.Reason = "said otherwise" // Stripe's key would answer idempotency_error
	if found, err := f.Refund(ctx, r); err != nil || found.ObjectID != first.ObjectID || found.Amount != 50000 || found.Total != 75000 {
		t.Errorf("a repeat: %+v, %v; want %s, as listed now", found, err, first.ObjectID)
	}
	r.Attempt = 1
	_, err = f.Refund(ctx, r)
	sandboxgwtest.Refused(t, "the key with other parameters", err, 400)
	if n := len(stripeRefunds(t, sc, "pi_rf_1")); n != 2 {
		t.Errorf("%d refunds at Stripe, want 2", n)
	}
}

// A 500 before Stripe acted is not a refusal; the repeat refunds, once.
func TestStripeRefunderFailNext(t *testing.T) {
	t.Parallel()
	g, _, base, sc := stripeEmulator(t)
	f := stripeRefunder(t, base)
	g.Faults().FailNext(1)
	_, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-2", "ORD-RF-2-R1", "pi_rf_2", 50000, 1))
	sandboxgwtest.Unknown(t, "FailNext", err)
	a, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-2", "ORD-RF-2-R1", "pi_rf_2", 50000, 2))
	if err != nil || a.Total != 50000 {
		t.Fatalf("the repeat: %+v, %v", a, err)
	}
	if all := stripeRefunds(t, sc, "pi_rf_2"); len(all) != 1 || all[0].ID != a.ObjectID {
		t.Errorf("refunds %v, want only %s", all, a.ObjectID)
	}
}

// Stripe refunds and does not answer; the caller's deadline passes: not
// a refusal. The repeat finds that refund: one at Stripe.
func TestStripeRefunderTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, _, base, sc := stripeEmulator(t)
	f := stripeRefunder(t, base)
	err := sandboxgwtest.RefundLate(t, g, f, sandboxgwtest.RefundOf("ORD-RF-3", "ORD-RF-3-R1", "pi_rf_3", 50000, 1))
	sandboxgwtest.Unknown(t, "no answer", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer: %v, want the deadline", err)
	}
	made := stripeRefunds(t, sc, "pi_rf_3")
	if len(made) != 1 {
		t.Fatalf("%d refunds, want 1", len(made))
	}
	a, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-3", "ORD-RF-3-R1", "pi_rf_3", 50000, 2))
	if err != nil || a.ObjectID != made[0].ID || a.Amount != 50000 || a.Total != 50000 {
		t.Errorf("the repeat: %+v, %v; want %s", a, err, made[0].ID)
	}
	if n := len(stripeRefunds(t, sc, "pi_rf_3")); n != 1 {
		t.Errorf("%d refunds, want 1", n)
	}
}

// Above what is left of a PaymentIntent is Stripe's 400: refused. A
// request without a key is refused before it is sent.
func TestStripeRefunderRefusals(t *testing.T) {
	t.Parallel()
	_, em, base, sc := stripeEmulator(t)
	f := stripeRefunder(t, base)
	paid(em, "pi_rf_4", 1000)
	_, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-4", "ORD-RF-4-R1", "pi_rf_4", 1001, 1))
	sandboxgwtest.Refused(t, "above the payment", err, 400)
	_, err = f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-4", "", "pi_rf_4", 1000, 1))
	sandboxgwtest.Refused(t, "no key", err, 0)
	if n := len(stripeRefunds(t, sc, "pi_rf_4")); n != 0 {
		t.Errorf("%d refunds, want 0", n)
	}
}

// End to end (sandboxgwtest.Shop): the answer names the refund (re_…);
// charge.refunded states only the charge's total. They converge on one
// counted refund, the named one, whichever comes first: a total that
// came first stands for the refund until the answer names it, and is
// then superseded.
func TestStripeRefundEndToEnd(t *testing.T) {
	t.Parallel()
	for _, notificationFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "answer first", true: "notification first"}[notificationFirst], func(t *testing.T) {
			t.Parallel()
			sender, err := stripe.NewSender(webhookSecret)
			if err != nil {
				t.Fatal(err)
			}
			provider, err := stripe.NewProvider(webhookSecret)
			if err != nil {
				t.Fatal(err)
			}
			s := sandboxgwtest.NewShop(t)
			g := s.Gateway()
			g.Speak(sender)
			em := stripe.NewEmulator(emulatorKey)
			g.Emulate(em)
			g.Retries = nil
			base := sandboxgwtest.Serve(t, g)
			s.Open(g, provider, !notificationFirst)
			payment := payments.Fact{EventID: "evt_paid_" + s.OrderID, OrderID: s.OrderID, TransactionID: "pi_e2e_" + s.OrderID,
				Status: models.EventPaid, Amount: sandboxgwtest.OrderTotal, Currency: "IDR"}
			s.Notify(sender, payment)
			em.Reported(payment)
			var refunder gatewaycalls.Refunder = stripeRefunder(t, base)
			if notificationFirst {
				refunder = sandboxgwtest.AnswersLate{Refunder: refunder, Wait: func() { sandboxgwtest.Delivered(t, g, s.OrderID, models.ResultProcessed) }}
			}
			r := s.RefundHalf(refunder)
			if !strings.HasPrefix(r.ProviderObjectID, "re_") {
				t.Errorf("refund %+v", r)
			}
			if !notificationFirst {
				s.Release()
				sandboxgwtest.Delivered(t, g, s.OrderID, models.ResultStale)
			}
			s.ExpectHalfRefunded(r.ProviderObjectID)
		})
	}
}

// A refund Stripe accepts and fails later — pending, then refund.failed
// — is given back, and asked again (sandboxgwtest.Shop.ExpectRefundFailedLater).
func TestStripeRefundFailedLaterEndToEnd(t *testing.T) {
	t.Parallel()
	s := sandboxgwtest.NewShop(t)
	g := s.Gateway()
	g.Retries = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}
	sender, provider := sandboxgwtest.Must(stripe.NewSender(webhookSecret)), sandboxgwtest.Must(stripe.NewProvider(webhookSecret))
	em := stripe.NewEmulator(emulatorKey)
	g.Emulate(em)
	refunder := stripeRefunder(t, sandboxgwtest.Serve(t, g))
	g.Speak(sender)
	s.Open(g, provider, false)
	payment := payments.Fact{EventID: "evt-paid-" + s.OrderID, OrderID: s.OrderID, TransactionID: "pi_later_" + s.OrderID,
		Status: models.EventPaid, Amount: sandboxgwtest.OrderTotal, Currency: "IDR"}
	s.Notify(sender, payment)
	em.Reported(payment)
	s.ExpectRefundFailedLater(g, refunder)
}

// A refund is in its charge's currency: of a PaymentIntent the
// emulation was told of only by its event (a tool's notification, not a
// payment the sandbox reported), the event's currency, not the shop's
// default — Sekali checks the answer's currency, and a guess of rupiah
// would put every refund of a dollar shop in conflict.
func TestStripeRefundIsInItsIntentsCurrency(t *testing.T) {
	t.Parallel()
	sender, err := stripe.NewSender(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	em := stripe.NewEmulator(emulatorKey)
	f := payments.Fact{EventID: "evt_usd_1", OrderID: "ORD-USD-1", TransactionID: "pi_usd_1", Status: models.EventPaid, Amount: 5000, Currency: "USD"}
	_, body, err := payments.Notification(sender, f, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	em.Notified(f, body)
	x := gatewaytest.Emulate(t, em)
	refunder, err := stripe.NewRefunder(emulatorKey, x.URL)
	if err != nil {
		t.Fatal(err)
	}
	a, err := refunder.Refund(t.Context(), gatewaycalls.RefundRequest{OrderID: "ORD-USD-1", Key: "ORD-USD-1-R1", Charge: "pi_usd_1",
		Amount: 1250, Currency: "USD", Reason: "damaged", Attempt: 1})
	if err != nil || a.Currency != "USD" || a.Amount != 1250 {
		t.Errorf("the refund: %+v, %v; want 1250 USD", a, err)
	}
}
