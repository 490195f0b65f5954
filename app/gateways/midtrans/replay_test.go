package midtrans_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// One genuine Midtrans notification sent 50 times — a settlement the
// status API does not confirm yet (200 unconfirmed, each copy a status
// request under the merchant's key) — from two clients, 20 copies one
// after the other and 30 at once: at most 3 copies per client are
// evaluated (asked about, their bodies kept); the rest are answered as
// the first was, unconfirmed, from memory. Every copy still leaves its
// row.
func TestMidtransReplayedNotificationIsAnsweredFromMemory(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.Pay.KeepBodies = true
	id, _ := p.Order()
	p.notification(id, "tx-replay-"+id, "pending", "", "50000.00", "IDR") // what the status API knows
	settlement := signedBody(id, "tx-replay-"+id, "settlement", "", "50000.00", "IDR")
	send := func(client string) payments.Outcome {
		return p.Pay.Receive(context.Background(), payments.Delivery{Provider: settlement.Provider, Body: bytes.NewReader(settlement.Body),
			ContentType: "application/json", RemoteAddr: client, Client: client})
	}
	clients := []string{"198.51.100.7", "203.0.113.8"}
	var mu sync.Mutex
	words := map[string]int{}
	count := func(out payments.Outcome) {
		mu.Lock()
		words[out.Word()]++
		mu.Unlock()
	}
	for i := range 20 {
		count(send(clients[i%2]))
	}
	var fns []func()
	for i := range 30 {
		fns = append(fns, func() { count(send(clients[i%2])) })
	}
	testenv.AtOnce(fns...)
	if words[models.OutcomeUnconfirmed] != 50 {
		t.Errorf("answers %v, want 50 unconfirmed", words)
	}
	var rows, kept int64
	testenv.Eventually(t, "a row for each copy", func() bool {
		p.DB.Model(&models.CallbackDelivery{}).Where("outcome = ? AND remote_addr IN ?", models.OutcomeUnconfirmed, clients).Count(&rows)
		return rows == 50
	})
	p.DB.Model(&models.CallbackDelivery{}).Where("remote_addr IN ? AND body IS NOT NULL", clients).Count(&kept)
	if asked := p.api.asked.Load(); kept > 6 || asked > 6 {
		t.Errorf("50 copies from 2 clients: %d rows kept a body, %d status requests; want at most 3 each per client", kept, asked)
	}
	t.Logf("50 copies: %d rows with a body, %d status requests", kept, p.api.asked.Load())
}

// A notification the shop ignores (pending_refund), sent 10 times from
// one client, keeps its body 3 times: the others are answered ignored
// from memory.
func TestMidtransReplayedIgnoredNotificationKeepsNoBody(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.Pay.KeepBodies = true
	id, _ := p.Order()
	d := p.notification(id, "tx-ignored-"+id, "pending_refund", "", "50000.00", "IDR")
	const client = "198.51.100.9"
	for i := range 10 {
		out := p.Pay.Receive(context.Background(), payments.Delivery{Provider: d.Provider, Body: bytes.NewReader(d.Body),
			ContentType: "application/json", RemoteAddr: client, Client: client})
		if out.Result != models.ResultIgnored {
			t.Fatalf("copy %d: %s (%s), want ignored", i+1, out.Result, out.Detail)
		}
	}
	var rows, kept int64
	testenv.Eventually(t, "a row for each copy", func() bool {
		p.DB.Model(&models.CallbackDelivery{}).Where("remote_addr = ?", client).Count(&rows)
		return rows == 10
	})
	p.DB.Model(&models.CallbackDelivery{}).Where("remote_addr = ? AND body IS NOT NULL", client).Count(&kept)
	if kept != 3 {
		t.Errorf("%d of 10 copies kept their body, want 3", kept)
	}
}
