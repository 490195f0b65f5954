package gatewaytest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
)

// PageNoAnswer checks that an opener the gateway does not answer — the
// connection closed, or the context's deadline came first — returns a
// plain error, not a refusal: unknown whether the gateway acted. open
// builds the opener for a gateway at baseURL.
func PageNoAnswer(t *testing.T, open func(baseURL string) (gatewaycalls.PageOpener, error), r gatewaycalls.PageRequest) {
	t.Helper()
	closed := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(closed.Close)
	o, err := open(closed.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.OpenPage(t.Context(), r); err == nil || gatewaycalls.IsRefused(err) {
		t.Errorf("a closed connection: %v", err)
	}

	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) }) // before the server closes
	o, err = open(hung.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := o.OpenPage(ctx, r); err == nil || gatewaycalls.IsRefused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the context's deadline: %v", err)
	}
}

// PageRequest is an order of two lines, 150000 IDR in all, opened under
// key 14 min 30 s before the order's deadline.
func PageRequest(key string) gatewaycalls.PageRequest {
	return gatewaycalls.PageRequest{
		ExpiresAt: time.Date(2026, 12, 1, 10, 15, 0, 0, time.UTC), AskedAt: time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC),
		OrderID: "ORD-P-1", Key: key, Amount: 150000, Currency: "IDR", CustomerEmail: "budi@example.id",
		Items: []gatewaycalls.PageItem{
			{SKU: "KOPI", Name: "Kopi", Qty: 2, UnitPrice: 50000},
			{SKU: "TEH", Name: "Teh", Qty: 1, UnitPrice: 50000},
		},
		ReturnURL: "https://shop.example/orders/ORD-P-1?t=tok",
	}
}

// PageRefusedBeforeSending checks that o refuses each request before it
// sends it (a *gatewaycalls.Refused with Status 0), and that nothing reached
// the gateway: got, what the gateway received, stays empty.
func PageRefusedBeforeSending[T any](t *testing.T, o gatewaycalls.PageOpener, got <-chan T, requests ...gatewaycalls.PageRequest) {
	t.Helper()
	for _, r := range requests {
		_, err := o.OpenPage(t.Context(), r)
		var refused *gatewaycalls.Refused
		if !errors.As(err, &refused) || refused.Status != 0 {
			t.Errorf("%+v: %v, want refused before sending", r, err)
		}
	}
	select {
	case r := <-got:
		t.Errorf("sent %+v", r)
	default:
	}
}

// PageAnswer is a gateway's answer to an opener, and what the opener
// must make of it: a refusal (with Message, when it is not empty) or a
// plain error.
type PageAnswer struct {
	Status  int
	Body    string
	Refused bool
	Message string
}

// PageAnswers checks what the opener open(status, body) — answered so
// by its gateway — returns for r: an error, a *gatewaycalls.Refused with the
// gateway's status exactly when the answer is a definite "no".
func PageAnswers(t *testing.T, open func(status int, body string) gatewaycalls.PageOpener, r gatewaycalls.PageRequest, answers []PageAnswer) {
	t.Helper()
	for _, a := range answers {
		_, err := open(a.Status, a.Body).OpenPage(t.Context(), r)
		var refused *gatewaycalls.Refused
		switch {
		case err == nil:
			t.Errorf("%d %s: no error", a.Status, a.Body)
		case !a.Refused && errors.As(err, &refused):
			t.Errorf("%d %s: %v, want a plain error", a.Status, a.Body, err)
		case a.Refused && (!errors.As(err, &refused) || refused.Status != a.Status || (a.Message != "" && refused.Message != a.Message)):
			t.Errorf("%d %s: %#v, want refused %d %q", a.Status, a.Body, err, a.Status, a.Message)
		}
	}
}
