package payments_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// Every fact that moves money is compared with what it is about in
// currency as well as amount: a payment with the order, a refund and a
// dispute with their payment. A dispute told in another currency than
// its charge's would hold its amount as if it were the charge's, so it
// is rejected, holds nothing, and its delivery notes both values.
func TestFactsInAnotherCurrencyChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := f.orderIn(models.OrderPaid)
	charge := "tx-pay/" + id
	send := func(status models.PaymentEvent, amount int64, currency string) payments.Outcome {
		t.Helper()
		f.n++
		body := fmt.Appendf(nil, `{"order_id":%q,"transaction_id":%q,"payment_status":%q,"paid_amount":%d,"currency":%q}`,
			id, charge, status, amount, currency)
		return f.pay.Receive(context.Background(), payments.Delivery{Provider: sandbox.Name,
			Header: testenv.SandboxHeaders(fmt.Sprintf("evt_%d", f.n), body, time.Now()), Body: bytesReader(body), ContentType: "application/json"})
	}
	for _, status := range []models.PaymentEvent{models.EventDisputed, models.EventRefunded} {
		out := send(status, 20000, "USD")
		if out.Status() != 422 || out.Reason != models.ReasonCurrencyMismatch {
			t.Errorf("%s in USD: %d %s %s, want 422 currency_mismatch", status, out.Status(), out.Result, out.Reason)
		}
		var d models.CallbackDelivery
		f.db.Order("id DESC").Take(&d, "outcome = ?", models.OutcomeRejected)
		for _, v := range []string{"20000 USD", fmt.Sprintf("%d IDR", price)} {
			if !strings.Contains(d.Note, v) {
				t.Errorf("%s in USD: the delivery's note %q does not say %s", status, d.Note, v)
			}
		}
	}
	var pay models.Payment
	f.db.Take(&pay, "provider_reference = ?", charge)
	if pay.Dispute != models.DisputeNone || pay.DisputedAmount != 0 || pay.RefundedAmount != 0 {
		t.Errorf("the payment after facts in USD: %+v; want it untouched", pay)
	}
	if out := send(models.EventDisputed, 20000, "IDR"); out.Result != models.ResultProcessed {
		t.Errorf("the dispute in IDR: %s (%s), want processed", out.Result, out.Detail)
	}
}
