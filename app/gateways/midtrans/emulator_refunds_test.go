package midtrans_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// The refunder Sekali asks Midtrans with, against the emulation and the
// sandbox's faults: whatever the faults, a refund asked again with its
// key is the one refund.

func midtransRefunder(t *testing.T, base string) *midtrans.Refunder {
	t.Helper()
	f, err := midtrans.NewRefunder(midtransKey, base+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A Midtrans refund answers with its refund_key, as Midtrans's refund
// notification names it. A refund_key is single-use: on a repeat, the
// 406 "Duplicate refund ID" is the earlier attempt's refund; on a first
// call it is someone else's, and refused.
func TestMidtransRefunderOnce(t *testing.T) {
	t.Parallel()
	_, em, m := midtransEmulator(t)
	f := midtransRefunder(t, m.base)
	m.transaction("ORD-RF-5", "tx-rf-5", models.EventPaid, 150000)
	want := gatewaycalls.Refunded{ObjectID: "ORD-RF-5-R1", RefundKey: "ORD-RF-5-R1", Amount: 50000, Currency: "IDR"}
	if a, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-5", "ORD-RF-5-R1", "tx-rf-5", 50000, 1)); err != nil || a != want {
		t.Fatalf("refund: %+v, %v; want %+v", a, err, want)
	}
	if a, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-5", "ORD-RF-5-R1", "tx-rf-5", 50000, 2)); err != nil || a != want {
		t.Errorf("a repeat: %+v, %v; want %+v", a, err, want)
	}
	_, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-5", "ORD-RF-5-R1", "tx-rf-5", 50000, 1))
	sandboxgwtest.Refused(t, "the key on a first call", err, 406)
	if n := em.Refunded("tx-rf-5"); n != 50000 {
		t.Errorf("Midtrans refunded %d, want 50000", n)
	}
}

// A 500 before Midtrans acted is not a refusal; the repeat refunds, once.
func TestMidtransRefunderFailNext(t *testing.T) {
	t.Parallel()
	g, em, m := midtransEmulator(t)
	f := midtransRefunder(t, m.base)
	m.transaction("ORD-RF-6", "tx-rf-6", models.EventPaid, 150000)
	g.Faults().FailNext(1)
	_, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-6", "ORD-RF-6-R1", "tx-rf-6", 50000, 1))
	sandboxgwtest.Unknown(t, "FailNext", err)
	if a, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-6", "ORD-RF-6-R1", "tx-rf-6", 50000, 2)); err != nil || a.RefundKey != "ORD-RF-6-R1" {
		t.Fatalf("the repeat: %+v, %v", a, err)
	}
	if n := em.Refunded("tx-rf-6"); n != 50000 {
		t.Errorf("Midtrans refunded %d, want 50000", n)
	}
}

// Midtrans refunds and does not answer: not a refusal. The repeat gets
// 406 for the key, which is that refund: one at Midtrans.
func TestMidtransRefunderTimeOutAfterActing(t *testing.T) {
	t.Parallel()
	g, em, m := midtransEmulator(t)
	f := midtransRefunder(t, m.base)
	m.transaction("ORD-RF-7", "tx-rf-7", models.EventPaid, 150000)
	err := sandboxgwtest.RefundLate(t, g, f, sandboxgwtest.RefundOf("ORD-RF-7", "ORD-RF-7-R1", "tx-rf-7", 50000, 1))
	sandboxgwtest.Unknown(t, "no answer", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer: %v, want the deadline", err)
	}
	want := gatewaycalls.Refunded{ObjectID: "ORD-RF-7-R1", RefundKey: "ORD-RF-7-R1", Amount: 50000, Currency: "IDR"}
	if a, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-7", "ORD-RF-7-R1", "tx-rf-7", 50000, 2)); err != nil || a != want {
		t.Errorf("the repeat: %+v, %v; want %+v", a, err, want)
	}
	if n := em.Refunded("tx-rf-7"); n != 50000 {
		t.Errorf("Midtrans refunded %d, want 50000", n)
	}
}

// Above what is left (414) and a transaction not settled (412) are
// refused; an unknown transaction (404) is not — Sekali's setting, such
// as MIDTRANS_API_URL, may be wrong — and nor is it refunded; another
// currency than IDR is refused before it is sent.
func TestMidtransRefunderRefusals(t *testing.T) {
	t.Parallel()
	_, em, m := midtransEmulator(t)
	f := midtransRefunder(t, m.base)
	m.transaction("ORD-RF-8", "tx-rf-8", models.EventPaid, 1000)
	_, err := f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-8", "ORD-RF-8-R1", "tx-rf-8", 1001, 1))
	sandboxgwtest.Refused(t, "above the payment", err, 414)
	m.transaction("ORD-RF-9", "tx-rf-9", models.EventPending, 1000)
	_, err = f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-9", "ORD-RF-9-R1", "tx-rf-9", 1000, 1))
	sandboxgwtest.Refused(t, "a pending transaction", err, 412)
	_, err = f.Refund(t.Context(), sandboxgwtest.RefundOf("ORD-RF-10", "ORD-RF-10-R1", "tx-none", 1000, 1))
	sandboxgwtest.Unknown(t, "an unknown transaction", err)
	r := sandboxgwtest.RefundOf("ORD-RF-8", "ORD-RF-8-R2", "tx-rf-8", 1000, 1)
	r.Currency = "USD"
	_, err = f.Refund(t.Context(), r)
	sandboxgwtest.Refused(t, "USD", err, 0)
	if n := em.Refunded("tx-rf-8"); n != 0 {
		t.Errorf("Midtrans refunded %d, want 0", n)
	}
}

// End to end (sandboxgwtest.Shop): Midtrans names the refund by its refund_key, in the answer and in the
// notification, which Sekali confirms with the emulated status API.
func TestMidtransRefundEndToEnd(t *testing.T) {
	t.Parallel()
	sender, err := midtrans.NewSender(midtransKey)
	if err != nil {
		t.Fatal(err)
	}
	s := sandboxgwtest.NewShop(t)
	g := s.Gateway()
	g.Speak(sender)
	g.Emulate(midtrans.NewEmulator(midtransKey))
	g.Retries = nil
	m := midtransAPI{t: t, base: sandboxgwtest.Serve(t, g), key: midtransKey, sender: sender}
	provider, err := midtrans.NewProvider(midtransKey, m.base+midtrans.SandboxAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	s.Open(g, provider, true)
	tx := "tx-e2e-" + s.OrderID
	m.transaction(s.OrderID, tx, models.EventPaid, sandboxgwtest.OrderTotal)
	s.Notify(sender, payments.Fact{OrderID: s.OrderID, TransactionID: tx, Status: models.EventPaid, Amount: sandboxgwtest.OrderTotal, Currency: "IDR"})
	if r := s.RefundHalf(midtransRefunder(t, m.base)); r.ProviderObjectID != s.OrderID+"-R1" {
		t.Errorf("refund %+v", r)
	}
	s.Release()
	sandboxgwtest.Delivered(t, g, s.OrderID, models.ResultStale)
	s.ExpectHalfRefunded(s.OrderID + "-R1")
}
