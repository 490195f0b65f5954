package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/config"
	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// `sekali sign --provider P` signs a body so that P's adapter, configured
// with the same secret, accepts it, for every gateway of the registry:
// header lines, or the body with its signature inside. The secret comes
// from the variable the server reads (each gateway's development
// secret, from the registry); without it, sign says which.
func TestSignEachGateway(t *testing.T) {
	t.Parallel()
	env := gateways.EmulatedEnv("http://127.0.0.1:1")
	env["SANDBOX_WEBHOOK_SECRET"] = testenv.SandboxSecret
	getenv := func(k string) string { return env[k] }
	for _, e := range gateways.All {
		g, err := e.New(config.Env{Getenv: getenv, Config: config.Config{SandboxKeys: [][]byte{testenv.SandboxKey}, PaymentGateway: "sandbox"}})
		if err != nil || g.Provider == nil || g.Sender == nil {
			t.Fatalf("%s: %+v, %v: every gateway in the registry needs its secret in this test's env", e.Name, g, err)
		}
		body, err := g.Sender.Body(payments.Fact{EventID: "evt_1", OrderID: "ORD-1", TransactionID: "tx-1", Status: models.EventPaid,
			Amount: 150000, Currency: "IDR"})
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		var out bytes.Buffer
		err = run(context.Background(), []string{"sekali", "sign", "--provider", e.Name, "--id", "evt_1", "--body", string(body)},
			getenv, &out, logOutput(t))
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		header := http.Header{}
		if strings.HasPrefix(out.String(), "{") { // the signature is inside the body
			body = bytes.TrimSpace(out.Bytes())
		} else {
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				name, value, _ := strings.Cut(line, ": ")
				header.Add(name, value)
			}
		}
		if err := g.Provider.Verify(header, body, time.Now()); err != nil {
			t.Errorf("%s: the adapter refuses what sign printed: %v\n%s", e.Name, err, out.String())
		}
		if ev, err := g.Provider.Parse(header, body); err != nil || ev.OrderID != "ORD-1" {
			t.Errorf("%s: %+v %v", e.Name, ev, err)
		}
	}
	for _, e := range gateways.All[1:] { // the sandbox has its development secret
		var out bytes.Buffer
		err := run(context.Background(), []string{"sekali", "sign", "--provider", e.Name, "--body", "{}"},
			func(string) string { return "" }, &out, logOutput(t))
		if exitCode(err) != 2 || !strings.Contains(err.Error(), e.SecretVariable) {
			t.Errorf("sign without %s: exit %d, %v", e.SecretVariable, exitCode(err), err)
		}
	}
}
