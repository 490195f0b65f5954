package main

import (
	"net/http"
	"slices"
	"testing"
)

func TestAdminAPIIsOffWithoutAToken(t *testing.T) {
	t.Parallel()
	a := startApp(t, nil)
	for _, r := range []response{
		a.do(t, "GET", "/api/audit", http.Header{"Authorization": {"Bearer anything"}}, nil),
		a.do(t, "POST", "/api/products", http.Header{"Content-Type": {"application/json"}}, []byte(`{}`)),
	} {
		if r.Status != 404 || r.str("code") != "not_found" {
			t.Fatalf("admin API without ADMIN_API_TOKEN: %d %s; want 404", r.Status, r.Body)
		}
	}
}

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	const token = "test-admin-token"
	a := startApp(t, map[string]string{"ADMIN_API_TOKEN": token})
	auth := func(h http.Header) http.Header {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Authorization", "Bearer "+token)
		h.Set("Content-Type", "application/json")
		return h
	}

	for name, h := range map[string]http.Header{
		"no token":    nil,
		"wrong token": {"Authorization": {"Bearer " + token + "x"}},
		"not bearer":  {"Authorization": {"Basic " + token}},
	} {
		r := a.do(t, "GET", "/api/audit", h, nil)
		if r.Status != 401 || r.str("code") != "unauthorized" || r.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %s; want 401 unauthorized with WWW-Authenticate", name, r.Status, r.Body)
		}
	}

	t.Run("products", func(t *testing.T) {
		r := a.do(t, "POST", "/api/products", auth(nil), []byte(`{"sku":"QA-1","name":"QA item","price":5000,"currency":"IDR","stock":7}`))
		if r.Status != 201 || r.JSON["stock"] != float64(7) {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		if r := a.do(t, "POST", "/api/products", auth(nil), []byte(`{"sku":"QA-1","name":"again","price":1,"currency":"IDR","stock":1}`)); r.Status != 409 || r.str("code") != "already_exists" {
			t.Fatalf("create twice: %d %s; want 409 already_exists", r.Status, r.Body)
		}
		if r := a.do(t, "POST", "/api/products", auth(nil), []byte(`{"sku":"bad sku!","name":"x","price":1,"currency":"IDR","stock":1}`)); r.Status != 422 {
			t.Fatalf("create with a bad sku: %d %s; want 422", r.Status, r.Body)
		}

		restock := func(key, body string) response {
			h := auth(nil)
			if key != "" {
				h.Set("Idempotency-Key", key)
			}
			return a.do(t, "POST", "/api/products/QA-1/restock", h, []byte(body))
		}
		first, again := restock("restock-qa-1-first", `{"qty":5}`), restock("restock-qa-1-first", `{"qty":5}`)
		if first.Status != 200 || first.JSON["stock"] != float64(12) || string(again.Body) != string(first.Body) ||
			again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("restock and replay: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
		}
		if a.stock(t, "QA-1") != 12 {
			t.Fatalf("stock = %d after one restock of 5 sent twice, want 12", a.stock(t, "QA-1"))
		}
		if r := restock("restock-qa-1-first", `{"qty":6}`); r.Status != 422 || r.str("code") != "idempotency_key_reused" {
			t.Fatalf("reuse: %d %s", r.Status, r.Body)
		}
		if r := restock("", `{"qty":6}`); r.Status != 400 {
			t.Fatalf("no key: %d %s", r.Status, r.Body)
		}
		if r := a.do(t, "POST", "/api/products/NOPE/restock", auth(http.Header{"Idempotency-Key": {"restock-nope-0001"}}), []byte(`{"qty":1}`)); r.Status != 404 {
			t.Fatalf("unknown sku: %d %s", r.Status, r.Body)
		}
	})

	t.Run("audit", func(t *testing.T) {
		r := a.do(t, "GET", "/api/audit?drain_timeout=10s", auth(nil), nil)
		checked, _ := r.JSON["checked"].([]any)
		want := []any{"stock", "reservations", "payments", "callbacks", "refunds", "invoices", "emails", "jobs", "gateway refunds", "unknown outcomes"} // checks 1 to 10
		if r.Status != 200 || r.JSON["ok"] != true || r.JSON["drained"] != true || !slices.Equal(checked, want) {
			t.Fatalf("audit: %d %s; want ok, drained, checked %v", r.Status, r.Body, want)
		}
		a.DB.Exec("UPDATE products SET stock = stock + 1 WHERE sku = 'QA-1'")
		r = a.do(t, "GET", "/api/audit?drain_timeout=1s", auth(nil), nil)
		violations, _ := r.JSON["violations"].([]any)
		if r.Status != 200 || r.JSON["ok"] != false || len(violations) != 1 {
			t.Fatalf("audit after breaking the stock: %d %s; want ok=false with one violation", r.Status, r.Body)
		}
		if r := a.do(t, "GET", "/api/audit?drain_timeout=forever", auth(nil), nil); r.Status != 422 {
			t.Fatalf("bad drain_timeout: %d %s", r.Status, r.Body)
		}
	})
}
