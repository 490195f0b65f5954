package outbound_test

import (
	"testing"

	"github.com/sekali/sekali/app/outbound"
)

func TestOrigin(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://app.sandbox.midtrans.com":         "https://app.sandbox.midtrans.com",
		"http://127.0.0.1:8080/sandbox/stripe":     "http://127.0.0.1:8080",
		"https://checkout.stripe.com/c/pay/cs_1#x": "https://checkout.stripe.com",
		"/sandbox/pay/ORD-1":                       "",
		"":                                         "",
		"::":                                       "",
	} {
		if got := outbound.Origin(in); got != want {
			t.Errorf("Origin(%q) = %q, want %q", in, got, want)
		}
	}
}
