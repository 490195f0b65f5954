package xendit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/models"
)

const apiKey = "xnd_development_0123456789"

// XENDIT_SECRET_KEY is a secret API key, "xnd_…".
func TestXenditCheckSecretKey(t *testing.T) {
	t.Parallel()
	for key, ok := range map[string]bool{
		apiKey: true, "xnd_production_0123456789": true, "xnd_0123": true,
		"xnd_012": false,
		token:     false, "": false, "XND_development_0123456789": false,
	} {
		if err := xendit.CheckSecretKey(key); (err == nil) != ok {
			t.Errorf("CheckSecretKey(%q): %v", key, err)
		}
		if _, err := xendit.NewStatusClient(key, ""); (err == nil) != ok {
			t.Errorf("NewStatusClient(%q): %v", key, err)
		}
	}
	c, _ := xendit.NewStatusClient(apiKey, "")
	if c.BaseURL != "https://api.xendit.co" || c.Client.Timeout != httpjson.DefaultTimeout || c.Provider() != "xendit" {
		t.Fatalf("defaults: %s, timeout %s, %s", c.BaseURL, c.Client.Timeout, c.Provider())
	}
}

// Status asks GET /v2/invoices?external_id= with the secret key as the
// basic-auth user; of the order's invoices a paid one answers, else the
// first Xendit lists, as its callback would (keyed id:status).
func TestXenditStatus(t *testing.T) {
	t.Parallel()
	const order = "ORD-01JDY86K809K4DBYWC2041T3P8"
	inv := func(id, status string) string {
		return fmt.Sprintf(`{"id":%q,"external_id":%q,"status":%q,"amount":50000,"paid_amount":50000,"currency":"IDR"}`, id, order, status)
	}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		found  bool
		key    string
		event  models.PaymentEvent
		fails  bool
	}{
		{name: "no invoice", status: 404, body: `{"error_code":"INVOICE_NOT_FOUND_ERROR"}`},
		{name: "an empty list", status: 200, body: `[]`},
		{name: "a paid invoice", status: 200, body: "[" + inv("inv-1", "PAID") + "]", found: true, key: "inv-1:PAID", event: models.EventPaid},
		{name: "a settled one", status: 200, body: "[" + inv("inv-1", "SETTLED") + "]", found: true, key: "inv-1:SETTLED", event: models.EventPaid},
		{name: "an expired invoice, then a paid one", status: 200, body: "[" + inv("inv-1", "EXPIRED") + "," + inv("inv-2", "PAID") + "]",
			found: true, key: "inv-2:PAID", event: models.EventPaid},
		{name: "none paid: the first", status: 200, body: "[" + inv("inv-1", "PENDING") + "," + inv("inv-2", "EXPIRED") + "]",
			found: true, key: "inv-1:PENDING", event: models.EventPending},
		{name: "a status Sekali does not act on is nothing", status: 200, body: "[" + inv("inv-1", "VOIDED") + "]"},
		{name: "an invoice that does not parse", status: 200, body: `[{"id":"inv-1","status":"PAID"}]`, fails: true},
		{name: "not a list", status: 200, body: `{"data":[]}`, fails: true},
		{name: "an unauthorized key", status: 401, body: `{"error_code":"INVALID_API_KEY"}`, fails: true},
		{name: "a server error", status: 503, body: `{"error_code":"SERVER_ERROR"}`, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, asked := answering(t, tc.status, tc.body)
			ev, found, err := c.Status(context.Background(), order)
			switch {
			case tc.fails:
				failedWithoutTheKey(t, found, err)
			case err != nil || found != tc.found || ev.Key != tc.key || ev.Status != tc.event:
				t.Fatalf("Status = %+v, %v, %v; want %s %s", ev, found, err, tc.key, tc.event)
			case found && (ev.OrderID != order || ev.Currency != "IDR"):
				t.Fatalf("Status = %+v", ev)
			}
			r := <-asked
			if user, pass, _ := r.BasicAuth(); r.URL.Path != "/v2/invoices" || r.URL.Query().Get("external_id") != order || user != apiKey || pass != "" {
				t.Fatalf("asked %s as %q:%q", r.URL, user, pass)
			}
		})
	}
}

// Invoice asks GET /v2/invoices/{id} with the secret key as the basic-auth
// user, and reads the invoice as its callback (keyed id:status). Only
// Xendit's own "no such invoice" is nothing found: any other answer that
// is not an invoice — a 404 that is not Xendit's too, as from a wrong
// XENDIT_API_URL — is an error, for the callback to be sent again.
func TestXenditInvoice(t *testing.T) {
	t.Parallel()
	const id = "inv/1" // escaped in the path
	for _, tc := range []struct {
		name   string
		status int
		body   string
		found  bool
		key    string
		amount int64
		fails  bool
	}{
		{name: "paid", status: 200, body: `{"id":"inv/1","external_id":"ORD-1","status":"PAID","amount":50000,"paid_amount":50000,"currency":"IDR"}`,
			found: true, key: "inv/1:PAID", amount: 50000},
		{name: "settled", status: 200, body: `{"id":"inv/1","external_id":"ORD-1","status":"SETTLED","amount":50000,"paid_amount":50000,"currency":"IDR"}`,
			found: true, key: "inv/1:SETTLED", amount: 50000},
		{name: "pending", status: 200, body: `{"id":"inv/1","external_id":"ORD-1","status":"PENDING","amount":50000,"currency":"IDR"}`,
			found: true, key: "inv/1:PENDING"},
		{name: "Xendit has no such invoice", status: 404, body: `{"error_code":"INVOICE_NOT_FOUND_ERROR","message":"Could not find invoice"}`},
		{name: "a 404 that is not Xendit's", status: 404, body: `<html>Not Found</html>`, fails: true},
		{name: "paid without paid_amount", status: 200, body: `{"id":"inv/1","external_id":"ORD-1","status":"PAID","currency":"IDR"}`, fails: true},
		{name: "an unauthorized key", status: 401, body: `{"error_code":"INVALID_API_KEY"}`, fails: true},
		{name: "a server error", status: 500, body: `{"error_code":"SERVER_ERROR"}`, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, asked := answering(t, tc.status, tc.body)
			ev, found, err := c.Invoice(context.Background(), id)
			switch {
			case tc.fails:
				failedWithoutTheKey(t, found, err)
			case err != nil || found != tc.found || ev.Key != tc.key || ev.Amount != tc.amount:
				t.Fatalf("Invoice = %+v, %v, %v; want %s of %d", ev, found, err, tc.key, tc.amount)
			case found && (ev.OrderID != "ORD-1" || ev.TransactionID != id || ev.Currency != "IDR"):
				t.Fatalf("Invoice = %+v", ev)
			}
			r := <-asked
			if user, pass, _ := r.BasicAuth(); r.URL.EscapedPath() != "/v2/invoices/inv%2F1" || user != apiKey || pass != "" {
				t.Fatalf("asked %s as %q:%q", r.URL.EscapedPath(), user, pass)
			}
		})
	}
}

// answering is a status client of a Xendit API that answers every
// request with status and body, and the requests it gets.
func answering(t *testing.T, status int, body string) (*xendit.StatusClient, <-chan *http.Request) {
	t.Helper()
	asked := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- r
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := xendit.NewStatusClient(apiKey, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, asked
}

// failedWithoutTheKey expects an answer that is an error, which does not
// repeat the secret key.
func failedWithoutTheKey(t *testing.T, found bool, err error) {
	t.Helper()
	if err == nil || found || strings.Contains(err.Error(), apiKey) {
		t.Fatalf("found %v, %v; want an error without the key", found, err)
	}
}
