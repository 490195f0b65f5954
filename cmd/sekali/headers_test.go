package main

import (
	"testing"
)

// Every answer says nosniff; answers with personal data are not to be
// cached; /metrics leaves the public port with METRICS_PUBLIC=false.
func TestHeadersAndMetricsPort(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"METRICS_PUBLIC": "false", "METRICS_ADDR": "127.0.0.1:0"})
	sku := a.newProduct(t, 1000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	for _, path := range []string{a.orderURL(id), "/healthz", "/nowhere", "/callbacks/sandbox"} {
		r := a.do(t, "GET", path, nil, nil)
		if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", path, got)
		}
	}
	if got := a.do(t, "GET", a.orderURL(id), nil, nil).Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("an order's answer: Cache-Control %q, want no-store", got)
	}
	if r := a.do(t, "GET", "/metrics", nil, nil); r.Status != 404 {
		t.Errorf("/metrics on the public port with METRICS_PUBLIC=false: %d, want 404", r.Status)
	}
	public := startApp(t, nil)
	if r := public.do(t, "GET", "/metrics", nil, nil); r.Status != 200 {
		t.Errorf("/metrics by default: %d, want 200", r.Status)
	}
}
