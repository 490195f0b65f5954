package midtrans_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// Midtrans's signature covers three fields, so a holder of one genuine
// notification can rewrite the rest. Every such forgery is confirmed
// with the status API first and changes nothing of its own: the delivery
// is answered 200 unconfirmed, with a note of what each side said, and
// what the API says is applied instead — which here is nothing new.
func TestMidtransForgedNotificationsChangeNothing(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)

	// A genuine pending notification re-sent as a settlement of another
	// transaction: Midtrans does not know that transaction.
	pending, sku := p.Order()
	genuine := p.notification(pending, "tx-pend-"+pending, "pending", "", "50000.00", "IDR")
	if out := p.Send(genuine); out.Result != models.ResultProcessed {
		t.Fatalf("the genuine pending notification: %+v", out)
	}
	p.Unconfirmed("pending re-sent as a settlement", forge(genuine, map[string]any{"transaction_status": "settlement", "transaction_id": "tx-forged-" + pending}))
	p.Unconfirmed("pending re-sent as its own settlement", forge(genuine, map[string]any{"transaction_status": "settlement"}))
	if s := p.State(pending, sku); s.Status != models.OrderPending || s.Outbox != 0 || s.Payments["tx-forged-"+pending] != "" {
		t.Errorf("after forged settlements: %+v; want the order pending, nothing paid, no invoice", s)
	}

	// A genuine deny re-sent as a settlement.
	denied, sku := p.Order()
	deny := p.notification(denied, "tx-deny-"+denied, "deny", "", "50000.00", "IDR")
	if out := p.Send(deny); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPending {
		t.Fatalf("the genuine deny: %+v", out)
	}
	p.Unconfirmed("deny re-sent as a settlement", forge(deny, map[string]any{"transaction_status": "settlement"}))
	if s := p.State(denied, sku); s.Status != models.OrderPending || s.Payments["tx-deny-"+denied] != models.PaymentFailed || s.Outbox != 0 {
		t.Errorf("after a deny forged into a settlement: %+v; want pending, the attempt failed", s)
	}

	// A genuine settlement re-sent as a refund.
	paid, sku := p.Order()
	settlement := p.notification(paid, "tx-paid-"+paid, "settlement", "", "50000.00", "IDR")
	if out := p.Send(settlement); out.Result != models.ResultProcessed {
		t.Fatalf("the genuine settlement: %+v", out)
	}
	p.Unconfirmed("settlement re-sent as a refund", forge(settlement, map[string]any{"transaction_status": "refund"}))
	if s := p.State(paid, sku); s.Status != models.OrderPaid || s.Payments["tx-paid-"+paid] != models.PaymentSucceeded {
		t.Errorf("after a settlement forged into a refund: %+v; want paid", s)
	}

	// The same body with "currency":"USD", before the genuine one came:
	// the API's answer — the settlement in rupiah — is what pays the
	// order; the genuine notification then is a duplicate.
	usd, sku := p.Order()
	inIDR := p.notification(usd, "tx-usd-"+usd, "settlement", "", "50000.00", "IDR")
	p.Unconfirmed("a settlement re-written in USD", forge(inIDR, map[string]any{"currency": "USD"}))
	var pays []models.Payment
	p.DB.Find(&pays, "order_id = ?", usd)
	if len(pays) != 1 || pays[0].Currency != "IDR" || pays[0].Amount != price || p.State(usd, sku).Status != models.OrderPaid {
		t.Errorf("after a USD forgery: payments %+v; want one IDR payment of %d, applied from the API's answer", pays, price)
	}
	if out := p.Send(inIDR); out.Result != models.ResultDuplicate {
		t.Errorf("the genuine notification after the API's answer was applied: %s, want duplicate", out.Result)
	}

	// The deliveries say why: unconfirmed, with both sides in the note.
	// (Each delivery's row is written just after its answer.)
	testenv.Eventually(t, "the unconfirmed deliveries' rows", func() bool {
		var n int64
		p.DB.Model(&models.CallbackDelivery{}).Where("outcome = ? AND note LIKE ?", models.OutcomeUnconfirmed, "%the status API%").Count(&n)
		return n == 5
	})
	var note string
	p.DB.Raw("SELECT note FROM callback_deliveries WHERE outcome = 'unconfirmed' AND note LIKE ?", "%tx-forged-"+pending+"%").Scan(&note)
	if !strings.Contains(note, "paid of tx-forged-"+pending) || !strings.Contains(note, "does not know") {
		t.Errorf("the note of the forged settlement: %q", note)
	}

	// The API down: 503, so that Midtrans retries; nothing is written.
	// (This test's own API: no other test sees it down.)
	down, _ := p.Order()
	p.api.down.Store(true)
	out := p.Send(p.notification(down, "tx-down-"+down, "settlement", "", "50000.00", "IDR"))
	p.api.down.Store(false)
	if n := p.Callbacks(down); out.Status() != 503 || n != 0 {
		t.Errorf("the status API down: %d %s with %d callbacks recorded; want 503 and none", out.Status(), out.Result, n)
	}
	p.Audit()
}

// Midtrans answers most errors of its API with HTTP 200 and the error in
// the body's status_code. A genuine settlement confirmed while the status
// API answers so is answered 503 — Midtrans retries it — with nothing
// written: a 200 "unconfirmed" ("the API does not know the transaction")
// is never resent, and the money would be taken for an order that then
// expires. The retry, once the API is well, pays.
func TestMidtransAPIErrorInA200IsAnError(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	for _, code := range []string{"500", "401", "505"} {
		id, sku := p.Order()
		settlement := p.notification(id, "tx-err"+code+"-"+id, "settlement", "", "50000.00", "IDR")
		p.Retried("status_code "+code+" in a 200", id, settlement, func() func() {
			p.api.errInBody.Store(&code)
			return func() { p.api.errInBody.Store(nil) }
		})
		if s := p.State(id, sku); s.Status != models.OrderPaid || s.Outbox != 2 {
			t.Errorf("after the retry: %+v; want paid with its invoice and email", s)
		}
	}
}

// A status-API answer with another gross_amount is stored under the
// notification's own key, rejected (amount_mismatch). It must not hold
// that key against the truth: the genuine notification resent once the
// API answers right pays the order once; were the key held by the
// wrong answer, it and the poll would be a 409 conflict for ever.
func TestMidtransWrongAPIAnswerThenGenuineNotificationPaysOnce(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, sku := p.Order()
	tx := "tx-wrong-" + id
	genuine := signedBody(id, tx, "settlement", "", "50000.00", "IDR")
	p.api.set(signedBody(id, tx, "settlement", "", "65000.00", "IDR").Body) // the API answers wrongly
	if out := p.Send(genuine); out.Result != models.ResultUnconfirmed {
		t.Fatalf("the genuine notification while the API is wrong: %s (%s), want unconfirmed", out.Result, out.Detail)
	}
	var cb models.PaymentCallback
	p.DB.Take(&cb, "provider = ? AND idempotency_key = ?", midtrans.Name, tx+":settlement")
	if cb.Status != models.CallbackRejected || cb.Result != models.ReasonAmountMismatch {
		t.Fatalf("the API's answer: %s %s, want rejected %s", cb.Status, cb.Result, models.ReasonAmountMismatch)
	}

	p.api.set(genuine.Body) // the API recovers
	if out := p.Send(genuine); out.Result != models.ResultProcessed || out.OrderStatus != models.OrderPaid {
		t.Fatalf("the genuine notification resent: %d %s (%s), want processed, paid", out.Status(), out.Result, out.Detail)
	}
	if out := p.Send(genuine); out.Result != models.ResultDuplicate {
		t.Errorf("once more: %s, want duplicate", out.Result)
	}
	if out := p.Pay.ApplyPolled(context.Background(), midtrans.Name, p.polled(genuine.Body)); out.Result != models.ResultDuplicate {
		t.Errorf("the poll of the same fact: %s, want duplicate", out.Result)
	}
	var pays []models.Payment
	p.DB.Find(&pays, "order_id = ?", id)
	if s, callbacks := p.State(id, sku), p.Callbacks(id); s.Status != models.OrderPaid || s.Outbox != 2 || len(pays) != 1 || pays[0].Amount != price || callbacks != 1 {
		t.Errorf("after: %+v, payments %+v, %d callbacks; want paid once at %d, one callback row", s, pays, callbacks, price)
	}
	p.Audit()
}

// polled is what the status API's answer of a notification parses to.
func (p *pipeline) polled(body []byte) payments.Event {
	p.T.Helper()
	c, err := midtrans.NewStatusClient(midtransKey, p.api.URL)
	if err != nil {
		p.T.Fatal(err)
	}
	var n midtrans.Notification
	json.Unmarshal(body, &n)
	ev, found, err := c.Transaction(context.Background(), n.TransactionID)
	if err != nil || !found {
		p.T.Fatalf("status of %s: %v %v", n.TransactionID, found, err)
	}
	return ev
}
