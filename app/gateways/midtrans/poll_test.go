package midtrans_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// recordedStatus serves recorded status answers by path, as Midtrans's
// status API would, to a caller with a server key as its basic-auth
// user; a path not recorded is Midtrans's 404.
func recordedStatus(t *testing.T, answers map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, _, ok := r.BasicAuth(); !ok || user == "" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		body, ok := answers[r.URL.RequestURI()]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status_code":"404","status_message":"not found"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// statusAnswer is a recorded Midtrans status answer (the fields of GET
// /v2/{order_id}/status are the notification's) for orderID's settled
// charge ref, which the pipeline's own status API then knows too.
func (p *pipeline) statusAnswer(orderID, ref string) string {
	d := p.notification(orderID, ref, "settlement", "", "50000.00", "IDR")
	var n map[string]any
	json.Unmarshal(d.Body, &n)
	n["status_message"] = "Success, transaction is found"
	n["merchant_id"] = "G123456789"
	b, _ := json.Marshal(n)
	return string(b)
}

// A poll and a push of the same fact converge on one effect, whichever
// comes first: the same key, compared by what they say (the poll has no
// notification body, so no byte fingerprint to compare).
func TestMidtransPollAndPushConverge(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	pollFirst, _ := p.Order()
	pushFirst, _ := p.Order()
	srv := recordedStatus(t, map[string]string{
		"/v2/" + pollFirst + "/status": p.statusAnswer(pollFirst, "tx-poll-"+pollFirst),
		"/v2/" + pushFirst + "/status": p.statusAnswer(pushFirst, "tx-push-"+pushFirst),
	})
	client, err := midtrans.NewStatusClient(midtransKey, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Poll first, then the notification arrives after all.
	ev, found, err := client.Status(ctx, pollFirst)
	if err != nil || !found || ev.Key != "tx-poll-"+pollFirst+":settlement" {
		t.Fatalf("status of %s: %+v %v %v", pollFirst, ev, found, err)
	}
	if out := p.Pay.ApplyPolled(ctx, midtrans.Name, ev); out.Result != models.ResultProcessed {
		t.Fatalf("the polled fact: %+v", out)
	}
	if out := p.Send(p.notification(pollFirst, "tx-poll-"+pollFirst, "settlement", "", "50000.00", "IDR")); out.Result != models.ResultDuplicate {
		t.Errorf("the notification after the poll: %s (%s), want duplicate", out.Result, out.Detail)
	}
	// Notification first, then a poll.
	if out := p.Send(p.notification(pushFirst, "tx-push-"+pushFirst, "settlement", "", "50000.00", "IDR")); out.Result != models.ResultProcessed {
		t.Fatalf("the notification: %+v", out)
	}
	ev, _, _ = client.Status(ctx, pushFirst)
	if out := p.Pay.ApplyPolled(ctx, midtrans.Name, ev); out.Result != models.ResultDuplicate {
		t.Errorf("the poll after the notification: %s (%s), want duplicate", out.Result, out.Detail)
	}
	// A poll that says something else under the same key is a conflict.
	ev.Amount++
	if out := p.Pay.ApplyPolled(ctx, midtrans.Name, ev); out.Result != models.ResultConflict {
		t.Errorf("a poll with another amount under the key: %s, want conflict", out.Result)
	}
	for _, id := range []string{pollFirst, pushFirst} {
		var pays []models.Payment
		p.DB.Find(&pays, "order_id = ?", id)
		var o models.Order
		p.DB.Take(&o, "id = ?", id)
		if o.Status != models.OrderPaid || len(pays) != 1 {
			t.Errorf("order %s: %s with %d payments, want paid once", id, o.Status, len(pays))
		}
	}
}

// An order whose Snap page was made under {order}~2 (its order id spent
// by a call whose answer was lost) is asked about by that key, which
// Midtrans files the customer's payment under: the poll finds it. An
// order Midtrans knows nothing of (its 404) is no error.
func TestMidtransPollAsksByThePagesKey(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	id, _ := p.Order()
	unknown, _ := p.Order() // Midtrans knows none of it
	key := id + "~2"
	done := time.Now()
	page := models.GatewayRequest{Kind: models.GatewayCreatePayment, OrderID: id, Provider: midtrans.Name, IdempotencyKey: key,
		Amount: price, Currency: "IDR", Phase: models.GatewayDone, Attempts: 2, DoneAt: &done,
		ProviderObjectID: "snap-token", RedirectURL: "https://app.sandbox.midtrans.com/snap/v4/redirection/snap-token"}
	if err := p.DB.Create(&page).Error; err != nil {
		t.Fatal(err)
	}
	msrv := recordedStatus(t, map[string]string{"/v2/" + key + "/status": p.statusAnswer(key, "tx-"+key)})
	client, _ := midtrans.NewStatusClient(midtransKey, msrv.URL)
	if applied, err := p.Pay.Poll(context.Background(), []payments.StatusClient{client}, 2*time.Hour); err != nil || applied != 1 {
		t.Fatalf("Poll: %d applied, %v; want the payment made on the page", applied, err)
	}
	for order, want := range map[string]models.OrderStatus{id: models.OrderPaid, unknown: models.OrderPending} {
		var o models.Order
		if p.DB.Take(&o, "id = ?", order); o.Status != want {
			t.Errorf("order %s is %s after the poll, want %s", order, o.Status, want)
		}
	}
}
