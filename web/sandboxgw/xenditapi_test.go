package sandboxgw_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
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
		first["amount"] != 150000.0 || first["currency"] != "IDR" || first["invoice_url"] != x.base+"/sandbox/pay/ORD-XE-1?t=tok&via=xendit" ||
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

// refund posts a refund with key as its Idempotency-key ("": none).
func (x xenditAPI) refund(ctx context.Context, key string, body any) (int, map[string]any, error) {
	header := http.Header{}
	if key != "" {
		header.Set(xendit.IdempotencyHeader, key)
	}
	b, _ := json.Marshal(body)
	status, raw, err := httpjson.PostWith(ctx, http.DefaultClient, x.base+sandboxgw.XenditAPIPath+"/refunds", x.key, header, b)
	if err != nil {
		return 0, nil, err
	}
	var answer map[string]any
	return status, answer, json.Unmarshal(raw, &answer)
}

func (x xenditAPI) mustRefund(key string, body any) (int, map[string]any) {
	x.t.Helper()
	status, answer, err := x.refund(x.t.Context(), key, body)
	if err != nil {
		x.t.Fatal(err)
	}
	return status, answer
}

// refunds lists the refunds of invoice, every page of two.
func (x xenditAPI) refunds(invoice string) []map[string]any {
	x.t.Helper()
	var all []map[string]any
	for after := ""; ; {
		var page struct {
			Data    []map[string]any `json:"data"`
			HasMore bool             `json:"has_more"`
		}
		status, err := x.call(x.t.Context(), http.MethodGet, "/refunds?limit=2&invoice_id="+invoice+"&after_id="+after, nil, &page)
		if err != nil || status != http.StatusOK {
			x.t.Fatalf("list refunds: %d %v", status, err)
		}
		all = append(all, page.Data...)
		if !page.HasMore {
			return all
		}
		after, _ = page.Data[len(page.Data)-1]["id"].(string)
	}
}

func refundOf(invoice string, amount int64, reference string) map[string]any {
	return map[string]any{"invoice_id": invoice, "amount": amount, "currency": "IDR", "reason": "REQUESTED_BY_CUSTOMER",
		"reference_id": reference, "metadata": map[string]string{"order_id": "ORD-XE-R"}}
}

// A refund of an invoice the gateway reported paid: PENDING in the
// answer, SUCCEEDED in the list. An Idempotency-key is single-use (409
// DUPLICATE_ERROR, never the refund again); refunds add up to the
// payment and no further; an unknown invoice is 404.
func TestXenditRefunds(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	g.Reported(xendit.Name, payments.Fact{OrderID: "ORD-XE-R", TransactionID: "inv-paid-1", Status: models.EventPaid,
		Amount: 150000, Currency: "IDR"})
	status, first := x.mustRefund("ORD-XE-R-R1", refundOf("inv-paid-1", 50000, "ORD-XE-R-R1"))
	id, _ := first["id"].(string)
	if status != http.StatusOK || !strings.HasPrefix(id, "rfd-") || first["status"] != "PENDING" || first["amount"] != 50000.0 ||
		first["invoice_id"] != "inv-paid-1" || first["reference_id"] != "ORD-XE-R-R1" || first["reason"] != "REQUESTED_BY_CUSTOMER" ||
		first["currency"] != "IDR" {
		t.Fatalf("refund: %d %v", status, first)
	}
	if status, answer := x.mustRefund("ORD-XE-R-R1", refundOf("inv-paid-1", 50000, "ORD-XE-R-R1")); status != http.StatusConflict ||
		answer["error_code"] != "DUPLICATE_ERROR" {
		t.Errorf("the same key again: %d %v", status, answer)
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
	}{
		{"above what is left", refundOf("inv-paid-1", 100001, "R-x"), http.StatusBadRequest, "MAXIMUM_REFUND_AMOUNT_REACHED"},
		{"another currency", map[string]any{"invoice_id": "inv-paid-1", "amount": 1, "currency": "PHP", "reason": "OTHERS"},
			http.StatusBadRequest, "API_VALIDATION_ERROR"},
		{"no reason", map[string]any{"invoice_id": "inv-paid-1", "amount": 1}, http.StatusBadRequest, "API_VALIDATION_ERROR"},
		{"no invoice", map[string]any{"amount": 1, "reason": "OTHERS"}, http.StatusBadRequest, "API_VALIDATION_ERROR"},
		{"an unknown invoice", refundOf("inv-none", 1, "R-y"), http.StatusNotFound, "DATA_NOT_FOUND"},
	} {
		if status, answer := x.mustRefund("ORD-XE-R-"+tc.name, tc.body); status != tc.status || answer["error_code"] != tc.code {
			t.Errorf("%s: %d %v, want %d %s", tc.name, status, answer, tc.status, tc.code)
		}
	}
	if status, answer := x.mustRefund("ORD-XE-R-R2", map[string]any{"invoice_id": "inv-paid-1", "reason": "OTHERS"}); status != http.StatusOK ||
		answer["amount"] != 100000.0 {
		t.Errorf("the rest: %d %v", status, answer)
	}
	list := x.refunds("inv-paid-1")
	if len(list) != 2 || list[1]["id"] != id || list[1]["status"] != "SUCCEEDED" || list[0]["amount"] != 100000.0 {
		t.Errorf("refunds %v, want the two, newest first, SUCCEEDED", list)
	}
}

// FailNext fails before acting and keeps no key: the retry with the same
// key refunds, once. A refund without an answer (TimeOutAfterActing)
// took its key and is listed.
func TestXenditRefundFaults(t *testing.T) {
	t.Parallel()
	g, x := xenditEmulator(t)
	g.Reported(xendit.Name, payments.Fact{TransactionID: "inv-paid-2", Status: models.EventPaid, Amount: 1000, Currency: "IDR"})
	g.Faults().FailNext(1)
	if status, answer := x.mustRefund("K-1", refundOf("inv-paid-2", 100, "K-1")); status != http.StatusInternalServerError ||
		answer["error_code"] != "SERVER_ERROR" {
		t.Fatalf("FailNext: %d %v", status, answer)
	}
	if status, _ := x.mustRefund("K-1", refundOf("inv-paid-2", 100, "K-1")); status != http.StatusOK {
		t.Fatalf("the retry: %d", status)
	}
	g.Faults().TimeOutAfterActing(1)
	ctx, giveUp := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := x.refund(ctx, "K-2", refundOf("inv-paid-2", 200, "K-2"))
		done <- err
	}()
	testenv.Eventually(t, "the gateway refunded and holds the answer", func() bool { return g.Faults().Held() == 1 })
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the refund was answered, want no answer")
	}
	if status, answer := x.mustRefund("K-2", refundOf("inv-paid-2", 200, "K-2")); status != http.StatusConflict ||
		answer["error_code"] != "DUPLICATE_ERROR" {
		t.Errorf("K-2 again after no answer: %d %v", status, answer)
	}
	if list := x.refunds("inv-paid-2"); len(list) != 2 || list[0]["reference_id"] != "K-2" || list[1]["reference_id"] != "K-1" {
		t.Errorf("refunds %v, want K-1's and K-2's", list)
	}
}
