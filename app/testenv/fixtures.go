package testenv

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// OrderTokenSecret is the ORDER_TOKEN_SECRET of the servers tests start.
const OrderTokenSecret = "test-order-token-secret-0123456789abcdef"

// SandboxSecret is the sandbox secret tests sign with; SandboxKey is its key.
const SandboxSecret = "whsec_dGVzdC1zYW5kYm94LXNlY3JldC1mb3Itc2VrYWxp"

// SandboxKey is SandboxSecret decoded.
var SandboxKey = mustDecode(SandboxSecret)

func mustDecode(s string) []byte {
	k, err := stdwebhooks.DecodeSecret(s)
	if err != nil {
		panic(err)
	}
	return k
}

// MustCreateProduct creates a product (with its adjust movement) priced in
// IDR.
func MustCreateProduct(tb testing.TB, db *gorm.DB, sku string, price, stock int64) models.Product {
	tb.Helper()
	p := models.Product{SKU: sku, Name: sku, Price: price, Currency: "IDR", Stock: stock}
	created, err := catalog.Create(db, &p)
	if err != nil || !created {
		tb.Fatalf("testenv: create product %s: created=%v err=%v", sku, created, err)
	}
	return p
}

// SandboxHeaders returns the headers of a sandbox delivery of body under
// event id, signed with SandboxKey at time at.
func SandboxHeaders(id string, body []byte, at time.Time) http.Header {
	h := stdwebhooks.Headers(SandboxKey, id, at, body)
	h.Set("Content-Type", "application/json")
	return h
}

// SandboxBody is a sandbox callback body.
func SandboxBody(orderID, transactionID string, status models.PaymentEvent, amount int64) []byte {
	return []byte(`{"order_id":"` + orderID + `","transaction_id":"` + transactionID +
		`","payment_status":"` + string(status) + `","paid_amount":` + strconv.FormatInt(amount, 10) + `,"currency":"IDR"}`)
}
