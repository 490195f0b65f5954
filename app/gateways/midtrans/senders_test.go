package midtrans_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Every notification the Sender writes is one the Provider, with the
// same server key, authenticates and reads back as the fact it was
// written from, under Midtrans's key rule — transaction_id and
// transaction_status, and for a refund the refunded total (a Midtrans
// notification carries no event id); another server key is refused.
func TestMidtransSenderWritesWhatTheProviderReads(t *testing.T) {
	t.Parallel()
	receiver, err := midtrans.NewProvider(midtransKey, "")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.SenderRoundTrip(t, gatewaytest.SenderCase{
		Sender: mustSender(t, midtransKey), Forger: mustSender(t, "SB-Mid-server-NOT-OURS"), Receiver: receiver,
		Key: func(f payments.Fact) string {
			key := f.TransactionID + ":" + map[models.PaymentEvent]string{models.EventPaid: "settlement", models.EventPending: "pending",
				models.EventDeclined: "deny", models.EventFailed: "cancel", models.EventExpired: "expire", models.EventRefunded: "refund"}[f.Status]
			if f.Status == models.EventRefunded { // and the refunded total
				key += ":" + payments.MajorText(f.Amount, f.Currency, 2)
			}
			return key
		},
	})
}

func mustSender(t *testing.T, serverKey string) payments.Sender {
	t.Helper()
	s, err := midtrans.NewSender(serverKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
