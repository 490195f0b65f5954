package midtrans

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/payments"
)

// refundBody is a genuine refund notification of tx-bounds carrying
// refunds: the signature covers order_id, status_code and gross_amount
// only, so whoever holds one genuine notification can write any refunds
// into it and keep the signature. pad, when not empty, is written as
// status_message.
func refundBody(tb testing.TB, total string, pad string, refunds []NotifiedRefund) []byte {
	tb.Helper()
	n := Notification{OrderID: "ORD-01M8SAJ9RGQ4EEFB71RD0040R7", TransactionID: "tx-bounds", TransactionStatus: "partial_refund",
		FraudStatus: "accept", StatusCode: "200", GrossAmount: "150000.00", Currency: "IDR", PaymentType: "credit_card",
		RefundAmount: total, Refunds: refunds}
	n.SignatureKey = Signature(n, serverKey)
	body, err := json.Marshal(struct {
		Notification
		StatusMessage string `json:"status_message,omitempty"`
	}{n, pad})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// fill appends elements made by refund to a refund body until one more
// would take it past payments.MaxBodyBytes.
func fill(tb testing.TB, total string, refund func(i int) NotifiedRefund) []byte {
	tb.Helper()
	refunds := []NotifiedRefund{refund(0)}
	size := len(refundBody(tb, total, "", refunds))
	for {
		r := refund(len(refunds))
		b, _ := json.Marshal(r)
		if size+1+len(b) > payments.MaxBodyBytes { // 1: a comma
			return refundBody(tb, total, "", refunds)
		}
		size += 1 + len(b)
		refunds = append(refunds, r)
	}
}

// costlyBodies are the costliest Midtrans refund notifications that fit
// in payments.MaxBodyBytes, by what they make a parser do: the issue's
// exponents, long digit strings, one number as long as the body allows,
// and the costliest body that is accepted — the most refunds allowed,
// each with the longest key and amount, padded to the size limit.
func costlyBodies(tb testing.TB) []struct {
	name     string
	body     []byte
	accepted bool
} {
	tb.Helper()
	exponents := fill(tb, "50000.00", func(i int) NotifiedRefund {
		return NotifiedRefund{RefundAmount: "1e1000000", RefundKey: fmt.Sprint(i)}
	})
	digits := fill(tb, "50000.00", func(i int) NotifiedRefund {
		return NotifiedRefund{RefundAmount: strings.Repeat("9", 600), RefundKey: fmt.Sprint(i)}
	})
	one := refundBody(tb, "50000.00", "", []NotifiedRefund{{RefundAmount: "1", RefundKey: "rk"}})
	one = refundBody(tb, "50000.00", "", []NotifiedRefund{{RefundAmount: strings.Repeat("9", payments.MaxBodyBytes-len(one)), RefundKey: "rk"}})

	var most []NotifiedRefund
	for i := range payments.MaxRefunds {
		key := fmt.Sprintf("%0255d", i)
		most = append(most, NotifiedRefund{RefundChargebackID: "202502070943231234", RefundAmount: "0000000000000001.000000",
			RefundKey: key, BankConfirmedAt: "2026-12-01 10:00:00"})
	}
	const total = "0000000000000100.000000"
	accepted := refundBody(tb, total, "", most)
	accepted = refundBody(tb, total, strings.Repeat("x", payments.MaxBodyBytes-len(accepted)-len(`,"status_message":""`)), most)
	return []struct {
		name     string
		body     []byte
		accepted bool
	}{
		{"exponent", exponents, false},
		{"600-digit", digits, false},
		{"64KiB-number", one, false},
		{"accepted", accepted, true},
	}
}

// Each costly body fits in a delivery, and the costliest accepted one is
// accepted.
func TestCostlyRefundBodies(t *testing.T) {
	t.Parallel()
	p, _ := NewProvider(serverKey, "")
	for _, c := range costlyBodies(t) {
		var n Notification
		json.Unmarshal(c.body, &n)
		t.Logf("%s: %d bytes, %d refunds", c.name, len(c.body), len(n.Refunds))
		if len(c.body) > payments.MaxBodyBytes {
			t.Errorf("%s: %d bytes, above the limit", c.name, len(c.body))
		}
		if err := p.Verify(nil, c.body, time.Now()); err != nil {
			t.Errorf("%s: Verify: %v", c.name, err)
		}
		if _, err := p.Parse(nil, c.body); (err == nil) != c.accepted {
			t.Errorf("%s: Parse: %v; want accepted %v", c.name, err, c.accepted)
		}
	}
}

// cpuPerOp reports the process's CPU time per op (the garbage
// collector's included) beside ns/op, which on a shared machine counts
// the time other processes took too.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkCostlyRefundBodies parses each costly body (Parse), and runs
// it through all a delivery costs before anything is written: Verify,
// the pipeline's fingerprint, Parse.
func BenchmarkCostlyRefundBodies(b *testing.B) {
	p, err := NewProvider(serverKey, "")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range costlyBodies(b) {
		b.Run(c.name+"/parse", func(b *testing.B) {
			defer cpuPerOp(b)()
			for b.Loop() {
				p.Parse(nil, c.body)
			}
		})
		b.Run(c.name+"/verify+fingerprint+parse", func(b *testing.B) {
			defer cpuPerOp(b)()
			for b.Loop() {
				p.Verify(nil, c.body, time.Now())
				canonjson.Fingerprint(c.body)
				p.Parse(nil, c.body)
			}
		})
	}
}

// countElements counts what encoding/json decodes from an array, and
// nothing from other values: commas in strings and nested values are not
// elements.
func TestCountElements(t *testing.T) {
	t.Parallel()
	for _, data := range []string{`[]`, "[ \n]", `[1]`, `[1,2]`, `[ 1 , 2 ]`, `["a,b"]`, `["\"",","]`, `["\\",","]`,
		`[{"a":[1,2],"b":"]"},3]`, `[[],[[]],{}]`, `null`, `"x,y"`, `{"a":1,"b":2}`, `7`} {
		var list []json.RawMessage
		want := 0
		if json.Unmarshal([]byte(data), &list) == nil {
			want = len(list)
		}
		if got := countElements([]byte(data)); got != want {
			t.Errorf("countElements(%s) = %d, want %d", data, got, want)
		}
	}
}
