package midtrans

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/payments"
)

// scriptedMidtrans answers every refund with 406 "Duplicate refund ID",
// and its status API with the transaction listing refunds (the
// refund_keys and amounts given), or with statusBody when set.
func scriptedMidtrans(t *testing.T, statusBody string, listed map[string]string) *Refunder {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/{id}/refund", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"status_code":"406","status_message":"Duplicate refund ID"}`))
	})
	mux.HandleFunc("GET /v2/{id}/status", func(w http.ResponseWriter, r *http.Request) {
		if statusBody != "" {
			w.Write([]byte(statusBody))
			return
		}
		n := Notification{OrderID: "ORD-1", TransactionID: r.PathValue("id"), TransactionStatus: "partial_refund", StatusCode: "200",
			GrossAmount: "150000.00", Currency: "IDR"}
		var total int64
		for key, amount := range listed {
			n.Refunds = append(n.Refunds, NotifiedRefund{RefundKey: key, RefundAmount: amount})
			minor, _ := payments.ParseAmount(amount, "IDR")
			total += minor
		}
		n.RefundAmount = payments.MajorText(total, "IDR", 2)
		json.NewEncoder(w).Encode(n)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f, err := NewRefunder(serverKey, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A 406 "Duplicate refund ID" is counted only when the status API lists
// a refund under the request's refund_key: a key taken by a call that was
// refused (its answer lost) would otherwise count on a repeat — a refund
// done that never happened. Not listed, a repeat is a plain error (the
// refund stays open and is asked again) and a first call a refusal.
func TestRefund406IsCheckedWithTheStatusAPI(t *testing.T) {
	t.Parallel()
	req := func(attempt int) gatewaycalls.RefundRequest {
		return gatewaycalls.RefundRequest{OrderID: "ORD-1", Key: "ORD-1-R1", Charge: "tx-1", Amount: 50000, Currency: "IDR", Attempt: attempt}
	}
	listed := map[string]string{"ORD-1-R1": "50000.00", "someone-else": "10000.00"}
	a, err := scriptedMidtrans(t, "", listed).Refund(t.Context(), req(2))
	if want := (gatewaycalls.Refunded{ObjectID: "ORD-1-R1", RefundKey: "ORD-1-R1", Amount: 50000, Currency: "IDR"}); err != nil || a != want {
		t.Errorf("a repeat, the key listed: %+v, %v; want %+v", a, err, want)
	}

	notListed := map[string]string{"someone-else": "10000.00"}
	_, err = scriptedMidtrans(t, "", notListed).Refund(t.Context(), req(2))
	if err == nil || gatewaycalls.IsRefused(err) || !strings.Contains(err.Error(), "not counted") {
		t.Errorf("a repeat, the key not listed: %v; want a plain error that says it is not counted", err)
	}
	_, err = scriptedMidtrans(t, "", notListed).Refund(t.Context(), req(1))
	if !gatewaycalls.IsRefused(err) {
		t.Errorf("a first call, the key not listed: %v; want a refusal", err)
	}

	// The status API in trouble, inside a 200: nothing is known.
	_, err = scriptedMidtrans(t, `{"status_code":"500","status_message":"Sorry"}`, nil).Refund(t.Context(), req(2))
	if err == nil || gatewaycalls.IsRefused(err) {
		t.Errorf("the status API erring: %v; want a plain error", err)
	}
}
