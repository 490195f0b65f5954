package main

import (
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/models"
)

// TestPaymentPagesThroughEachGateway: with PAYMENT_GATEWAY naming a gateway,
// Pay asks that gateway's API (here the sandbox gateway's emulation of it,
// over HTTP) for the order's hosted page: ten calls at once, then one more,
// are one page at the gateway and one done gateway_requests row, and the
// page opens the order on the sandbox's pay page.
func TestPaymentPagesThroughEachGateway(t *testing.T) {
	t.Parallel()
	for _, gw := range gateways.Names() {
		t.Run(gw, func(t *testing.T) {
			t.Parallel()
			addr, env := gatewayEnv(t, gw)
			a := startApp(t, env)
			id := a.createOrder(t, map[string]int{a.newProduct(t, 75000, 5): 2})
			const n = 10
			urls := make([]string, n+1)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					if r := a.do(t, "POST", a.orderAction(id, "payment"), nil, nil); r.Status == http.StatusOK && r.str("provider") == gw {
						urls[i] = r.str("redirect_url")
					} else {
						t.Errorf("call %d: %d %s", i+1, r.Status, r.Body)
					}
				})
			}
			close(start)
			wg.Wait()
			if r := a.do(t, "POST", a.orderAction(id, "payment"), nil, nil); r.Status == http.StatusOK {
				urls[n] = r.str("redirect_url")
			}
			for i, u := range urls {
				if u == "" || u != urls[0] || !strings.Contains(u, "/sandbox/pay/"+id+"?t=") {
					t.Errorf("call %d: redirect_url %q, want the one page of the order %q", i+1, u, urls[0])
				}
			}
			var rows []models.GatewayRequest
			if err := a.DB.Find(&rows, "order_id = ?", id).Error; err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Phase != models.GatewayDone || rows[0].Attempts != 1 || rows[0].Provider != gw ||
				rows[0].IdempotencyKey != id || rows[0].ProviderObjectID == "" {
				t.Errorf("gateway requests %+v, want one done at the first attempt, keyed by the order id", rows)
			}
			if p := a.do(t, "GET", strings.TrimPrefix(urls[0], "http://"+addr), nil, nil); p.Status != http.StatusOK {
				t.Errorf("the page %s: %d", urls[0], p.Status)
			}
		})
	}
}

// gatewayEnv is the environment of an app whose new payments go to gw,
// every gateway's API answered by the sandbox gateway's emulation on the
// app's own address (a free port, taken now: the API URLs name it), and
// every gateway's notifications read with its development secret.
func gatewayEnv(t *testing.T, gw string) (addr string, env map[string]string) {
	t.Helper()
	addr = freeAddr(t)
	env = gateways.EmulatedEnv("http://" + addr)
	maps.Copy(env, map[string]string{"HTTP_ADDR": addr, "SANDBOX_GATEWAY": "on", "PAYMENT_GATEWAY": gw})
	return addr, env
}

// freeAddr is an address of 127.0.0.1 free now, for an app to listen at
// when its settings must name its own address before it starts (an API
// URL at its sandbox gateway).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // the app listens there next
	return ln.Addr().String()
}
