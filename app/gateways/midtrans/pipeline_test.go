package midtrans_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Midtrans's notifications through Sekali's payments pipeline, on a
// database of their own (gatewaytest.Pipeline): what app/payments checks
// of every gateway, and what only Midtrans's notifications need, in
// Midtrans's package — deleting the package deletes them with it.
//
// Sekali confirms every Midtrans notification with Midtrans's status API
// (its signature covers three fields only): each test has a fake of that
// API (statusAPI) its pipeline's adapter asks.

const price = gatewaytest.Price

// statusAPI is Midtrans's status API as these tests need it: the state of
// each transaction is the last genuine notification the test made of it
// (pipeline.notification), and GET /v2/{transaction_id}/status answers
// with it, as Midtrans does.
type statusAPI struct {
	URL  string
	down atomic.Bool // answer 503, as an API in trouble
	// asked counts the status requests answered.
	asked atomic.Int64
	// errInBody, when set, is the status_code answered with HTTP 200:
	// Midtrans's way of saying most errors.
	errInBody atomic.Pointer[string]
	mu        sync.Mutex
	tx        map[string][]byte
}

// newStatusAPI serves a statusAPI until the test ends.
func newStatusAPI(t *testing.T) *statusAPI {
	t.Helper()
	a := &statusAPI{tx: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/{id}/status", func(w http.ResponseWriter, r *http.Request) {
		if user, _, ok := r.BasicAuth(); !ok || user != midtransKey {
			http.Error(w, `{"status_code":"401"}`, http.StatusUnauthorized)
			return
		}
		a.asked.Add(1)
		if a.down.Load() {
			http.Error(w, `{"status_code":"503"}`, http.StatusServiceUnavailable)
			return
		}
		if code := a.errInBody.Load(); code != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status_code":"` + *code + `","status_message":"Sorry. Our system is recovering from unexpected issues. Please retry."}`))
			return
		}
		a.mu.Lock()
		body, ok := a.tx[r.PathValue("id")]
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.Write([]byte(`{"status_code":"404","status_message":"Transaction doesn't exist."}`))
			return
		}
		answer, _ := midtrans.StatusAnswer(body)
		w.Write(answer)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// set makes a signed notification the state of its transaction.
func (a *statusAPI) set(notification []byte) {
	var n midtrans.Notification
	json.Unmarshal(notification, &n)
	a.mu.Lock()
	a.tx[n.TransactionID] = notification
	a.mu.Unlock()
}

// pipeline is the payments pipeline with Midtrans's adapter, which
// confirms each notification with api.
type pipeline struct {
	*gatewaytest.Pipeline
	api *statusAPI
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	api := newStatusAPI(t)
	p, err := midtrans.NewProvider(midtransKey, api.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline{Pipeline: gatewaytest.NewPipeline(t, p), api: api}
}

// notification builds a signed Midtrans notification of a transaction's
// new state, and makes that the state the status API answers: a genuine
// notification.
func (p *pipeline) notification(orderID, txID, status, fraud, gross, currency string) gatewaytest.Delivery {
	d := signedBody(orderID, txID, status, fraud, gross, currency)
	p.api.set(d.Body)
	return d
}

// signedBody builds a signed Midtrans notification, and tells the API
// nothing.
func signedBody(orderID, txID, status, fraud, gross, currency string) gatewaytest.Delivery {
	n := midtrans.Notification{OrderID: orderID, TransactionID: txID, TransactionStatus: status, FraudStatus: fraud,
		StatusCode: "200", GrossAmount: gross, Currency: currency, PaymentType: "bank_transfer"}
	switch status {
	case "pending":
		n.StatusCode = "201"
	case "deny", "cancel", "expire":
		n.StatusCode = "202"
	}
	n.SignatureKey = midtrans.Signature(n, midtransKey)
	b, _ := json.Marshal(n)
	return gatewaytest.Delivery{Provider: midtrans.Name, Body: b}
}

// forge re-signs a genuine Midtrans notification after changing fields
// the signature does not cover (it covers order_id, status_code and
// gross_amount only): what an attacker holding one genuine notification
// can send. The status API is told nothing.
func forge(genuine gatewaytest.Delivery, changes map[string]any) gatewaytest.Delivery {
	return gatewaytest.WithMembers(genuine, changes)
}

// Midtrans's notifications apply once (gatewaytest.AppliesOnce): capture
// (accepted) and settlement, in either order, are one payment; the same
// key with another body — the signature covers only some fields, so a
// changed body still verifies — is a conflict; a signature with another
// server key is refused; pending_refund is not acted on.
func TestMidtransCallbacksApplyOnce(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	gatewaytest.AppliesOnce(t, p.Pipeline, gatewaytest.Notifications{
		Name: midtrans.Name,
		Paid: func(orderID, ref string, amount int64, currency string, variant int) gatewaytest.Delivery {
			gross := fmt.Sprintf("%d.00", amount)
			if variant == 0 {
				return p.notification(orderID, ref, "capture", "accept", gross, currency)
			}
			return p.notification(orderID, ref, "settlement", "", gross, currency)
		},
		Changed: func(d gatewaytest.Delivery) gatewaytest.Delivery {
			return gatewaytest.WithMembers(d, map[string]any{"payment_type": "credit_card"})
		},
		Forged: func(orderID, ref string) gatewaytest.Delivery {
			d := p.notification(orderID, ref, "settlement", "", "50000.00", "IDR")
			return gatewaytest.WithMembers(d, map[string]any{"signature_key": midtrans.Signature(
				midtrans.Notification{OrderID: orderID, StatusCode: "200", GrossAmount: "50000.00"}, "SB-Mid-server-NOT-OURS")})
		},
		Ignored: func(orderID string) gatewaytest.Delivery {
			return p.notification(orderID, "tx-authorized-refund", "pending_refund", "", "50000.00", "IDR")
		},
	})
}

// Midtrans's refund notification refunds the paid order's charge. After
// the refund: the refunded charge paid again (a late copy under another
// key) is stale; a new charge is money taken for a refunded order,
// recorded to be refunded.
func TestMidtransRefundRefundsTheCharge(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, sku := p.Order()
	ref := "ref-refund-midtrans-" + id
	paid := func(ref string) gatewaytest.Delivery {
		return p.notification(id, ref, "settlement", "", "50000.00", "IDR")
	}
	if out := p.Send(paid(ref)); out.Result != models.ResultProcessed {
		t.Fatalf("paying: %+v", out)
	}
	before := p.State(id, sku)
	out := p.Send(p.notification(id, ref, "refund", "", "50000.00", "IDR"))
	after := p.State(id, sku)
	if out.Result != models.ResultProcessed || after.Status != models.OrderRefunded || after.Payments[ref] != models.PaymentRefunded || after.Stock != before.Stock {
		t.Errorf("refund: %s, %+v; want the order and its payment refunded, the stock kept", out.Result, after)
	}
	if out := p.Send(p.notification(id, ref, "capture", "accept", "50000.00", "IDR")); out.Result != models.ResultStale {
		t.Errorf("the refunded charge paid again: %s, want stale", out.Result)
	}
	if out := p.Send(paid(ref + "-new")); out.Result != models.ResultProcessed {
		t.Errorf("a new charge on the refunded order: %+v", out)
	}
	final := p.State(id, sku)
	if final.Status != models.OrderRefunded || final.Payments[ref] != models.PaymentRefunded ||
		final.Payments[ref+"-new"] != models.PaymentRefundRequired || final.Stock != before.Stock {
		t.Errorf("after the refund: %+v; want the order still refunded, the new charge refund_required", final)
	}
}

// Amounts are converted exactly, or refused: Midtrans's "50000.50" IDR
// has a fraction the rupiah cannot hold.
func TestMidtransAmountsAreExact(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, _ := p.Order()
	if out := p.Send(p.notification(id, "tx-frac", "settlement", "", "50000.50", "IDR")); out.Status() != 422 || out.Refusal != models.EInvalid {
		t.Errorf("Midtrans 50000.50 IDR: %d %s", out.Status(), out.Result)
	}
}

// A notification two parsers could read differently is refused before
// anything is written: members equal but for case (encoding/json would
// fill one field from either, the last one winning) are a 400.
func TestMidtransAmbiguousCallbacksAreRefused(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, _ := p.Order()
	d := p.notification(id, "tx-case-"+id, "pending", "", "50000.00", "IDR")
	const member = `"transaction_status":"pending"`
	if !strings.Contains(string(d.Body), member) {
		t.Fatalf("no %s in %s", member, d.Body)
	}
	d.Body = []byte(strings.Replace(string(d.Body), member, member+`,"TRANSACTION_STATUS":"expire"`, 1))
	if !json.Valid(d.Body) {
		t.Fatalf("not JSON: %s", d.Body)
	}
	if out := p.Send(d); out.Status() != 400 || out.Refusal != models.EInvalidPayload {
		t.Errorf("members equal but for case: %d %s (%s), want 400 invalid_payload\n%s", out.Status(), out.Result, out.Detail, d.Body)
	}
	if n := p.Callbacks(id); n != 0 {
		t.Errorf("%d callbacks recorded from a refused body", n)
	}
}

// fraud_status goes into Midtrans's key and its signature does not cover
// it: anything but Midtrans's own values is refused with a 422 before a
// key is written — never a NUL that fails the insert and answers 503 for
// ever.
func TestMidtransFraudStatusIsChecked(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, _ := p.Order()
	for _, fraud := range []string{"\x00", "maybe", strings.Repeat("a", 300)} {
		out := p.Send(p.notification(id, "tx-fraud-"+id, "settlement", fraud, "50000.00", "IDR"))
		if out.Status() != 422 {
			t.Errorf("fraud_status %q: %d %s, want 422", fraud, out.Status(), out.Result)
		}
	}
	if out := p.Send(p.notification(id, "tx-fraud-"+id, "settlement", "accept", "50000.00", "IDR")); out.Result != models.ResultProcessed {
		t.Errorf("fraud_status accept: %+v", out)
	}
}

// refundsOf is what the database holds of an order's refunds: the
// payment's refunded total and each refund's key and amount.
func (p *pipeline) refundsOf(orderID string) (refunded int64, refunds map[string]int64) {
	p.T.Helper()
	p.DB.Raw("SELECT coalesce(sum(refunded_amount), 0) FROM payments WHERE order_id = ?", orderID).Scan(&refunded)
	var rows []models.Refund
	p.DB.Find(&rows, "order_id = ?", orderID)
	refunds = map[string]int64{}
	for _, r := range rows {
		refunds[r.RefundKey] = r.Amount
	}
	return refunded, refunds
}

// refund builds a genuine Midtrans refund notification (and makes it the
// transaction's state at the status API): the refunds so far, by
// refund_key and amount, their cumulative refund_amount, and whether the
// bank has confirmed them.
func (p *pipeline) refund(orderID, txID, status string, confirmed bool, refunds ...midtrans.NotifiedRefund) gatewaytest.Delivery {
	var total int64
	for i := range refunds {
		amount, _ := payments.ParseAmount(refunds[i].RefundAmount, "IDR")
		total += amount
		if confirmed {
			refunds[i].BankConfirmedAt = "2026-12-01 10:00:00"
		}
	}
	n := midtrans.Notification{OrderID: orderID, TransactionID: txID, TransactionStatus: status, FraudStatus: "accept",
		StatusCode: "200", GrossAmount: "50000.00", Currency: "IDR", PaymentType: "credit_card",
		RefundAmount: payments.MajorText(total, "IDR", 2), Refunds: refunds}
	n.SignatureKey = midtrans.Signature(n, midtransKey)
	b, _ := json.Marshal(n)
	p.api.set(b)
	return gatewaytest.Delivery{Provider: midtrans.Name, Body: b}
}
