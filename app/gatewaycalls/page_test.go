package gatewaycalls_test

import (
	"testing"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
)

func TestOrigin(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://app.sandbox.gateway.example":        "https://app.sandbox.gateway.example",
		"http://127.0.0.1:8080/sandbox/acmepay":      "http://127.0.0.1:8080",
		"https://checkout.gateway.example/c/pay/1#x": "https://checkout.gateway.example",
		"/sandbox/pay/ORD-1":                         "",
		"":                                           "",
		"::":                                         "",
	} {
		if got := gatewaycalls.Origin(in); got != want {
			t.Errorf("Origin(%q) = %q, want %q", in, got, want)
		}
	}
}

// PayWithin is the time from the call to the order's deadline, at least
// the gateway's least (a page asked in the order's last moments, or even
// after them, still opens); nothing without a deadline.
func TestPayWithin(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		expires time.Time
		want    time.Duration
	}{
		{at.Add(15 * time.Minute), 15 * time.Minute},
		{at.Add(20 * time.Second), time.Minute},
		{at.Add(-time.Minute), time.Minute},
		{time.Time{}, 0},
	} {
		r := gatewaycalls.PageRequest{ExpiresAt: tt.expires, AskedAt: at}
		if got := r.PayWithin(time.Minute); got != tt.want {
			t.Errorf("deadline %v: PayWithin = %v, want %v", tt.expires, got, tt.want)
		}
	}
}
