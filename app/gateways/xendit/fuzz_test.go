package xendit_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
)

// FuzzXenditParse: whatever a callback's body, Parse refuses it, ignores
// it, or reads an event the pipeline can apply, and reads the canonical
// spelling of a body as the body (gatewaytest.FuzzParse). The seeds are
// the invoice callback of Xendit's docs, its statuses and amounts, and
// refund callbacks. make fuzz runs it.
func FuzzXenditParse(f *testing.F) {
	refund := func(event, status, amount, meta string) string {
		return `{"event":"` + event + `","business_id":"5f27a14a9bf05c73dd040bc8","created":"2026-12-02T14:52:21.566Z","data":{"id":"rfd-1",` +
			`"invoice_id":"593f4ed1c3d3bb7f39733d83","amount":` + amount + `,"currency":"IDR","status":"` + status + `","metadata":` + meta + `}}`
	}
	gatewaytest.FuzzParse(f, gatewaytest.ParseCase{Provider: provider(f), KeyIsWebhookID: true},
		sample,
		`{"id":"inv-1","external_id":"ORD-1","status":"SETTLED","paid_amount":2000000.00,"currency":"IDR"}`,
		`{"id":"inv-1","external_id":"ORD-1","status":"PAID","paid_amount":12.5,"currency":"USD"}`,
		`{"id":"inv-1","external_id":"ORD-1","status":"PAID","paid_amount":"12.5","currency":"USD"}`,
		`{"id":"inv-1","external_id":"ORD-1","status":"PAID","paid_amount":1e400,"currency":"IDR"}`,
		`{"id":"inv-1","external_id":"ORD-1","status":"EXPIRED","currency":"IDR"}`,
		`{"id":"inv-1","external_id":"ORD-1","status":"PENDING","currency":"IDR"}`,
		`{"id":"inv-1","external_id":"ORD-1","status":"VOIDED","currency":"IDR"}`,
		refund("refund.succeeded", "SUCCEEDED", "20000", `{"order_id":"ORD-1"}`),
		refund("refund.failed", "FAILED", "20000", `null`),
		refund("refund.succeeded", "SUCCEEDED", "0", `{}`),
		refund("refund.succeeded", "SUCCEEDED", "-1", `{"order_id":7}`),
		`{"event":"refund.succeeded","data":[]}`,
		`[]`, `null`, `{`, "\ufeff{}",
	)
}
