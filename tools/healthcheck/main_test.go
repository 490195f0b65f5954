package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{srv.URL + "/healthz"}, 0},
		{[]string{srv.URL + "/readyz"}, 1},     // 503
		{[]string{closed.URL + "/healthz"}, 1}, // nothing listening
		{[]string{"-timeout", "1s", srv.URL + "/healthz"}, 0},
		{nil, 2},
		{[]string{"a", "b"}, 2},
	} {
		var stderr strings.Builder
		if got := run(tc.args, &stderr); got != tc.want {
			t.Errorf("healthcheck %q = %d, want %d (stderr: %s)", tc.args, got, tc.want, stderr.String())
		}
	}
}
