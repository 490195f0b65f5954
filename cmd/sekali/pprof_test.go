package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestProfilerOnMetricsPortOnly: /debug/pprof answers on METRICS_ADDR,
// the private port, and never on the public one (HTTP_ADDR), whether
// /metrics is public or not.
func TestProfilerOnMetricsPortOnly(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close() // the app listens there next
	private := startApp(t, map[string]string{"METRICS_PUBLIC": "false", "METRICS_ADDR": metricsAddr})
	public := startApp(t, nil)
	for _, a := range []*testApp{private, public} {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1"} {
			if r := a.do(t, "GET", path, nil, nil); r.Status != http.StatusNotFound {
				t.Errorf("GET %s on the public port: %d, want 404", path, r.Status)
			}
		}
	}

	res, err := http.Get("http://" + metricsAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Fatalf("GET /debug/pprof/goroutine on METRICS_ADDR: %d %.200s; want the profile", res.StatusCode, body)
	}
}
