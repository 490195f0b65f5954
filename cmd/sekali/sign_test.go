package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
)

// `sekali sign --provider P` signs a body so that P's adapter, configured
// with the same secret, accepts it: header lines for the sandbox, Xendit
// and Stripe, the body with its signature_key for Midtrans. The secret
// comes from the variable the server reads.
func TestSignEachGateway(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"SANDBOX_WEBHOOK_SECRET": testenv.SandboxSecret,
		"MIDTRANS_SERVER_KEY":    "SB-Mid-server-SIGN0123456789",
		"XENDIT_CALLBACK_TOKEN":  "xnd-callback-token-sign-0123",
		"STRIPE_WEBHOOK_SECRET":  "whsec_sign_0123456789abcdef,whsec_older_0123456789",
	}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		provider string
		receiver payments.Provider
		body     string
	}{
		{"sandbox", sandbox.NewProvider([][]byte{testenv.SandboxKey}),
			`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"}`},
		{"midtrans", must(midtrans.NewProvider(env["MIDTRANS_SERVER_KEY"], "")),
			`{"order_id":"ORD-1","transaction_id":"tx-1","transaction_status":"settlement","status_code":"200","gross_amount":"150000.00"}`},
		{"xendit", must(xendit.NewProvider(env["XENDIT_CALLBACK_TOKEN"])),
			`{"id":"inv-1","external_id":"ORD-1","status":"PAID","paid_amount":150000,"currency":"IDR"}`},
		{"stripe", must(stripe.NewProvider(env["STRIPE_WEBHOOK_SECRET"])),
			`{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount_received":15000000,"currency":"idr","metadata":{"order_id":"ORD-1"}}}}`},
	} {
		var out bytes.Buffer
		err := run(context.Background(), []string{"sekali", "sign", "--provider", tc.provider, "--id", "evt_1", "--body", tc.body},
			getenv, &out, logOutput(t))
		if err != nil {
			t.Fatalf("%s: %v", tc.provider, err)
		}
		header, body := http.Header{}, []byte(tc.body)
		if tc.provider == "midtrans" {
			body = bytes.TrimSpace(out.Bytes())
		} else {
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				name, value, _ := strings.Cut(line, ": ")
				header.Add(name, value)
			}
		}
		if err := tc.receiver.Verify(header, body, time.Now()); err != nil {
			t.Errorf("%s: the adapter refuses what sign printed: %v\n%s", tc.provider, err, out.String())
		}
		if ev, err := tc.receiver.Parse(header, body); err != nil || ev.OrderID != "ORD-1" {
			t.Errorf("%s: %+v %v", tc.provider, ev, err)
		}
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"sekali", "sign", "--provider", "xendit", "--body", "{}"},
		func(string) string { return "" }, &out, logOutput(t))
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "XENDIT_CALLBACK_TOKEN") {
		t.Errorf("sign without a Xendit token: exit %d, %v", exitCode(err), err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
