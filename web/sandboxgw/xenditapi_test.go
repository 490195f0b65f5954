package sandboxgw_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/web/sandboxgw"
)

const xenditKey = "xnd_development_sandboxgw_0123456789"

// xenditAPI is a small client of the gateway's Xendit API: JSON, the
// secret key as the basic-auth user with no password.
type xenditAPI struct {
	t    *testing.T
	base string // the sandbox's address
	key  string
}

func xenditEmulator(t *testing.T) (*sandboxgw.Gateway, xenditAPI) {
	t.Helper()
	g := sandboxgw.New(nil, testenv.SandboxKey, "http://127.0.0.1:1", testenv.Logger(t))
	g.SpeakXenditAPI(xenditKey)
	return g, xenditAPI{t: t, base: serve(t, g), key: xenditKey}
}

// call sends body (nil: none) to path below sandboxgw.XenditAPIPath as
// Sekali's clients do (httpjson), and decodes the answer into v; err is
// no answer, or not JSON.
func (x xenditAPI) call(ctx context.Context, method, path string, body any, v any) (int, error) {
	url := x.base + sandboxgw.XenditAPIPath + path
	var status int
	var answer []byte
	var err error
	if method == http.MethodGet {
		status, answer, err = httpjson.Get(ctx, http.DefaultClient, url, x.key)
	} else {
		b, _ := json.Marshal(body)
		status, answer, err = httpjson.Post(ctx, http.DefaultClient, url, x.key, b)
	}
	if err != nil {
		return 0, err
	}
	return status, json.Unmarshal(answer, v)
}

func (x xenditAPI) do(method, path string, body any) (int, map[string]any) {
	x.t.Helper()
	var answer map[string]any
	status, err := x.call(x.t.Context(), method, path, body, &answer)
	if err != nil {
		x.t.Fatal(err)
	}
	return status, answer
}

// invoices lists the invoices of externalID.
func (x xenditAPI) invoices(externalID string) []map[string]any {
	x.t.Helper()
	var list []map[string]any
	status, err := x.call(x.t.Context(), http.MethodGet, "/v2/invoices?external_id="+externalID, nil, &list)
	if err != nil || status != http.StatusOK {
		x.t.Fatalf("list: %d %v", status, err)
	}
	return list
}

func invoiceOf(order string, amount int64) map[string]any {
	return map[string]any{
		"external_id": order, "amount": amount, "currency": "IDR", "payer_email": "budi@example.id", "description": "Order " + order,
		"success_redirect_url": "https://shop.example/orders/" + order + "?t=tok", "failure_redirect_url": "https://shop.example/orders/" + order,
		"items": []map[string]any{{"name": "Kopi", "quantity": 1, "price": amount}},
	}
}

// An invoice in Xendit's shape, PENDING, its invoice_url the sandbox pay
// page of the order with its token; at both paths (xendit-go sends a
// trailing slash). The same external_id again is a second invoice, as at
// Xendit, x-idempotency-key or not; the list of the external_id has
// both, newest first.
func TestXenditInvoices(t *testing.T) {
	t.Parallel()
	_, x := xenditEmulator(t)
	status, first := x.do(http.MethodPost, "/v2/invoices", invoiceOf("ORD-XE-1", 150000))
	id, _ := first["id"].(string)
	if status != http.StatusOK || id == "" || first["external_id"] != "ORD-XE-1" || first["status"] != "PENDING" ||
		first["amount"] != 150000.0 || first["currency"] != "IDR" || first["invoice_url"] != x.base+"/sandbox/pay/ORD-XE-1?t=tok" ||
		first["expiry_date"] == "" || first["created"] == "" {
		t.Fatalf("create: %d %v", status, first)
	}
	status, second := x.do(http.MethodPost, "/v2/invoices/", invoiceOf("ORD-XE-1", 150000))
	if status != http.StatusOK || second["id"] == id {
		t.Errorf("the same external_id again: %d %v, want a second invoice", status, second)
	}
	list := x.invoices("ORD-XE-1")
	if len(list) != 2 || list[0]["id"] != second["id"] || list[1]["id"] != id {
		t.Errorf("list %v, want the two, newest first", list)
	}
	if list := x.invoices("ORD-XE-none"); len(list) != 0 {
		t.Errorf("list of none: %v", list)
	}
}

// A wrong key is Xendit's 401, for the create and the list, and creates
// nothing; a request without external_id or amount is its 400.
func TestXenditInvoiceRefusals(t *testing.T) {
	t.Parallel()
	_, x := xenditEmulator(t)
	stranger := x
	stranger.key = "xnd_development_someoneelse"
	if status, answer := stranger.do(http.MethodPost, "/v2/invoices", invoiceOf("ORD-XE-2", 1000)); status != http.StatusUnauthorized ||
		answer["error_code"] != "INVALID_API_KEY" || strings.Contains(answer["message"].(string), "someoneelse") {
		t.Errorf("another key: %d %v", status, answer)
	}
	if status, answer := stranger.do(http.MethodGet, "/v2/invoices?external_id=ORD-XE-2", nil); status != http.StatusUnauthorized {
		t.Errorf("another key lists: %d %v", status, answer)
	}
	for name, body := range map[string]map[string]any{
		"no external_id": {"amount": 1000},
		"no amount":      {"external_id": "ORD-XE-2"},
		"half a rupiah":  {"external_id": "ORD-XE-2", "amount": 1000.5},
	} {
		if status, answer := x.do(http.MethodPost, "/v2/invoices", body); status != http.StatusBadRequest || answer["error_code"] != "API_VALIDATION_ERROR" {
			t.Errorf("%s: %d %v", name, status, answer)
		}
	}
	if list := x.invoices("ORD-XE-2"); len(list) != 0 {
		t.Errorf("refused creates made %v", list)
	}
}

// FailNext fails before acting: the retry creates, once. A create
// without an answer (TimeOutAfterActing) made its invoice: the list
// shows it.
func TestXenditInvoiceFaults(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	g.Faults().FailNext(1)
	if status, answer := x.do(http.MethodPost, "/v2/invoices", invoiceOf("ORD-XE-3", 1000)); status != http.StatusInternalServerError ||
		answer["error_code"] != "SERVER_ERROR" {
		t.Fatalf("FailNext: %d %v", status, answer)
	}
	if n := len(x.invoices("ORD-XE-3")); n != 0 {
		t.Fatalf("%d invoices after a failure before acting", n)
	}
	if status, _ := x.do(http.MethodPost, "/v2/invoices", invoiceOf("ORD-XE-3", 1000)); status != http.StatusOK {
		t.Fatalf("the retry: %d", status)
	}

	g.Faults().TimeOutAfterActing(1)
	ctx, giveUp := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		var answer map[string]any
		_, err := x.call(ctx, http.MethodPost, "/v2/invoices", invoiceOf("ORD-XE-4", 1000), &answer)
		done <- err
	}()
	testenv.Eventually(t, "the gateway acted and holds the answer", func() bool { return g.Faults().Held() == 1 })
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the call was answered, want no answer")
	}
	if list := x.invoices("ORD-XE-4"); len(list) != 1 || list[0]["status"] != "PENDING" {
		t.Errorf("after no answer: %v, want the one invoice", list)
	}
}

// An invoice past its invoice_duration is listed EXPIRED.
func TestXenditInvoiceExpires(t *testing.T) {
	t.Parallel()
	_, x := xenditEmulator(t)
	body := invoiceOf("ORD-XE-5", 1000)
	body["invoice_duration"] = 1
	if status, answer := x.do(http.MethodPost, "/v2/invoices", body); status != http.StatusOK {
		t.Fatalf("create: %d %v", status, answer)
	}
	testenv.Eventually(t, "the invoice expired", func() bool {
		list := x.invoices("ORD-XE-5")
		return len(list) == 1 && list[0]["status"] == "EXPIRED"
	})
}
