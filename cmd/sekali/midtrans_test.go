package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/models"
)

// Over HTTP, on a server with Midtrans and the sandbox gateway (which
// answers as Midtrans's status API): a correctly signed settlement of a
// transaction Midtrans never made is answered 200 unconfirmed and pays
// nothing; once the transaction exists at the API, the same notification
// pays the order, once.
func TestForgedMidtransSettlementPaysNothing(t *testing.T) {
	t.Parallel()
	const serverKey = "SB-Mid-server-E2E0123456789abcdef"
	a := startApp(t, map[string]string{"MIDTRANS_SERVER_KEY": serverKey, "SANDBOX_GATEWAY": "on"})
	id := a.createOrder(t, map[string]int{a.newProduct(t, 75000, 5): 1})
	n := midtrans.Notification{OrderID: id, TransactionID: "tx-e2e-" + id, TransactionStatus: "settlement",
		StatusCode: "200", GrossAmount: "75000.00", Currency: "IDR"}
	n.SignatureKey = midtrans.Signature(n, serverKey)
	body, _ := json.Marshal(n)
	send := func() response {
		return a.do(t, "POST", "/callbacks/midtrans", http.Header{"Content-Type": {"application/json"}}, body)
	}
	if r := send(); r.Status != 200 || r.str("result") != models.ResultUnconfirmed || r.str("detail") == "" {
		t.Fatalf("a settlement Midtrans never made: %d %s; want 200 unconfirmed with a detail", r.Status, r.Body)
	}
	if o := a.order(t, id); o.Status != models.OrderPending || a.count(t, "SELECT count(*) FROM payments WHERE order_id = $1", id) != 0 {
		t.Fatalf("after the forgery: order %s; want pending and no payment", o.Status)
	}
	a.eventually(t, 1, "SELECT count(*) FROM callback_deliveries WHERE outcome = 'unconfirmed' AND note <> ''")

	// The transaction happens: the sandbox gateway, as Midtrans, learns it.
	req, _ := http.NewRequest(http.MethodPut, a.URL+midtrans.SandboxAPIPath+"/v2/"+n.TransactionID+"/status", bytesReader(body))
	req.SetBasicAuth(serverKey, "")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("telling the status API: %v %v", res, err)
	}
	res.Body.Close()
	if r := send(); r.str("result") != models.ResultProcessed || r.str("order_status") != "paid" {
		t.Fatalf("the genuine settlement: %d %s", r.Status, r.Body)
	}
	if r := send(); r.str("result") != models.ResultDuplicate {
		t.Errorf("its retry: %d %s, want duplicate", r.Status, r.Body)
	}
	a.verify(t)
}
