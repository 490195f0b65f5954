package sandbox_test

import (
	"net/http"
	"testing"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

const validBody = `{"order_id":"ORD-01J0000000000000000000000A","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"}`

// FuzzSandboxParse: whatever a callback's body, Parse refuses it with
// the code its kind of fault has, or reads an event the pipeline can
// apply, keyed by its webhook-id, and reads the canonical spelling of a
// body as the body (gatewaytest.FuzzParse). make fuzz runs it.
func FuzzSandboxParse(f *testing.F) {
	seeds := []string{
		validBody,
		`{"currency":"IDR","paid_amount":150000,"payment_status":"paid","transaction_id":"tx-1","order_id":"ORD-1"}`,
		"{\n  \"order_id\" : \"ORD-1\",\t\"transaction_id\":\"tx-1\",\r\n\"payment_status\":\"failed\",\"paid_amount\": 0 ,\"currency\":\"USD\"}\n",
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"pending","paid_amount":0,"currency":"IDR","meta":{"b":[1,{"d":2,"c":3}],"a":null}}`,
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":1e3,"currency":"IDR"}`,
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":1.0,"currency":"IDR"}`,
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"expired","paid_amount":-0,"currency":"IDR"}`,
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":9223372036854775807,"currency":"IDR"}`,
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":9223372036854775808,"currency":"IDR"}`,
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":-1,"currency":"IDR"}`,
		`{"order_id":"ORD\u002d1","transaction_id":"t\u00e9x\ud83d\ude00","payment_status":"p\u0061id","paid_amount":5,"currency":"\u0049DR"}`,
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"} trailing`,
		`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"}{}`,
		`{"order_id":"ORD-1"`,
		``,
		`[` + validBody + `]`,
		`"just a string"`,
		`{"order_id":"A","order_id":"B","transaction_id":"tx","payment_status":"paid","paid_amount":1,"currency":"IDR"}`,
		`{"order_id":null,"transaction_id":"tx","payment_status":"paid","paid_amount":1,"currency":"IDR"}`,
		`{"order_id":"ORD-1","transaction_id":"tx","payment_status":"paid","paid_amount":"150000","currency":"IDR"}`,
		"{\"order_id\":\"\xff\xfe\",\"transaction_id\":\"tx\",\"payment_status\":\"paid\",\"paid_amount\":1,\"currency\":\"IDR\"}",
		"\ufeff" + validBody,
	}
	gatewaytest.FuzzParse(f, gatewaytest.ParseCase{
		Provider:       sandbox.NewProvider(nil),
		KeyIsWebhookID: true,
		Check: func(t *testing.T, _ http.Header, body []byte, ev payments.Event) {
			if ev.OrderID == "" {
				t.Fatalf("Parse accepted an event without order_id: %+v", ev)
			}
			if _, err := canonjson.Canonicalize(body); err != nil {
				t.Fatalf("Parse accepted a body that Canonicalize refuses: %v", err)
			}
		},
		// The sandbox reads its body with canonjson: what canonjson
		// refuses is invalid_payload, JSON without an event's fields
		// missing_field, and a malformed amount invalid_request.
		Refused: func(t *testing.T, body []byte, err error) {
			_, canonErr := canonjson.Canonicalize(body)
			switch code := models.ErrorCode(err); {
			case canonErr != nil && code != models.EInvalidPayload:
				t.Fatalf("Parse of invalid JSON (%v) answered %q, want invalid_payload", canonErr, code)
			case canonErr == nil && code != models.EMissingField && code != models.EInvalid:
				t.Fatalf("Parse of valid JSON answered %q (%v), want missing_field or invalid_request", code, err)
			}
		},
	}, seeds...)
}
