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
			asked := make(chan *http.Request, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked <- r
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			c, _ := xendit.NewStatusClient(apiKey, srv.URL)
			ev, found, err := c.Status(context.Background(), order)
			switch {
			case tc.fails:
				if err == nil || found || strings.Contains(err.Error(), apiKey) {
					t.Fatalf("found %v, %v; want an error without the key", found, err)
				}
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
