package payments_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/models"
)

func (f *fixture) mustAudit() {
	f.t.Helper()
	report, err := audit.WithoutJobs(f.db).Run(context.Background(), 0)
	if err != nil || !report.OK {
		f.t.Fatalf("audit: %v %+v", err, report.Violations)
	}
}

// Midtrans's chargeback and partial_chargeback used to be answered 200
// ignored: the bank took the money back and nothing said so. Each is now
// a lost dispute of the charge, with what it took — a partial one, then
// the whole — confirmed with the status API like every Midtrans
// notification; the order's status is unchanged.
func TestMidtransChargebackIsALostDispute(t *testing.T) {
	t.Parallel()
	f := gatewayFixture(t)
	id, _ := f.orderIn(models.OrderPending)
	tx := "tx-cb-" + id
	f.send(midtransNotification(id, tx, "settlement", "", "50000.00", "IDR"))
	partial := midtransBody(id, tx, "partial_chargeback", "", "50000.00", "IDR")
	var n map[string]any
	json.Unmarshal(partial.body, &n)
	n["refund_amount"] = "20000.00"
	partial.body, _ = json.Marshal(n)
	midtransAPI.set(partial.body)
	dispute := func(name string, d delivery, want models.Dispute, held int64) {
		t.Helper()
		out := f.send(d)
		var p models.Payment
		f.db.Take(&p, "order_id = ?", id)
		if out.Status() != 200 || out.Word() != models.ResultProcessed || out.OrderStatus != models.OrderPaid || p.Dispute != want || p.DisputedAmount != held {
			t.Errorf("%s: %d %s (%s), order %s; payment dispute %q of %d; want processed, %q of %d, the order paid",
				name, out.Status(), out.Word(), out.Detail, out.OrderStatus, p.Dispute, p.DisputedAmount, want, held)
		}
	}
	dispute("partial_chargeback", partial, models.DisputeLost, 20000)
	dispute("chargeback", midtransNotification(id, tx, "chargeback", "", "50000.00", "IDR"), models.DisputeLost, 50000)
	f.mustAudit()
}
