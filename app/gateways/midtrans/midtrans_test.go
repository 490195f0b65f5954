package midtrans

import (
	"testing"
	"time"

	"github.com/sekali/sekali/models"
)

const serverKey = "SB-Mid-server-TEST0123456789abcdef"

// The signature formula of docs.midtrans.com/reference/handle-async-payment
// (SHA-512 of order_id + status_code + gross_amount + server key) on the
// sample notification of github.com/Midtrans/midtrans-python-client
// examples/transaction_actions/notification_example.py, with this test's
// server key; computed independently with sha512sum.
func TestMidtransSignatureVector(t *testing.T) {
	t.Parallel()
	n := Notification{OrderID: "test-transaction-321", StatusCode: "201", GrossAmount: "24145.00"}
	const want = "47b0cff6bf53c9f00ae26872cfcf232837e5c130402abc98e224d19dcf763ae73e1b630c08c8eea589ee08091c3eb75bea627127ddae961195eca9715130246f"
	if got := Signature(n, serverKey); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	m, _ := NewProvider(serverKey, "")
	body := []byte(`{"currency":"IDR","fraud_status":"accept","gross_amount":"24145.00","order_id":"test-transaction-321",` +
		`"payment_type":"bank_transfer","status_code":"201","status_message":"Success, Bank Transfer transaction is created",` +
		`"transaction_id":"6ee793df-9b1d-4343-8eda-cc9663b4222f","transaction_status":"pending",` +
		`"transaction_time":"2018-10-24 15:34:33","signature_key":"` + want + `"}`)
	if err := m.Verify(nil, body, time.Now()); err != nil {
		t.Fatalf("the published sample with its signature: %v", err)
	}
	ev, err := m.Parse(nil, body)
	if err != nil || ev.Key != "6ee793df-9b1d-4343-8eda-cc9663b4222f:pending:accept" || ev.Status != models.EventPending || ev.Amount != 24145 {
		t.Fatalf("parsed %+v, %v", ev, err)
	}
}

// A notification of a Snap order_id that replaced a spent one ({order}~2)
// names the order before the "~"; other order_ids are the order's id.
func TestParseReadsTheOrderOfAReplacedKey(t *testing.T) {
	t.Parallel()
	m, _ := NewProvider(serverKey, "")
	for orderID, want := range map[string]string{"ORD-01M8SAJ9RGQ4EEFB71RD0040R7~2": "ORD-01M8SAJ9RGQ4EEFB71RD0040R7",
		"ORD-01M8SAJ9RGQ4EEFB71RD0040R7": "ORD-01M8SAJ9RGQ4EEFB71RD0040R7"} {
		n := Notification{OrderID: orderID, StatusCode: "200", GrossAmount: "75000.00"}
		body := []byte(`{"currency":"IDR","fraud_status":"accept","gross_amount":"75000.00","order_id":"` + orderID + `",` +
			`"payment_type":"gopay","status_code":"200","transaction_id":"tx-replaced","transaction_status":"settlement",` +
			`"transaction_time":"2026-12-01 18:00:00","signature_key":"` + Signature(n, serverKey) + `"}`)
		ev, err := m.Parse(nil, body)
		if err != nil || ev.OrderID != want {
			t.Errorf("order_id %q: parsed order %q, %v; want %q", orderID, ev.OrderID, err, want)
		}
	}
}

// The status API's answers: a transaction under one of the status codes
// Midtrans gives transactions is read; a 404 is a transaction Midtrans
// does not know; every other answer — above all an error inside an HTTP
// 200, which is how Midtrans says most errors — is an error, never
// "unknown".
func TestReadStatus(t *testing.T) {
	tx := func(code, status string) string {
		return `{"status_code":"` + code + `","transaction_id":"tx-1","order_id":"ORD-1","transaction_status":"` + status +
			`","gross_amount":"50000.00","currency":"IDR"}`
	}
	for _, c := range []struct {
		name  string
		code  int
		body  string
		found bool
		err   bool
	}{
		{"settled", 200, tx("200", "settlement"), true, false},
		{"pending", 200, tx("201", "pending"), true, false},
		{"denied", 200, tx("202", "deny"), true, false},
		{"expired", 200, tx("407", "expire"), true, false},
		{"unknown, in the body", 200, `{"status_code":"404","status_message":"Transaction doesn't exist."}`, false, false},
		{"unknown, as HTTP", 404, `{}`, false, false},
		{"an error inside a 200", 200, `{"status_code":"500","status_message":"Sorry. Our system is recovering."}`, false, true},
		{"a wrong key inside a 200", 200, `{"status_code":"401","status_message":"Unknown Merchant server_key/id"}`, false, true},
		{"a transaction under an error code", 200, tx("500", "settlement"), false, true},
		{"no transaction status", 200, `{"status_code":"200"}`, false, true},
		{"not JSON", 200, `<html>`, false, true},
		{"an HTTP error", 502, `{"status_code":"502"}`, false, true},
	} {
		_, found, err := readStatus(c.code, []byte(c.body))
		if found != c.found || (err != nil) != c.err {
			t.Errorf("%s: found %v, error %v; want found %v, an error %v", c.name, found, err, c.found, c.err)
		}
	}
}
