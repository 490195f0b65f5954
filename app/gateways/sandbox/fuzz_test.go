package sandbox_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/models"
)

const validBody = `{"order_id":"ORD-01J0000000000000000000000A","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"}`

func FuzzSandboxParse(f *testing.F) {
	seeds := []struct{ id, body string }{
		{"msg_1", validBody},
		{"msg_1", `{"currency":"IDR","paid_amount":150000,"payment_status":"paid","transaction_id":"tx-1","order_id":"ORD-1"}`},
		{"msg_2", "{\n  \"order_id\" : \"ORD-1\",\t\"transaction_id\":\"tx-1\",\r\n\"payment_status\":\"failed\",\"paid_amount\": 0 ,\"currency\":\"USD\"}\n"},
		{"msg_3", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"pending","paid_amount":0,"currency":"IDR","meta":{"b":[1,{"d":2,"c":3}],"a":null}}`},
		{"msg_4", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":1e3,"currency":"IDR"}`},
		{"msg_5", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":1.0,"currency":"IDR"}`},
		{"msg_6", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"expired","paid_amount":-0,"currency":"IDR"}`},
		{"msg_7", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":9223372036854775807,"currency":"IDR"}`},
		{"msg_8", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":9223372036854775808,"currency":"IDR"}`},
		{"msg_9", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":-1,"currency":"IDR"}`},
		{"msg_10", `{"order_id":"ORD\u002d1","transaction_id":"t\u00e9x\ud83d\ude00","payment_status":"p\u0061id","paid_amount":5,"currency":"\u0049DR"}`},
		{"msg_11", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"} trailing`},
		{"msg_12", `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"}{}`},
		{"msg_13", `{"order_id":"ORD-1"`},
		{"msg_14", ``},
		{"", validBody},
		{"msg_15", `[` + validBody + `]`},
		{"msg_16", `"just a string"`},
		{"msg_17", `{"order_id":"A","order_id":"B","transaction_id":"tx","payment_status":"paid","paid_amount":1,"currency":"IDR"}`},
		{"msg_18", `{"order_id":null,"transaction_id":"tx","payment_status":"paid","paid_amount":1,"currency":"IDR"}`},
		{"msg_19", `{"order_id":"ORD-1","transaction_id":"tx","payment_status":"paid","paid_amount":"150000","currency":"IDR"}`},
		{"msg_20", "{\"order_id\":\"\xff\xfe\",\"transaction_id\":\"tx\",\"payment_status\":\"paid\",\"paid_amount\":1,\"currency\":\"IDR\"}"},
		{"msg_21", "\ufeff" + validBody},
	}
	for _, s := range seeds {
		f.Add(s.id, []byte(s.body))
	}
	p := sandbox.NewProvider(nil)
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		var h http.Header // a nil header must work too
		if id != "" {
			h = http.Header{}
			h.Set("webhook-id", id)
		}
		ev, err := p.Parse(h, body)
		canonical, canonErr := canonjson.Canonicalize(body)

		if err != nil {
			code := models.ErrorCode(err)
			switch {
			case code != models.EInvalidPayload && code != models.EMissingField:
				t.Fatalf("Parse error %v has code %q, want invalid_payload or missing_field", err, code)
			case canonErr != nil && code != models.EInvalidPayload:
				t.Fatalf("Parse of invalid JSON (%v) answered %q, want invalid_payload", canonErr, code)
			case canonErr == nil && code != models.EMissingField:
				t.Fatalf("Parse of valid JSON answered %q (%v), want missing_field", code, err)
			}
		} else {
			switch {
			case ev.OrderID == "" || ev.TransactionID == "":
				t.Fatalf("Parse accepted an event without order_id or transaction_id: %+v", ev)
			case !ev.Status.Valid():
				t.Fatalf("Parse accepted payment_status %q", ev.Status)
			case ev.Amount < 0:
				t.Fatalf("Parse accepted paid_amount %d", ev.Amount)
			case !models.ValidCurrency(ev.Currency):
				t.Fatalf("Parse accepted currency %q", ev.Currency)
			case ev.Key != h.Get("webhook-id"):
				t.Fatalf("Key = %q, want the webhook-id %q", ev.Key, h.Get("webhook-id"))
			case canonErr != nil:
				t.Fatalf("Parse accepted a body that Canonicalize refuses: %v", canonErr)
			}
			if ev.Fingerprint != "" {
				t.Fatalf("Parse set Fingerprint %q: the pipeline computes it, once, for every provider", ev.Fingerprint)
			}
		}

		// Key order and whitespace must change nothing: the canonical
		// spelling parses to the same event, or fails the same way.
		if canonErr != nil {
			return
		}
		ev2, err2 := p.Parse(h, canonical)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("Parse(body) error %v, Parse(canonical) error %v\nbody:      %q\ncanonical: %q", err, err2, body, canonical)
		}
		if err == nil && !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("Parse(body) = %+v\nParse(canonical) = %+v", ev, ev2)
		}
	})
}
