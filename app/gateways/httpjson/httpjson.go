// Package httpjson is how the gateway packages ask a gateway's API: one
// JSON request with basic auth, a bounded answer, a timeout.
package httpjson

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// MaxBody bounds an answer read.
const MaxBody = 1 << 20

// NewClient is the HTTP client of a gateway's API: every request ends
// within timeout, in a span of the trace in its context (none without
// one), named by method and host (a path holds ids). The trace context
// is not sent to the gateway.
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: otelhttp.NewTransport(http.DefaultTransport,
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "gateway " + r.Method + " " + r.URL.Host }))}
}

// DefaultTimeout bounds one request to a gateway's API.
const DefaultTimeout = 10 * time.Second

// Get GETs url with user as the basic-auth user (the gateways take their
// secret key there, with no password) and returns the status and at most
// MaxBody bytes of the answer.
func Get(ctx context.Context, client *http.Client, url, user string) (int, []byte, error) {
	return do(ctx, client, http.MethodGet, url, user, nil, nil)
}

// Post POSTs body, JSON, to url as Get asks.
func Post(ctx context.Context, client *http.Client, url, user string, body []byte) (int, []byte, error) {
	return do(ctx, client, http.MethodPost, url, user, nil, body)
}

// PostWith is Post with header's fields added to the request (an
// idempotency key).
func PostWith(ctx context.Context, client *http.Client, url, user string, header http.Header, body []byte) (int, []byte, error) {
	return do(ctx, client, http.MethodPost, url, user, header, body)
}

// do sends one request as Get describes, with header's fields, and body
// as JSON when it is not nil.
func do(ctx context.Context, client *http.Client, method, url, user string, header http.Header, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	for k, vs := range header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if user != "" {
		req.SetBasicAuth(user, "")
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, MaxBody))
	return res.StatusCode, b, err
}
