package midtrans_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
)

// FuzzMidtransParse: whatever a notification's body, Parse refuses it,
// ignores it, or reads an event the pipeline can apply, and reads the
// canonical spelling of a body as the body (gatewaytest.FuzzParse). The
// seeds are notifications of each status Sekali reads, in the shape of
// Midtrans's docs, refunds and chargebacks among them. make fuzz runs it.
func FuzzMidtransParse(f *testing.F) {
	note := func(status, fraud, more string) string {
		return `{"transaction_time":"2026-12-01 18:00:00","transaction_status":"` + status + `","transaction_id":"513f1f01-c9da-474c-9fc9-d5c64364b709",` +
			`"status_code":"200","signature_key":"00","payment_type":"gopay","order_id":"ORD-1","gross_amount":"75000.00","fraud_status":"` + fraud + `"` + more + `}`
	}
	p, err := midtrans.NewProvider("SB-Mid-server-TEST0123456789abcdef", "")
	if err != nil {
		f.Fatal(err)
	}
	gatewaytest.FuzzParse(f, gatewaytest.ParseCase{Provider: p},
		note("settlement", "accept", `,"currency":"IDR"`),
		note("capture", "challenge", ""),
		note("PENDING", "", ""),
		note("expire", "", ""),
		note("deny", "deny", ""),
		note("refund", "accept", `,"refund_amount":"25000.00","refunds":[{"refund_key":"rf-1","refund_amount":"25000.00","created_at":"2026-12-01 19:00:00"}]`),
		note("partial_refund", "accept", `,"refunds":[{"refund_key":"rf-1","refund_amount":"25000"},{"refund_key":"rf-2","refund_amount":"1e3"}]`),
		note("chargeback", "accept", ""),
		note("partial_chargeback", "accept", `,"refund_amount":"5000.00"`),
		note("settlement", "accept", `,"currency":"USD","gross_amount":"12.50"`),
		`{"order_id":7}`, `[]`, `{`,
	)
}
