package gatewaytest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/payments"
)

// Unaskable is the status client (payments.StatusClient) of a gateway
// whose API lacks the route it asks, as an emulation lacking a
// gateway's search would: every request is answered 404, which for
// a route is not "no such order" but "cannot ask". It counts the
// requests its API was sent.
type Unaskable struct {
	url   string
	asked atomic.Int64
}

// NewUnaskable serves that API until the test ends.
func NewUnaskable(t testing.TB) *Unaskable {
	t.Helper()
	c := &Unaskable{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.asked.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// Provider implements payments.StatusClient.
func (*Unaskable) Provider() string { return "unaskable" }

// Status implements payments.StatusClient: the 404 is an error.
func (c *Unaskable) Status(ctx context.Context, ref string) (payments.Event, bool, error) {
	code, _, err := httpjson.Get(ctx, http.DefaultClient, c.url+"/v1/search?"+url.Values{"order": {ref}}.Encode(), "sk_test")
	if err != nil {
		return payments.Event{}, false, err
	}
	return payments.Event{}, false, fmt.Errorf("unaskable: HTTP %d", code)
}

// Asked is how many requests its API was sent.
func (c *Unaskable) Asked() int64 { return c.asked.Load() }
