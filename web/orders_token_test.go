package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
)

// An order's creation replayed (the same Idempotency-Key and body) from
// another client must not hand that client the order's access token, nor
// its customer's email, total and status: only the client
// that made it — an IPv6 client being its /64 — gets the order again,
// with its token; anyone else gets the same 201, marked replayed, with
// the order's id and nothing else. The stored answer never holds the
// token.
func TestReplayedCreationShowsTheOrderToItsClientOnly(t *testing.T) {
	t.Parallel()
	c := newConsole(t, behindProxy)
	testenv.MustCreateProduct(t, c.db, "TOKEN-MUG", 75000, 10)
	key := newKey() // as guessable keys go, one an attacker knows
	body := `{"customer_email":"b@example.com","items":[{"sku":"TOKEN-MUG","qty":1}]}`
	post := func(from string) (answer, map[string]any) {
		t.Helper()
		h := orderHeader(from)
		h.Set("Idempotency-Key", key)
		a := send("POST", c.URL+"/api/orders", h, body)
		var v map[string]any
		if a.err != nil || json.Unmarshal([]byte(a.body), &v) != nil {
			t.Fatalf("POST /api/orders from %s: %d %s %v", from, a.status, a.body, a.err)
		}
		return a, v
	}
	first, created := post("2001:db8:5:1::10")
	token, _ := created["access_token"].(string)
	if first.status != http.StatusCreated || token == "" || created["customer_email"] != "b@example.com" {
		t.Fatalf("the order: %d %s, want 201 with the order and its token", first.status, first.body)
	}
	for _, tt := range []struct {
		from string
		own  bool
	}{
		{"2001:db8:5:1::10", true},  // its client
		{"2001:db8:5:1::77", true},  // another address of the same /64: the same client
		{"2001:db8:5:2::10", false}, // the next /64
		{"203.0.113.9", false},
	} {
		a, v := post(tt.from)
		if a.status != http.StatusCreated || a.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay from %s: %d %s (replayed %q), want 201 replayed", tt.from, a.status, a.body, a.header.Get("Idempotent-Replayed"))
			continue
		}
		want := created // its own client: the first answer, token and all
		if !tt.own {
			want = map[string]any{"id": created["id"]}
		}
		if !reflect.DeepEqual(v, want) {
			t.Errorf("replay from %s: %v, want %v", tt.from, v, want)
		}
	}
	var stored string
	c.db.Raw("SELECT response_body FROM api_idempotency_keys WHERE key = ?", key).Scan(&stored)
	if stored == "" || strings.Contains(stored, token) || strings.Contains(stored, "access_token") {
		t.Errorf("the stored answer %q: want it without the token", stored)
	}
}

// The shop's form is the same order creation: posted again from another
// client, it does not lead there to the order's page with the token; from
// the client that placed it, it does.
func TestShopFormPostedAgainFromAnotherClient(t *testing.T) {
	t.Parallel()
	c := newConsole(t, behindProxy)
	testenv.MustCreateProduct(t, c.db, "SHOP-TOKEN", 75000, 10)
	key := c.formKey(t, "SHOP-TOKEN")
	checkout := func(from string) page {
		return c.do(c.client, "POST", "/checkout", strings.NewReader(url.Values{"idempotency_key": {key}, "sku": {"SHOP-TOKEN"},
			"qty": {"1"}, "email": {"buyer@example.com"}}.Encode()), http.Header{
			"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}, "Origin": {c.URL},
			"X-Forwarded-For": {from},
		})
	}
	first := checkout("198.51.100.20")
	loc := first.Header.Get("Location")
	if first.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "?t=") || strings.HasSuffix(loc, "?t=") {
		t.Fatalf("the order form: %d to %q, want 303 to the order's page with its token", first.StatusCode, loc)
	}
	if again := checkout("198.51.100.20"); again.StatusCode != http.StatusSeeOther || again.Header.Get("Location") != loc {
		t.Errorf("posted again by its client: %d to %q, want 303 to %q", again.StatusCode, again.Header.Get("Location"), loc)
	}
	token := loc[strings.Index(loc, "?t=")+3:]
	other := checkout("198.51.100.21")
	if other.StatusCode != http.StatusConflict || other.Header.Get("Location") != "" || strings.Contains(other.Body, token) {
		t.Errorf("posted again by another client: %d to %q; want 409, no way to the order", other.StatusCode, other.Header.Get("Location"))
	}
	if !strings.Contains(other.Body, "already placed from another connection") {
		t.Errorf("posted again by another client: the page does not say why")
	}
	var orders int64
	c.db.Raw("SELECT count(*) FROM orders").Scan(&orders)
	if orders != 1 {
		t.Errorf("%d orders from one form, want 1", orders)
	}
}
