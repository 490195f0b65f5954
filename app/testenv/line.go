package testenv

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// Line is the network between Sekali and a gateway's API, as a test
// holds it: a proxy to the API that the test can cut. While it is down
// every call fails before it reaches the gateway, with a 503, as a
// gateway's load balancer answers when the gateway behind it is out of
// reach — the look-ups too, which the emulations' fault switches leave
// alone (they fail only the calls that act).
type Line struct {
	URL  string // the proxy's address: the API's URL is this and its path
	down atomic.Bool
}

// NewLine is a line to target (scheme and host), up, closed when the
// test ends.
func NewLine(tb testing.TB, target string) *Line {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	l := &Line{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.down.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"type":"api_error","message":"the gateway is out of reach"}}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	l.URL = srv.URL
	return l
}

// Cut takes the line down (true) or brings it back up (false).
func (l *Line) Cut(down bool) { l.down.Store(down) }
