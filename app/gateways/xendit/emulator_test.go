package xendit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// The Emulator, served by the sandbox gateway as Sekali's settings
// point at it, with the sandbox's fault switches: its invoices as
// Sekali's clients call them, and as the page opener does.

const xenditKey = "xnd_development_sandboxgw_0123456789"

// xenditAPI is a small client of the gateway's Xendit API: JSON, the
// secret key as the basic-auth user with no password.
type xenditAPI struct {
	t    *testing.T
	base string // the sandbox's address
	key  string
}

// xenditEmulator serves a sandbox gateway that emulates Xendit's API to
// xenditKey (and learns invoices from callbacks with token), and returns
// it, its emulation and a client of it.
func xenditEmulator(t *testing.T) (*sandboxgw.Sandbox, *xendit.Emulator, xenditAPI) {
	t.Helper()
	g := sandboxgwtest.New(t, "")
	em := xendit.NewEmulator(xenditKey, token)
	g.Emulate(em)
	return g, em, xenditAPI{t: t, base: sandboxgwtest.Serve(t, g), key: xenditKey}
}

// call sends body (nil: none) to path below xendit.EmulatorPath as
// Sekali's clients do (httpjson), and decodes the answer into v; err is
// no answer, or not JSON.
func (x xenditAPI) call(ctx context.Context, method, path string, body any, v any) (int, error) {
	url := x.base + xendit.EmulatorPath + path
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
	_, _, x := xenditEmulator(t)
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

// GET /v2/invoices/{id} — what Sekali's provider asks before it applies a
// paid callback (Invoice) — answers an invoice the emulation made, as
// the list shows it, and Xendit's 404 INVOICE_NOT_FOUND_ERROR for any
// other. It knows an invoice as the callback the sandbox gateway sends
// of it states it (Notified: a refund callback is no invoice), and as a
// tool's PUT of a callback with the token states it (Sender.Tell); a PUT
// without the token, or of another invoice's callback, changes nothing.
func TestXenditInvoiceByID(t *testing.T) {
	t.Parallel()
	_, em, x := xenditEmulator(t)
	client, err := xendit.NewStatusClient(xenditKey, x.base+xendit.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	invoice := func(id string) (payments.Event, bool) {
		t.Helper()
		ev, found, err := client.Invoice(t.Context(), id)
		if err != nil {
			t.Fatalf("Invoice(%s): %v", id, err)
		}
		return ev, found
	}
	_, made := x.do(http.MethodPost, "/v2/invoices", invoiceOf("ORD-XE-ID", 150000))
	id, _ := made["id"].(string)
	if status, got := x.do(http.MethodGet, "/v2/invoices/"+id, nil); status != http.StatusOK || got["id"] != id || got["status"] != "PENDING" ||
		got["external_id"] != "ORD-XE-ID" || got["invoice_url"] != made["invoice_url"] {
		t.Errorf("the invoice made: %d %v", status, got)
	}
	if ev, found := invoice(id); !found || ev.Status != models.EventPending || ev.OrderID != "ORD-XE-ID" {
		t.Errorf("the status client: %+v %v, want it pending", ev, found)
	}
	if status, got := x.do(http.MethodGet, "/v2/invoices/inv-none", nil); status != http.StatusNotFound || got["error_code"] != "INVOICE_NOT_FOUND_ERROR" {
		t.Errorf("an invoice it never made: %d %v", status, got)
	}
	if _, found := invoice("inv-none"); found {
		t.Error("the status client found an invoice the emulation never made")
	}

	// The sandbox gateway's callback of a payment, as it tells the
	// emulation before it sends it; a refund callback changes no invoice.
	sender := sandboxgwtest.Must(xendit.NewSender(token))
	paid := payments.Fact{EventID: "evt-id-1", OrderID: "ORD-XE-ID", TransactionID: "sbx-tx-id-1", Status: models.EventPaid, Amount: 150000, Currency: "IDR"}
	for _, f := range []payments.Fact{paid, {EventID: "evt-id-2", OrderID: "ORD-XE-ID", TransactionID: "sbx-tx-id-1", Status: models.EventRefunded,
		Amount: 150000, Currency: "IDR", RefundID: "rfd-id-1"}} {
		_, body, err := payments.Notification(sender, f, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		em.Notified(f, body)
	}
	if ev, found := invoice("sbx-tx-id-1"); !found || ev.Status != models.EventPaid || ev.Amount != 150000 || ev.OrderID != "ORD-XE-ID" {
		t.Errorf("the invoice the sandbox gateway called back about: %+v %v, want paid 150000", ev, found)
	}

	// A tool's callback: PUT with the token.
	tell := func(s payments.Sender, f payments.Fact) int { return gatewaytest.Tell(t, x.base, s, f) }
	told := payments.Fact{EventID: "evt-id-3", OrderID: "ORD-XE-TOLD", TransactionID: "inv-told-1", Status: models.EventPaid, Amount: 2500, Currency: "USD"}
	if status := tell(sandboxgwtest.Must(xendit.NewSender("xnd-callback-token-NOT-OURS")), told); status != http.StatusUnauthorized {
		t.Errorf("a PUT with another token: %d, want 401", status)
	}
	if _, found := invoice("inv-told-1"); found {
		t.Error("a PUT with another token made the invoice")
	}
	if status := tell(sender, told); status != http.StatusNoContent {
		t.Errorf("a PUT with the token: %d, want 204", status)
	}
	if ev, found := invoice("inv-told-1"); !found || ev.Status != models.EventPaid || ev.Amount != 2500 || ev.Currency != "USD" || ev.OrderID != "ORD-XE-TOLD" {
		t.Errorf("the invoice told: %+v %v, want paid USD 25.00", ev, found)
	}
	if status := tell(sender, payments.Fact{OrderID: "ORD-XE-TOLD", TransactionID: "inv-told-2", Status: models.EventExpired, Currency: "IDR"}); status != 0 {
		t.Errorf("Tell of an expiry, which Sekali does not confirm: %d, want nothing to tell", status)
	}
	body, _ := sender.Body(told)
	h, signed, _ := sender.Sign(body, "", time.Now())
	req, _ := http.NewRequest(http.MethodPut, x.base+xendit.EmulatorPath+"/v2/invoices/inv-told-other", bytes.NewReader(signed))
	req.Header = h
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if _, found := invoice("inv-told-other"); res.StatusCode != http.StatusBadRequest || found {
		t.Errorf("a PUT of another invoice's callback: %d, found %v; want 400 and nothing", res.StatusCode, found)
	}
}

// A wrong key is Xendit's 401, for the create and the list, and creates
// nothing; a request without external_id or amount is its 400.
func TestXenditInvoiceRefusals(t *testing.T) {
	t.Parallel()
	_, _, x := xenditEmulator(t)
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
	g, _, x := xenditEmulator(t)
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
	_, _, x := xenditEmulator(t)
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

// xenditOpener is the Xendit opener pointed at the emulation.
func xenditOpener(t *testing.T, base string) *xendit.PageOpener {
	t.Helper()
	o, err := xendit.NewPageOpener(xenditKey, base+xendit.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// An invoice has no idempotency key, and Xendit would make a second one
// of the same external_id: the opener looks first. The same key twice is
// one invoice — the second call finds it by external_id.
func TestXenditOpenerSameKeyOneInvoice(t *testing.T) {
	t.Parallel()
	_, _, x := xenditEmulator(t)
	o := xenditOpener(t, x.base)
	first, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-6", "ORD-OP-6"))
	if err != nil {
		t.Fatal(err)
	}
	if first.ObjectID == "" || first.RedirectURL != x.base+"/sandbox/pay/ORD-OP-6?t=tok&via=xendit" {
		t.Errorf("page %+v", first)
	}
	again, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-6", "ORD-OP-6"))
	if err != nil || again != first {
		t.Errorf("again: %+v, %v; want %+v", again, err, first)
	}
	all := x.invoices("ORD-OP-6")
	if len(all) != 1 {
		t.Fatalf("%d invoices, want 1", len(all))
	}
	if inv := all[0]; inv["amount"] != 150000.0 || inv["currency"] != "IDR" || inv["payer_email"] != "budi@example.id" ||
		inv["success_redirect_url"] != "https://shop.example/orders/ORD-OP-6?t=tok" {
		t.Errorf("invoice %v", inv)
	}
}

// A 500 before the gateway acted is not a refusal; the repeat finds no
// invoice and makes the one.
func TestXenditOpenerFailNext(t *testing.T) {
	t.Parallel()
	g, _, x := xenditEmulator(t)
	o := xenditOpener(t, x.base)
	g.Faults().FailNext(1)
	if _, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-7", "ORD-OP-7")); err == nil || gatewaycalls.IsRefused(err) {
		t.Fatalf("FailNext: %v, want a plain error", err)
	}
	page, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-7", "ORD-OP-7"))
	if err != nil {
		t.Fatal(err)
	}
	if all := x.invoices("ORD-OP-7"); len(all) != 1 || all[0]["id"] != page.ObjectID {
		t.Errorf("invoices %v, want only %s", all, page.ObjectID)
	}
}

// The gateway makes the invoice and does not answer; the caller's
// deadline passes: not a refusal. The repeat finds that invoice by
// external_id and answers with it: one invoice.
func TestXenditOpenerTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, _, x := xenditEmulator(t)
	o := xenditOpener(t, x.base)
	err := sandboxgwtest.OpenLate(t, g, o, sandboxgwtest.PageOf("ORD-OP-8", "ORD-OP-8"))
	if err == nil || gatewaycalls.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no answer: %v, want the deadline", err)
	}
	created := x.invoices("ORD-OP-8")
	if len(created) != 1 {
		t.Fatalf("%d invoices, want 1", len(created))
	}
	page, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-8", "ORD-OP-8"))
	if err != nil || page.ObjectID != created[0]["id"] || page.RedirectURL != created[0]["invoice_url"] {
		t.Errorf("the repeat: %+v, %v; want %v", page, err, created[0]["id"])
	}
	if n := len(x.invoices("ORD-OP-8")); n != 1 {
		t.Errorf("%d invoices, want 1", n)
	}
}

// A wrong key stops the call at the look: nothing is created, and the
// error is not a "no" to the order (the key is Sekali's setting: fixed, a
// repeat goes through).
func TestXenditOpenerWrongKey(t *testing.T) {
	t.Parallel()
	_, _, x := xenditEmulator(t)
	o, err := xendit.NewPageOpener("xnd_development_wrong_key_00", x.base+xendit.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.OpenPage(t.Context(), sandboxgwtest.PageOf("ORD-OP-9", "ORD-OP-9")); err == nil || gatewaycalls.IsRefused(err) || !strings.Contains(err.Error(), "401") {
		t.Errorf("a wrong key: %v, want an error that is not a refusal, naming the 401", err)
	}
	if n := len(x.invoices("ORD-OP-9")); n != 0 {
		t.Errorf("%d invoices, want 0", n)
	}
}

// The emulated invoice page is on the address its API was asked at, and
// sends the customer back to the shop's return URL
// (sandboxgwtest.PageReturnsToTheShop).
func TestXenditPageReturnsToTheShopsReturnURL(t *testing.T) {
	t.Parallel()
	sandboxgwtest.PageReturnsToTheShop(t, func(g *sandboxgw.Sandbox) { g.Emulate(xendit.NewEmulator(xenditKey, "")) },
		func(base string) (gatewaycalls.PageOpener, error) {
			return xendit.NewPageOpener(xenditKey, base+xendit.EmulatorPath)
		}, "ORD-RET~2")
}

// The sandbox's QA panel speaking Xendit's format refuses what Xendit
// cannot say: a failed invoice, and so out of order (which sends a
// failure after the payment).
func TestXenditPlansOfTheQAPanel(t *testing.T) {
	t.Parallel()
	g := sandboxgwtest.New(t, "")
	g.Speak(sandboxgwtest.Must(xendit.NewSender("xnd-callback-token-plan-0123")))
	if _, err := g.ParsePlan("paid", "1", "sequential", xendit.Name); err != nil {
		t.Errorf("a Xendit payment: %v", err)
	}
	for _, bad := range [][4]string{
		{"failed", "1", "sequential", xendit.Name}, // Xendit has no failed invoice
		{"paid", "1", "out_of_order", xendit.Name}, // out of order sends a failure
	} {
		if _, err := g.ParsePlan(bad[0], bad[1], bad[2], bad[3]); models.ErrorCode(err) != models.EInvalid {
			t.Errorf("ParsePlan%v = %v, want invalid_request", bad, err)
		}
	}
}
