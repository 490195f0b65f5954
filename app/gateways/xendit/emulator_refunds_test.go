package xendit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// Xendit's refunds, as the Emulator speaks them.

// refund posts a refund with key as its Idempotency-key ("": none).
func (x xenditAPI) refund(ctx context.Context, key string, body any) (int, map[string]any, error) {
	header := http.Header{}
	if key != "" {
		header.Set(xendit.IdempotencyHeader, key)
	}
	b, _ := json.Marshal(body)
	status, raw, err := httpjson.PostWith(ctx, http.DefaultClient, x.base+xendit.EmulatorPath+"/refunds", x.key, header, b)
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
	_, em, x := xenditEmulator(t)
	em.Reported(payments.Fact{OrderID: "ORD-XE-R", TransactionID: "inv-paid-1", Status: models.EventPaid,
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
	g, em, x := xenditEmulator(t)
	em.Reported(payments.Fact{TransactionID: "inv-paid-2", Status: models.EventPaid, Amount: 1000, Currency: "IDR"})
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

// The refunder Sekali asks Xendit with, against the emulation and the
// sandbox's faults: whatever the faults, a refund asked again with its
// key is the one refund.

// paid makes the emulation know that invoice inv was paid amount, as
// the sandbox gateway does when it reports the payment.
func paid(em *xendit.Emulator, inv string, amount int64) {
	em.Reported(payments.Fact{TransactionID: inv, Status: models.EventPaid, Amount: amount, Currency: "IDR"})
}

func xenditRefunder(t *testing.T, base string) *xendit.Refunder {
	t.Helper()
	f, err := xendit.NewRefunder(xenditKey, base+xendit.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A Xendit refund answers with its id (PENDING counts); the same key
// again is Xendit's 409 DUPLICATE_ERROR, and the refunder finds the
// refund by its reference_id: one refund.
func TestXenditRefunderOnce(t *testing.T) {
	t.Parallel()
	_, em, x := xenditEmulator(t)
	f := xenditRefunder(t, x.base)
	paid(em, "inv-rf-11", 150000)
	first, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-11", "ORD-RF-11-R1", "inv-rf-11", 50000, 1))
	if err != nil || first.ObjectID == "" || first.RefundKey != first.ObjectID || first.Amount != 50000 || first.Total != 0 {
		t.Fatalf("refund: %+v, %v", first, err)
	}
	if !first.Pending {
		t.Errorf("the first answer is not pending: Xendit answers a refund PENDING")
	}
	settled := first
	settled.Pending = false // Xendit's list shows it SUCCEEDED: the gateway settles at once
	for attempt := 1; attempt <= 2; attempt++ {
		if again, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-11", "ORD-RF-11-R1", "inv-rf-11", 50000, attempt)); err != nil || again != settled {
			t.Errorf("again at attempt %d: %+v, %v; want %+v", attempt, again, err, settled)
		}
	}
	if list := x.refunds("inv-rf-11"); len(list) != 1 || list[0]["id"] != first.ObjectID {
		t.Errorf("refunds %v, want only %s", list, first.ObjectID)
	}
}

// A 500 before Xendit acted is not a refusal; the repeat finds no refund
// and makes the one.
func TestXenditRefunderFailNext(t *testing.T) {
	t.Parallel()
	g, em, x := xenditEmulator(t)
	f := xenditRefunder(t, x.base)
	paid(em, "inv-rf-12", 150000)
	g.Faults().FailNext(1)
	_, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-12", "ORD-RF-12-R1", "inv-rf-12", 50000, 1))
	sandboxgwtest.Unknown(t, "FailNext", err)
	a, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-12", "ORD-RF-12-R1", "inv-rf-12", 50000, 2))
	if err != nil {
		t.Fatal(err)
	}
	if list := x.refunds("inv-rf-12"); len(list) != 1 || list[0]["id"] != a.ObjectID {
		t.Errorf("refunds %v, want only %s", list, a.ObjectID)
	}
}

// Xendit refunds and does not answer: not a refusal. The repeat finds
// that refund by its reference_id before it would create: one refund.
func TestXenditRefunderTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, em, x := xenditEmulator(t)
	f := xenditRefunder(t, x.base)
	paid(em, "inv-rf-13", 150000)
	err := sandboxgwtest.RefundLate(t, g, f, sandboxgwtest.RefundOf("ORD-RF-13", "ORD-RF-13-R1", "inv-rf-13", 50000, 1))
	sandboxgwtest.Unknown(t, "no answer", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer: %v, want the deadline", err)
	}
	made := x.refunds("inv-rf-13")
	if len(made) != 1 {
		t.Fatalf("%d refunds, want 1", len(made))
	}
	a, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-13", "ORD-RF-13-R1", "inv-rf-13", 50000, 2))
	if err != nil || a.ObjectID != made[0]["id"] || a.Amount != 50000 {
		t.Errorf("the repeat: %+v, %v; want %v", a, err, made[0]["id"])
	}
	if n := len(x.refunds("inv-rf-13")); n != 1 {
		t.Errorf("%d refunds, want 1", n)
	}
}

// Above what is left is Xendit's 400 MAXIMUM_REFUND_AMOUNT_REACHED:
// refused. An unknown invoice (404 DATA_NOT_FOUND) is not — Sekali's
// setting may be wrong — and nothing is refunded.
func TestXenditRefunderRefusals(t *testing.T) {
	t.Parallel()
	_, em, x := xenditEmulator(t)
	f := xenditRefunder(t, x.base)
	paid(em, "inv-rf-14", 1000)
	_, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-14", "ORD-RF-14-R1", "inv-rf-14", 1001, 1))
	sandboxgwtest.Refused(t, "above the payment", err, 400)
	_, err = f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-15", "ORD-RF-15-R1", "inv-none", 1000, 1))
	sandboxgwtest.Unknown(t, "an unknown invoice", err)
	if n := len(x.refunds("inv-rf-14")); n != 0 {
		t.Errorf("%d refunds, want 0", n)
	}
}

// A refund Xendit accepts and fails later — PENDING, then its
// refund.failed callback — is given back, and asked again
// (sandboxgwtest.Shop.ExpectRefundFailedLater).
func TestXenditRefundFailedLaterEndToEnd(t *testing.T) {
	t.Parallel()
	const token = "xnd-callback-token-later-0123"
	s := sandboxgwtest.NewShop(t)
	g := s.Gateway()
	g.Retries = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}
	em := xendit.NewEmulator(xenditKey, token)
	g.Emulate(em)
	base := sandboxgwtest.Serve(t, g)
	refunder := xenditRefunder(t, base)
	// The provider confirms the payment with the emulation of Xendit's API.
	sender, provider := sandboxgwtest.Must(xendit.NewSender(token)), sandboxgwtest.Must(xendit.NewProvider(token, xenditKey, base+xendit.EmulatorPath))
	g.Speak(sender)
	s.Open(g, provider, false)
	payment := payments.Fact{EventID: "evt-paid-" + s.OrderID, OrderID: s.OrderID, TransactionID: "inv-later-" + s.OrderID,
		Status: models.EventPaid, Amount: sandboxgwtest.OrderTotal, Currency: "IDR"}
	em.Reported(payment) // as the sandbox gateway tells it, before the callback
	s.Notify(sender, payment)
	s.ExpectRefundFailedLater(g, refunder)
}

// End to end (sandboxgwtest.Shop): the answer records Xendit's refund PENDING, by its id; Xendit's
// refund.succeeded callback, where the gateway sends it, makes it
// succeeded.
func TestXenditRefundEndToEnd(t *testing.T) {
	t.Parallel()
	const token = "xnd-callback-token-e2e-0123"
	sender, err := xendit.NewSender(token)
	if err != nil {
		t.Fatal(err)
	}
	s := sandboxgwtest.NewShop(t)
	g, em, x := xenditEmulator(t)
	provider, err := xendit.NewProvider(token, xenditKey, x.base+xendit.EmulatorPath)
	if err != nil {
		t.Fatal(err)
	}
	s.Open(g, provider, false)
	payment := payments.Fact{EventID: "evt-paid-" + s.OrderID, OrderID: s.OrderID, TransactionID: "inv-e2e-" + s.OrderID,
		Status: models.EventPaid, Amount: sandboxgwtest.OrderTotal, Currency: "IDR"}
	em.Reported(payment) // as the sandbox gateway tells it, before the callback
	s.Notify(sender, payment)
	r := s.RefundHalf(xenditRefunder(t, x.base))
	if list := x.refunds(payment.TransactionID); len(list) != 1 || list[0]["id"] != r.ProviderObjectID {
		t.Errorf("refunds at Xendit %v, want only %s", list, r.ProviderObjectID)
	}
	s.ExpectHalfRefunded(r.ProviderObjectID)
}
