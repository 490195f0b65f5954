package migrations_test

import (
	"context"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/migrations"
)

// Order answers stored under an Idempotency-Key with the order's access
// token lose it on migrating up (00020), and nothing else of any answer
// changes.
func TestStoredAnswersLoseTheirTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.OpenDB(t, testenv.NewDatabaseURL(t))
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 19); err != nil {
		t.Fatal(err)
	}
	const order = `{"id":"ORD-01M8MTBKMGJ6N45TWWFMZVAHTH","status":"pending","items":[],"payments":[],"invoice":null`
	answers := []struct{ scope, key, before, after string }{
		{"orders.create", "k1", order + `,"access_token":"Xq3l0d0n6uIY7mJj0bX1cQ8Q6mT4N3k-_z"}`, order + `}`},
		{"shop.checkout", "k2", order + `,"access_token":"AbC_12-xyz"}`, order + `}`},
		{"orders.create", "k3", `{"type":"/problems/insufficient_stock","status":409,"code":"insufficient_stock"}`,
			`{"type":"/problems/insufficient_stock","status":409,"code":"insufficient_stock"}`},
		{"products.restock", "k4", `{"sku":"access_token","note":",\"access_token\":\"x\""}`, `{"sku":"access_token","note":",\"access_token\":\"x\""}`},
	}
	for _, a := range answers {
		err := db.Exec(`INSERT INTO api_idempotency_keys (scope, key, request_hash, response_code, response_body, created_at)
			VALUES (?, ?, 'h', 201, ?, now())`, a.scope, a.key, a.before).Error
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range answers {
		var body string
		db.Raw("SELECT response_body FROM api_idempotency_keys WHERE scope = ? AND key = ?", a.scope, a.key).Scan(&body)
		if body != a.after {
			t.Errorf("%s %s: %s, want %s", a.scope, a.key, body, a.after)
		}
	}
}
