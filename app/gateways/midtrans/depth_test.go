package midtrans_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
)

// BenchmarkDeepBody is the server's CPU for an unauthenticated Midtrans
// delivery of 18 KiB: 9,000 nested arrays, against a flat body of the
// same size. Midtrans signs inside the body, so its Verify decodes the
// body before anything is known of its sender; the pipeline measures the
// nesting first (payments.MaxBodyDepth) and refuses the deep one unread.
func BenchmarkDeepBody(b *testing.B) {
	p, err := midtrans.NewProvider(midtransKey, "http://127.0.0.1:1")
	if err != nil {
		b.Fatal(err)
	}
	pay := payments.NewService(testenv.NewDB(b), testenv.Logger(b), time.Now, metrics.New(), jobs.Tasks{}, p)
	b.Cleanup(pay.Close)
	const levels = 9000
	deep := []byte(`{"order_id":` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `}`)
	flat := []byte(`{"order_id":"` + strings.Repeat("a", len(deep)-15) + `"}`)
	for _, bc := range []struct {
		name string
		body []byte
	}{{"nested", deep}, {"flat", flat}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				pay.Receive(context.Background(), payments.Delivery{Provider: midtrans.Name, Body: bytes.NewReader(bc.body),
					ContentType: "application/json", RemoteAddr: "203.0.113.9"})
			}
		})
	}
}
