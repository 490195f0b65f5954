package xendit_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

const token = "xnd-callback-token-0123456789"

// sample is the invoice callback of xendit-node's docs/Invoice.md
// (InvoiceCallback, "Usage Example"), as Xendit sends it: in snake_case.
const sample = `{
  "id": "593f4ed1c3d3bb7f39733d83",
  "external_id": "testing-invoice",
  "user_id": "5848fdf860053555135587e7",
  "payment_method": "RETAIL_OUTLET",
  "status": "PAID",
  "merchant_name": "Xendit",
  "amount": 2000000,
  "paid_amount": 2000000,
  "paid_at": "2020-01-14T02:32:50.912Z",
  "payer_email": "test@xendit.co",
  "description": "Invoice webhook test",
  "created": "2020-01-13T02:32:49.827Z",
  "updated": "2020-01-13T02:32:50.912Z",
  "currency": "IDR",
  "payment_channel": "ALFAMART",
  "payment_destination": "TEST815"
}`

// invoice is the sample with members changed (nil removes one).
func invoice(t *testing.T, changes map[string]any) []byte {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(sample))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	for k, v := range changes {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// provider is the adapter for token, for the tests that only verify and
// parse: the API it would confirm a payment with is Xendit's, never
// asked (pipeline_test.go confirms with an emulation).
func provider(t testing.TB) *xendit.Provider {
	t.Helper()
	p, err := xendit.NewProvider(token, apiKey, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Xendit's own sample, with the account's token, is a paid invoice: the
// order is its external_id, the amount its paid_amount in rupiah, and
// with no webhook-id header the key is the invoice id and its status.
func TestXenditSampleCallback(t *testing.T) {
	t.Parallel()
	p := provider(t)
	h := http.Header{}
	h.Set("x-callback-token", token) // as Xendit writes it
	if err := p.Verify(h, []byte(sample), time.Now()); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	ev, err := p.Parse(http.Header{}, []byte(sample))
	want := payments.Event{Key: "593f4ed1c3d3bb7f39733d83:PAID", OrderID: "testing-invoice", TransactionID: "593f4ed1c3d3bb7f39733d83",
		Status: models.EventPaid, Amount: 2000000, Currency: "IDR"}
	if err != nil || !reflect.DeepEqual(ev, want) {
		t.Fatalf("Parse = %+v, %v; want %+v", ev, err, want)
	}
}

// The x-callback-token header must be exactly the account's token, once.
func TestXenditVerify(t *testing.T) {
	t.Parallel()
	p := provider(t)
	for _, tc := range []struct {
		name   string
		values []string
		ok     bool
	}{
		{"the token", []string{token}, true},
		{"no token", nil, false},
		{"an empty token", []string{""}, false},
		{"another token of the same length", []string{strings.ToUpper(token)}, false},
		{"the token without its last character", []string{token[:len(token)-1]}, false},
		{"the token and more", []string{token + "0"}, false},
		{"the token with a space", []string{token + " "}, false},
		{"the token twice", []string{token, token}, false},
		{"a wrong token, then the token", []string{"xnd-callback-token-guessed00", token}, false},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add(xendit.TokenHeader, v)
		}
		err := p.Verify(h, []byte(sample), time.Now())
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: the refusal %q repeats the token", tc.name, err)
		}
	}
}

// XENDIT_CALLBACK_TOKEN is at least 16 characters; the provider also
// needs the secret API key it confirms payments with.
func TestXenditCheckToken(t *testing.T) {
	t.Parallel()
	for tok, ok := range map[string]bool{token: true, "0123456789abcdef": true, "0123456789abcde": false, "": false} {
		if err := xendit.CheckToken(tok); (err == nil) != ok {
			t.Errorf("CheckToken(%q): %v", tok, err)
		}
		if _, err := xendit.NewProvider(tok, apiKey, ""); (err == nil) != ok {
			t.Errorf("NewProvider(%q): %v", tok, err)
		}
		if _, err := xendit.NewSender(tok); (err == nil) != ok {
			t.Errorf("NewSender(%q): %v", tok, err)
		}
	}
	if _, err := xendit.NewProvider(token, token, ""); err == nil {
		t.Error("NewProvider with the token as the secret key: nil, want an error")
	}
}

// Each invoice status Sekali acts on, the key with and without Xendit's
// webhook-id header, and paid_amount in the currency's major unit.
func TestXenditParse(t *testing.T) {
	t.Parallel()
	const id, order = "593f4ed1c3d3bb7f39733d83", "testing-invoice"
	event := func(key string, status models.PaymentEvent, amount int64, currency string) payments.Event {
		return payments.Event{Key: key, OrderID: order, TransactionID: id, Status: status, Amount: amount, Currency: currency}
	}
	for _, tc := range []struct {
		name      string
		changes   map[string]any
		webhookID string
		want      payments.Event
	}{
		{"paid", nil, "", event(id+":PAID", models.EventPaid, 2000000, "IDR")},
		{"settled: the same payment, a second fact", map[string]any{"status": "SETTLED"}, "",
			event(id+":SETTLED", models.EventPaid, 2000000, "IDR")},
		{"the webhook-id header is the key", nil, "whk_6a1c0f3e9b2d",
			event("whk_6a1c0f3e9b2d", models.EventPaid, 2000000, "IDR")},
		{"paid_amount is read, not amount", map[string]any{"amount": 2500000}, "",
			event(id+":PAID", models.EventPaid, 2000000, "IDR")},
		{"a paid_amount written with decimals", map[string]any{"paid_amount": json.Number("2000000.00")}, "",
			event(id+":PAID", models.EventPaid, 2000000, "IDR")},
		{"US dollars: cents", map[string]any{"currency": "USD", "amount": json.Number("12.5"), "paid_amount": json.Number("12.5")}, "",
			event(id+":PAID", models.EventPaid, 1250, "USD")},
		{"expired: no amount is read", map[string]any{"status": "EXPIRED", "paid_amount": nil, "paid_at": nil}, "",
			event(id+":EXPIRED", models.EventExpired, 0, "IDR")},
		{"pending", map[string]any{"status": "PENDING", "paid_amount": nil, "paid_at": nil}, "",
			event(id+":PENDING", models.EventPending, 0, "IDR")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tc.webhookID != "" {
				h.Set("webhook-id", tc.webhookID)
			}
			ev, err := provider(t).Parse(h, invoice(t, tc.changes))
			if err != nil || !reflect.DeepEqual(ev, tc.want) {
				t.Fatalf("Parse = %+v, %v; want %+v", ev, err, tc.want)
			}
		})
	}
}

// Statuses Sekali does not act on are ignored; bodies that are not
// Xendit's invoice callback are refused with the Provider contract's
// codes.
func TestXenditParseRefusesAndIgnores(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		raw     string // or the sample with changes
		changes map[string]any
		want    string
	}{
		// Invoice callbacks carry no refunds: Sekali reads none from them.
		{name: "a status Sekali does not act on", changes: map[string]any{"status": "REFUNDED"}, want: gatewaytest.Ignored},
		{name: "a status in lower case", changes: map[string]any{"status": "paid"}, want: gatewaytest.Ignored},

		{name: "not JSON", raw: `{"id":"593f4ed1c3d3bb7f39733d83",`, want: models.EInvalidPayload},
		{name: "a member twice", raw: `{"id":"inv-1","external_id":"ORD-1","status":"EXPIRED","status":"PAID","paid_amount":1,"currency":"IDR"}`,
			want: models.EInvalidPayload},
		{name: "a JSON array", raw: `[` + sample + `]`, want: models.EMissingField},
		{name: "no status", changes: map[string]any{"status": nil}, want: models.EMissingField},
		{name: "a status that is not a string", changes: map[string]any{"status": 1}, want: models.EMissingField},
		{name: "no invoice id", changes: map[string]any{"id": nil}, want: models.EMissingField},
		{name: "no external_id", changes: map[string]any{"external_id": nil}, want: models.EMissingField},
		{name: "an empty external_id", changes: map[string]any{"external_id": ""}, want: models.EMissingField},
		{name: "an external_id longer than a column", changes: map[string]any{"external_id": strings.Repeat("A", payments.MaxFieldLength+1)},
			want: models.EMissingField},
		{name: "no currency", changes: map[string]any{"currency": nil}, want: models.EMissingField},
		{name: "a currency in lower case", changes: map[string]any{"currency": "idr"}, want: models.EMissingField},
		{name: "paid without paid_amount", changes: map[string]any{"paid_amount": nil}, want: models.EMissingField},
		{name: "paid_amount in quotes", changes: map[string]any{"paid_amount": "2000000"}, want: models.EMissingField},
		{name: "half a rupiah", changes: map[string]any{"paid_amount": json.Number("2000000.5")}, want: models.EInvalid},
		{name: "a negative paid_amount", changes: map[string]any{"paid_amount": -2000000}, want: models.EInvalid},
		{name: "a paid_amount beyond any order", changes: map[string]any{"paid_amount": json.Number("1e30")}, want: models.EInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(tc.raw)
			if tc.raw == "" {
				body = invoice(t, tc.changes)
			}
			ev, err := provider(t).Parse(http.Header{}, body)
			gatewaytest.Refused(t, ev, err, tc.want)
		})
	}
}

// Parse reads the webhook-id header and no other: the pipeline hands it
// only the headers EventHeaders names.
func TestXenditEventHeaders(t *testing.T) {
	t.Parallel()
	p := provider(t)
	if got := p.EventHeaders(); !reflect.DeepEqual(got, []string{"Webhook-Id"}) || p.Name() != "xendit" {
		t.Fatalf("EventHeaders %q, Name %q", got, p.Name())
	}
}
