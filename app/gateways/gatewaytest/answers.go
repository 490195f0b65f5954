package gatewaytest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/refunds"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// Every gateway answer is checked for amount and currency: a refund, a
// payment page or a status answer that states another amount or currency
// than Sekali asked — a gateway's bug, or someone else's object — changes
// no money and shows both values. Each gateway package's tests run
// AnswersChecked and StatusChecked with its emulation, whose switch
// (its Emulator's MisstateNext) makes an answer state what it was not
// asked.

// AnswerCase is a gateway's page opener and refunder, pointed at its
// emulation, and the emulation's switch.
type AnswerCase struct {
	Emulation Emulation
	Opener    gatewaycalls.PageOpener
	Refunder  gatewaycalls.Refunder
	// Misstate makes the emulation's next n answers that state an
	// amount state it by more (minor units) and, when currency is not
	// "", in currency: its Emulator's MisstateNext.
	Misstate func(n int, by int64, currency string)
	// PagesStateNone says the gateway's page answer states no amount
	// (a token and a URL only): a page is offered as it is answered, and its
	// row records no answered amount.
	PagesStateNone bool
}

// AnswersChecked checks c against its emulation through Sekali's own
// callers, on p's database: a refund answered with another amount, or
// in another currency, is not applied — the refund request ends in
// conflict with both values, is never sent again, raises
// gateway.conflict and holds its amount back — and the audit stays green
// and lists it; a payment page answered for another amount or currency
// is not offered (the Pay press answers a conflict) and its row records
// both values. p is t's own (NewPipeline(t, …)).
func AnswersChecked(t *testing.T, p *Pipeline, c AnswerCase) {
	t.Helper()
	ctx := t.Context()
	log := testenv.Logger(t)
	provider := c.Refunder.Provider()

	// A paid order, whose charge the emulation knows.
	id, sku := p.Order()
	charge := "ch-answers-" + id
	c.Emulation.Paid(id, charge, Price, "IDR")
	paid := payments.Event{Key: "paid-" + charge, OrderID: id, TransactionID: charge, Status: models.EventPaid, Amount: Price, Currency: "IDR"}
	if out := p.Pay.ApplyPolled(ctx, provider, paid); out.Result != models.ResultProcessed {
		t.Fatalf("paying %s: %s (%s)", id, out.Result, out.Detail)
	}
	before := p.Money(id, sku)

	svc := refunds.NewService(p.DB, log, time.Now, metrics.New(), p.Pay, jobs.Tasks{}, c.Refunder)
	refund := func(what, amount string, by int64, currency string) *models.GatewayRequest {
		t.Helper()
		var asked *models.GatewayRequest
		err := p.DB.Transaction(func(tx *gorm.DB) error {
			var err error
			asked, err = svc.RequestTx(tx, refunds.Request{OrderID: id, Amount: amount, Reason: "damaged", Admin: "ops@example.com", RequestID: "req-" + what})
			return err
		})
		if err != nil {
			t.Fatalf("%s: asking: %v", what, err)
		}
		c.Misstate(1, by, currency)
		r, err := svc.Send(ctx, asked.ID, "req-"+what)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var answered int64 // the amount the answer states
		if r.AnsweredAmount != nil {
			answered = *r.AnsweredAmount
		}
		wantCurrency := currency
		if currency == "" {
			wantCurrency = r.Currency
		}
		if r.Phase != models.GatewayConflict || r.AnsweredCurrency != wantCurrency || (currency == "" && answered != r.Amount+by) || r.ProviderObjectID == "" {
			t.Fatalf("%s: %s, answered %d %q, object %q; want conflict, answered %s", what, r.Phase, answered, r.AnsweredCurrency, r.ProviderObjectID, wantCurrency)
		}
		showsBoth(t, what, r.LastError, r.Amount, r.Currency, answered, wantCurrency)
		// Over: asked again, nothing is sent.
		again, err := svc.Send(ctx, r.ID, "req-"+what+"-again")
		if err != nil || again.Phase != models.GatewayConflict || again.Attempts != r.Attempts {
			t.Errorf("%s, sent again: %+v, %v; want it left in conflict, not called", what, again, err)
		}
		var raised int64
		p.DB.Model(&models.Alert{}).Where("event_id = ?", alerts.GatewayConflictEvent(*r, time.Now()).ID()).Count(&raised)
		if raised != 1 {
			t.Errorf("%s: %d gateway.conflict alerts, want 1", what, raised)
		}
		return r
	}
	first := refund("refund-amount", "20000", -1000, "")
	second := refund("refund-currency", "10000", 0, "USD")
	if after := p.Money(id, sku); after.Order != before.Order || after.Refunded != 0 || len(after.Refunds) != 0 || after.Emails != 0 {
		t.Errorf("after the refunds answered in conflict: %+v; want no money moved (%+v)", after, before)
	}
	// Their amounts stay held back: the gateway did refund something.
	if left, err := svc.Refundable(ctx, id, ""); err != nil || left.Left != Price-first.Amount-second.Amount || left.Open != first.Amount+second.Amount {
		t.Errorf("what is left after the conflicts: %+v, %v; want %d left, %d held back", left, err, Price-first.Amount-second.Amount, first.Amount+second.Amount)
	}

	// The payment page.
	pages := gatewaycalls.NewPages(p.DB, c.Opener, log, time.Now, metrics.New())
	open := func(what string, by int64, currency string) {
		t.Helper()
		o := p.pendingOrder()
		if !c.PagesStateNone {
			c.Misstate(1, by, currency)
		}
		page, err := pages.Open(ctx, o, nil, "https://shop.example/orders/"+o.ID+"?t=tok")
		var r models.GatewayRequest
		p.DB.Take(&r, "order_id = ? AND kind = ?", o.ID, models.GatewayCreatePayment)
		if c.PagesStateNone {
			if err != nil || page.RedirectURL == "" || r.Phase != models.GatewayDone || r.AnsweredAmount != nil || r.AnsweredCurrency != "" {
				t.Errorf("%s: %+v, %v, row %+v; want the page offered, its row done with no answered amount", what, page, err, r)
			}
			return
		}
		if models.ErrorCode(err) != models.EConflict || page.RedirectURL != "" {
			t.Fatalf("%s: %+v, %v; want a conflict, no page", what, page, err)
		}
		wantCurrency := currency
		if currency == "" {
			wantCurrency = o.Currency
		}
		if r.Phase != models.GatewayConflict || r.AnsweredAmount == nil || r.AnsweredCurrency != wantCurrency || r.ProviderObjectID == "" {
			t.Fatalf("%s: row %+v; want conflict with the answer's %s", what, r, wantCurrency)
		}
		showsBoth(t, what, r.LastError, o.TotalAmount, o.Currency, *r.AnsweredAmount, wantCurrency)
		if currency == "" && *r.AnsweredAmount != o.TotalAmount+by {
			t.Errorf("%s: answered %d, want %d", what, *r.AnsweredAmount, o.TotalAmount+by)
		}
		// Pressed again: the same refusal, and the gateway is not asked.
		if _, err := pages.Open(ctx, o, nil, "https://shop.example/orders/"+o.ID+"?t=tok"); models.ErrorCode(err) != models.EConflict {
			t.Errorf("%s, pressed again: %v; want the conflict", what, err)
		}
		var again models.GatewayRequest
		if p.DB.Take(&again, r.ID); again.Attempts != r.Attempts || again.Phase != models.GatewayConflict {
			t.Errorf("%s, pressed again: %+v; want it left in conflict, not called", what, again)
		}
	}
	open("page-amount", 1000, "")
	open("page-currency", 0, "USD")

	// The books hold — nothing was applied — and the audit says which
	// answers wait to be settled.
	report, err := audit.New(p.DB).Run(ctx, 0)
	if err != nil || !report.OK {
		t.Fatalf("audit: %v %+v", err, report.Violations)
	}
	wantConflicts := 2
	if !c.PagesStateNone {
		wantConflicts = 4
	}
	if len(report.Conflicts) != wantConflicts {
		t.Errorf("the audit lists %d answers in conflict, want %d: %+v", len(report.Conflicts), wantConflicts, report.Conflicts)
	}
}

// showsBoth fails t unless text shows both the asked and the answered
// amount and currency.
func showsBoth(t *testing.T, what, text string, asked int64, askedCurrency string, answered int64, answeredCurrency string) {
	t.Helper()
	for _, v := range []string{models.Money(asked, askedCurrency), models.Money(answered, answeredCurrency)} {
		if !strings.Contains(text, v) {
			t.Errorf("%s: %q does not show %s", what, text, v)
		}
	}
}

// pendingOrder is a fresh pending order of p, read back.
func (p *Pipeline) pendingOrder() *models.Order {
	p.T.Helper()
	id, _ := p.Order()
	var o models.Order
	if err := p.DB.Take(&o, "id = ?", id).Error; err != nil {
		p.T.Fatal(err)
	}
	return &o
}

// StatusChecked checks that a status answer stating another amount or
// currency than the order's changes no money: tell makes the gateway's
// API know a payment of orderID's charge for amount of currency (its
// Emulation's Paid, with a sender where the API answers with the
// notifications), and the status poll, asking with client, finds it: the
// fact is rejected (amount_mismatch, currency_mismatch), the order stays
// pending and unpaid, and the poll's delivery says both values. p is t's
// own (NewPipeline(t, …)).
func StatusChecked(t *testing.T, p *Pipeline, client payments.StatusClient, tell func(orderID, charge string, amount int64, currency string)) {
	t.Helper()
	for _, tt := range []struct {
		what     string
		amount   int64
		currency string
		reason   string
	}{
		{"another amount", Price + 1000, "IDR", models.ReasonAmountMismatch},
		{"another currency", Price * 100, "USD", models.ReasonCurrencyMismatch},
	} {
		id, sku := p.Order()
		tell(id, "ch-status-"+id, tt.amount, tt.currency)
		if _, err := p.Pay.Poll(context.Background(), []payments.StatusClient{client}, 2*time.Hour); err != nil {
			t.Fatalf("%s: poll: %v", tt.what, err)
		}
		if s := p.State(id, sku); s.Status != models.OrderPending || len(s.Payments) != 0 || s.Outbox != 0 {
			t.Errorf("%s: after the poll %+v; want the order pending, unpaid, no task", tt.what, s)
		}
		var cb models.PaymentCallback
		if err := p.DB.Take(&cb, "provider = ? AND order_id = ?", client.Provider(), id).Error; err != nil {
			t.Fatalf("%s: the poll's fact is not recorded: %v", tt.what, err)
		}
		if cb.Status != models.CallbackRejected || cb.Result != tt.reason || cb.Amount != tt.amount || cb.Currency != tt.currency {
			t.Errorf("%s: callback %+v; want rejected %s, stating %d %s", tt.what, cb, tt.reason, tt.amount, tt.currency)
		}
		var d models.CallbackDelivery
		p.DB.Take(&d, "callback_id = ?", cb.ID)
		for _, v := range []string{fmt.Sprintf("%d %s", tt.amount, tt.currency), fmt.Sprintf("%d IDR", Price)} {
			if !strings.Contains(d.Note, v) {
				t.Errorf("%s: the delivery's note %q does not say %s", tt.what, d.Note, v)
			}
		}
	}
}
