package xendit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Xendit's callbacks through Sekali's payments pipeline, on a database of
// their own (gatewaytest.Pipeline): what app/payments checks of every
// gateway, for Xendit, in Xendit's package — deleting the package deletes
// them with it.
//
// Sekali confirms every paid Xendit callback with Xendit's invoice API
// (its token is static): each test's pipeline asks the emulation of that
// API (the Emulator, as the sandbox gateway serves it), which knows an
// invoice once the test has made it genuine (pipeline.genuine).

const price = gatewaytest.Price

// pipeline is the payments pipeline with Xendit's adapter, which asks
// the emulated API behind a switch that takes it down.
type pipeline struct {
	*gatewaytest.Pipeline
	api    string       // the API's URL, as XENDIT_API_URL names it
	outage atomic.Int32 // up, unavailable or unreachable
}

// The API's outages (pipeline.outage).
const (
	up          = iota
	unavailable // it answers 503
	unreachable // it answers nothing: the connection closes
)

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	x := gatewaytest.Emulate(t, xendit.NewEmulator(apiKey, token))
	emulation, err := url.Parse(x.Base)
	if err != nil {
		t.Fatal(err)
	}
	toEmulation := httputil.NewSingleHostReverseProxy(emulation)
	p := &pipeline{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p.outage.Load() {
		case unavailable:
			http.Error(w, `{"error_code":"SERVER_ERROR","message":"down for this test"}`, http.StatusServiceUnavailable)
		case unreachable:
			panic(http.ErrAbortHandler) // closes the connection without an answer
		default:
			toEmulation.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(front.Close)
	p.api = front.URL + xendit.EmulatorPath
	provider, err := xendit.NewProvider(token, apiKey, p.api)
	if err != nil {
		t.Fatal(err)
	}
	p.Pipeline = gatewaytest.NewPipeline(t, provider)
	return p
}

// genuine makes the invoice of callback d exist at the emulated Xendit as
// d states it, with the emulation's PUT /v2/invoices/{id} of d as sent
// (the replayer's way): d is then a genuine callback.
func (p *pipeline) genuine(d gatewaytest.Delivery) gatewaytest.Delivery {
	p.T.Helper()
	var inv struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(d.Body, &inv); err != nil {
		p.T.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, p.api+"/v2/invoices/"+url.PathEscape(inv.ID), bytes.NewReader(d.Body))
	if err != nil {
		p.T.Fatal(err)
	}
	req.Header = d.Header.Clone()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.T.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(res.Body)
		p.T.Fatalf("telling the emulation of invoice %s: %d %s", inv.ID, res.StatusCode, b)
	}
	return d
}

// invoiceCallback is Xendit's invoice callback, with the right token.
func invoiceCallback(orderID, invoiceID, status, paidAmount, currency string) gatewaytest.Delivery {
	b, _ := json.Marshal(map[string]any{"id": invoiceID, "external_id": orderID, "status": status,
		"paid_amount": json.Number(paidAmount), "amount": json.Number(paidAmount), "currency": currency, "merchant_name": "Sekali"})
	return gatewaytest.Delivery{Provider: xendit.Name, Header: http.Header{xendit.TokenHeader: {token}}, Body: b}
}

// refundCallback is Xendit's refund callback of refund rfdID of invoice
// inv (Xendit's refund webhook notification).
func refundCallback(event, orderID, inv, rfdID string, amount int64, status, failure string) gatewaytest.Delivery {
	data := map[string]any{"id": rfdID, "payment_id": nil, "invoice_id": inv, "amount": json.Number(fmt.Sprint(amount)),
		"payment_method_type": "EWALLET", "channel_code": "OVO", "currency": "IDR", "status": status, "reason": "REQUESTED_BY_CUSTOMER",
		"reference_id": orderID + "-R1", "failure_code": nil, "refund_fee_amount": nil, "metadata": nil}
	if failure != "" {
		data["failure_code"] = failure
	}
	if orderID != "" {
		data["metadata"] = map[string]string{"order_id": orderID}
	}
	b, _ := json.Marshal(map[string]any{"event": event, "business_id": "5f27a14a9bf05c73dd040bc8", "created": "2026-12-02T14:52:21.566Z", "data": data})
	return gatewaytest.Delivery{Provider: xendit.Name, Header: http.Header{xendit.TokenHeader: {token}}, Body: b}
}

// Xendit's callbacks apply once (gatewaytest.AppliesOnce): PAID then
// SETTLED, in either order, are one payment; a guessed token is refused;
// an invoice status Sekali does not act on is ignored.
func TestXenditCallbacksApplyOnce(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	gatewaytest.AppliesOnce(t, p.Pipeline, gatewaytest.Notifications{
		Name: xendit.Name,
		Paid: func(orderID, ref string, amount int64, currency string, variant int) gatewaytest.Delivery {
			status := []string{"PAID", "SETTLED"}[variant]
			return p.genuine(invoiceCallback(orderID, ref, status, fmt.Sprint(amount), currency))
		},
		Changed: func(d gatewaytest.Delivery) gatewaytest.Delivery {
			return gatewaytest.WithMembers(d, map[string]any{"extra_field_the_gateway_added": "something else"})
		},
		Forged: func(orderID, ref string) gatewaytest.Delivery {
			d := invoiceCallback(orderID, ref, "PAID", "50000", "IDR")
			d.Header.Set(xendit.TokenHeader, "a-guessed-token-0000")
			return d
		},
		Ignored: func(orderID string) gatewaytest.Delivery {
			return invoiceCallback(orderID, "inv-void", "VOIDED", "0", "IDR")
		},
	})
}

// A callback two parsers could read differently is refused before
// anything is written: members equal but for case are a 400. paid_amount,
// a number in Xendit's documents, in quotes is a 422.
func TestXenditAmbiguousCallbacksAreRefused(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, _ := p.Order()
	d := invoiceCallback(id, "inv-case-"+id, "PAID", "50000", "IDR")
	if !strings.Contains(string(d.Body), `"status":"PAID"`) {
		t.Fatalf("no status in %s", d.Body)
	}
	d.Body = []byte(strings.Replace(string(d.Body), `"status":"PAID"`, `"status":"PAID","Status":"EXPIRED"`, 1))
	if !json.Valid(d.Body) {
		t.Fatalf("not JSON: %s", d.Body)
	}
	if out := p.Send(d); out.Status() != 400 || out.Refusal != models.EInvalidPayload {
		t.Errorf("members equal but for case: %d %s (%s), want 400 invalid_payload\n%s", out.Status(), out.Result, out.Detail, d.Body)
	}
	if n := p.Callbacks(id); n != 0 {
		t.Errorf("%d callbacks recorded from a refused body", n)
	}
	quoted := invoiceCallback(id, "inv-quoted-"+id, "PAID", "50000", "IDR")
	quoted.Body = []byte(strings.Replace(string(quoted.Body), `"paid_amount":50000`, `"paid_amount":"50000"`, 1))
	if out := p.Send(quoted); out.Status() != 422 || out.Refusal != models.EMissingField {
		t.Errorf("paid_amount as a string: %d %s (%s), want 422 missing_field\n%s", out.Status(), out.Result, out.Detail, quoted.Body)
	}
}

// Xendit answers a refund PENDING, so its parser reads refund callbacks
// as well as invoices: a refund.failed callback is 200 and
// gives the money back; a refund.succeeded callback of a refund made in
// Xendit's dashboard (no metadata) refunds the order by its invoice.
func TestXenditRefundCallbacks(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, sku := p.Order()
	inv := "inv-rf-" + id
	if out := p.Send(p.genuine(invoiceCallback(id, inv, "PAID", fmt.Sprint(price), "IDR"))); out.Result != models.ResultProcessed {
		t.Fatalf("the payment: %s (%s)", out.Result, out.Detail)
	}
	// Sekali's refunder got PENDING (refunds.Service applies the answer so).
	answer := payments.Event{Key: "refund:" + id + "-R1", OrderID: id, TransactionID: inv, Status: models.EventRefunded, Amount: price, Currency: "IDR",
		Refunds: []payments.Refund{{Key: "rfd-1-" + id, Amount: price, Status: models.RefundPending}}}
	if out, err := p.Pay.ApplyAnswer(context.Background(), xendit.Name, "req-refund-1", answer); err != nil || out.OrderStatus != models.OrderRefunded {
		t.Fatalf("the PENDING answer: %+v %v", out, err)
	}
	out := p.Send(refundCallback("refund.failed", id, inv, "rfd-1-"+id, price, "FAILED", "REFUND_FAILED"))
	m := p.Money(id, sku)
	if out.Status() != 200 || out.Word() != models.ResultProcessed || m.Order != models.OrderPaid || m.Refunded != 0 ||
		m.Refunds["rfd-1-"+id] != models.RefundFailed || m.Reasons["rfd-1-"+id] != "REFUND_FAILED" || m.Emails != 0 {
		t.Errorf("refund.failed: %d %s (%s); %+v; want 200 processed, the order paid again", out.Status(), out.Word(), out.Detail, m)
	}
	out = p.Send(refundCallback("refund.succeeded", "", inv, "rfd-2-"+id, 20000, "SUCCEEDED", ""))
	m = p.Money(id, sku)
	if out.Status() != 200 || m.Order != models.OrderPartiallyRefunded || m.Refunded != 20000 || m.Emails != 1 {
		t.Errorf("a dashboard refund.succeeded: %d %s (%s); %+v; want partially refunded, one email", out.Status(), out.Word(), out.Detail, m)
	}
	if out := p.Send(refundCallback("refund.succeeded", "", inv, "rfd-2-"+id, 20000, "SUCCEEDED", "")); out.Word() != models.ResultDuplicate {
		t.Errorf("the same callback again: %s, want duplicate", out.Word())
	}
	if out := p.Send(refundCallback("refund.succeeded", "", "inv-not-ours", "rfd-3-"+id, 20000, "SUCCEEDED", "")); out.Word() != models.ResultIgnored {
		t.Errorf("a refund of an invoice this shop does not know: %s, want ignored", out.Word())
	}
	p.Audit()
}

// The status poll asks Xendit's invoice API about the pending orders near
// their expiry: of an order's invoices the paid one is applied (an
// expired one listed first is passed over), an order Xendit lists none of
// is no error, an order far from its expiry is not asked about. The
// invoice's callback, arriving late with Xendit's id:status key, is a
// duplicate of the poll.
func TestXenditPollThenCallback(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	paid, _ := p.Order()    // Xendit has its invoice PAID
	unknown, _ := p.Order() // Xendit lists none
	far, _ := p.Order()     // expires later than the window
	p.DB.Model(&models.Order{}).Where("id = ?", far).Update("expires_at", time.Now().Add(48*time.Hour))
	invoice := func(id, status string) string {
		b, _ := json.Marshal(map[string]any{"id": "inv-" + id, "external_id": id, "status": status, "paid_amount": price, "currency": "IDR"})
		return string(b)
	}
	answers := map[string]string{
		"/v2/invoices?external_id=" + paid:    "[" + invoice(paid, "EXPIRED") + "," + invoice(paid, "PAID") + "]",
		"/v2/invoices?external_id=" + far:     "[" + invoice(far, "PAID") + "]",
		"/v2/invoices?external_id=" + unknown: "[]",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := answers[r.URL.RequestURI()]
		if user, _, _ := r.BasicAuth(); user != apiKey || !ok {
			http.Error(w, `{"error_code":"UNEXPECTED_REQUEST"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	client, err := xendit.NewStatusClient(apiKey, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := p.Pay.Poll(context.Background(), []payments.StatusClient{client}, 2*time.Hour)
	if err != nil || applied != 1 {
		t.Fatalf("Poll: %d applied, %v; want 1 (the paid invoice)", applied, err)
	}
	statuses := map[string]models.OrderStatus{}
	for _, id := range []string{paid, unknown, far} {
		var o models.Order
		p.DB.Take(&o, "id = ?", id)
		statuses[id] = o.Status
	}
	if statuses[paid] != models.OrderPaid || statuses[unknown] != models.OrderPending || statuses[far] != models.OrderPending {
		t.Errorf("after the poll: %v; want only the near, paid one paid", statuses)
	}
	if out := p.Send(p.genuine(invoiceCallback(paid, "inv-"+paid, "PAID", "50000", "IDR"))); out.Result != models.ResultDuplicate {
		t.Errorf("the callback after the poll: %s (%s), want duplicate", out.Result, out.Detail)
	}
}
