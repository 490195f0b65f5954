package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/models"
)

// One anonymous client must not hold a product's whole stock unpaid,
// again and again: a product caps the units one order may hold, and one
// client address holds at most OPEN_ORDERS_PER_CLIENT unpaid orders —
// counted exactly when its orders come at once — while another client
// (behind a trusted proxy, by X-Forwarded-For) still buys. An untrusted
// X-Forwarded-For changes nothing.
func TestOneClientCannotHoardStock(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"OPEN_ORDERS_PER_CLIENT": "3", "TRUSTED_PROXIES": "127.0.0.1"})
	sku := a.newProduct(t, 10000, 100)
	if err := a.DB.Model(&models.Product{}).Where("sku = ?", sku).Update("max_per_order", catalog.Units(5)).Error; err != nil {
		t.Fatal(err)
	}
	order := func(qty int, header http.Header) response {
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {randomKey()}}
		for k, v := range header {
			h[k] = v
		}
		return a.do(t, "POST", "/api/orders", h, fmt.Appendf(nil, `{"customer_email":"b@example.com","items":[{"sku":%q,"qty":%d}]}`, sku, qty))
	}
	if r := order(6, nil); r.Status != 422 || r.str("code") != models.EInvalid {
		t.Errorf("6 units where at most 5 may be ordered: %d %s, want 422", r.Status, r.Body)
	}
	// Ten orders at once from one client: exactly three are made.
	statuses := make([]int, 10)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range statuses {
		wg.Go(func() {
			<-start
			statuses[i] = order(1, http.Header{"X-Forwarded-For": {"203.0.113.9"}}).Status
		})
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	if counts[201] != 3 || counts[429] != 7 {
		t.Errorf("10 orders at once from one client: %v, want 3 × 201 and 7 × 429", counts)
	}
	if r := order(1, http.Header{"X-Forwarded-For": {"203.0.113.9"}}); r.Status != 429 || r.str("code") != models.ETooManyRequests {
		t.Errorf("a fourth order from the client: %d %s, want 429", r.Status, r.Body)
	}
	// Another customer, behind the same proxy, is another client.
	if r := order(1, http.Header{"X-Forwarded-For": {"198.51.100.4"}}); r.Status != 201 {
		t.Errorf("another client's order: %d %s, want 201", r.Status, r.Body)
	}
	// A client that names itself in X-Forwarded-For behind a proxy that
	// appends the real one: the proxy's word is what counts.
	if r := order(1, http.Header{"X-Forwarded-For": {"198.51.100.77, 203.0.113.9"}}); r.Status != 429 {
		t.Errorf("a forged X-Forwarded-For before the proxy's: %d, want 429 (still the same client)", r.Status)
	}
	if n := a.count(t, "SELECT count(*) FROM orders WHERE client_addr = '203.0.113.9'"); n != 3 {
		t.Errorf("%d orders of the hoarding client, want 3", n)
	}

	// Without trusted proxies, X-Forwarded-For is not read at all.
	b := startApp(t, map[string]string{"OPEN_ORDERS_PER_CLIENT": "1"})
	bsku := b.newProduct(t, 10000, 100)
	for i, want := range []int{201, 429} {
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {randomKey()}, "X-Forwarded-For": {fmt.Sprintf("192.0.2.%d", i)}}
		if r := b.do(t, "POST", "/api/orders", h, fmt.Appendf(nil, `{"customer_email":"b@example.com","items":[{"sku":%q,"qty":1}]}`, bsku)); r.Status != want {
			t.Errorf("order %d with an untrusted X-Forwarded-For: %d, want %d", i+1, r.Status, want)
		}
	}
}
