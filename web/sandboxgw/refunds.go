package sandboxgw

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// The sandbox refunds its own charges (gatewaycalls.Refunder for provider
// sandbox) in-process, as a gateway would over its API: the refund is
// made at once, a refund_id asked for twice is the same refund (the
// first answer again), and the gateway then tells Sekali with a signed
// refund notification (refund_id = the key) — so the answer and the
// notification both reach Sekali, in either order. The fault switches
// apply as to the emulated APIs: FailNext fails before acting,
// TimeOutAfterActing refunds and then answers only when the caller gives
// up, and MisstateNext makes an answer state another amount or currency.

// keptRefunds bounds the refunds the sandbox remembers: the oldest go
// first.
const keptRefunds = 10_000

// sandboxRefunds are the refunds made, by refund_id.
type sandboxRefunds struct {
	mu    sync.Mutex
	once  sync.Once
	byKey *emulation.Kept[gatewaycalls.Refunded]
}

func (s *sandboxRefunds) init() {
	s.once.Do(func() { s.byKey = emulation.NewKept[gatewaycalls.Refunded](keptRefunds) })
}

// Refund implements gatewaycalls.Refunder for the sandbox's charges.
func (g *Sandbox) Refund(ctx context.Context, r gatewaycalls.RefundRequest) (gatewaycalls.Refunded, error) {
	fail, hang := g.faults.Take()
	if fail {
		return gatewaycalls.Refunded{}, fmt.Errorf("sandbox gateway: 500 internal error")
	}
	if r.Key == "" || r.Amount < 1 {
		return gatewaycalls.Refunded{}, &gatewaycalls.Refused{Status: 400, Message: "refund_id and a positive amount are required"}
	}
	s := &g.refunds
	s.init()
	s.mu.Lock()
	a, seen := s.byKey.Get(r.Key)
	if !seen {
		a = gatewaycalls.Refunded{ObjectID: emulation.NewID("sbx-rf-"), RefundKey: r.Key, Amount: r.Amount, Currency: r.Currency}
		s.byKey.Put(r.Key, a)
	}
	s.mu.Unlock()
	if !seen {
		g.notify("refund asked by Sekali", event{format: sandbox.Name, fact: payments.Fact{EventID: emulation.NewID("evt_sbx_"), OrderID: r.OrderID,
			TransactionID: r.Charge, Status: models.EventRefunded, Amount: r.Amount, Currency: r.Currency, RefundID: r.Key}})
	}
	if hang {
		g.faults.Hold(ctx) // until the caller gives up
		return gatewaycalls.Refunded{}, fmt.Errorf("sandbox gateway: no answer: %w", ctx.Err())
	}
	if by, currency, ok := g.Misstated(); ok { // the answer only: what was made and told stays what was asked
		a.Amount, a.Currency = a.Amount+by, cmp.Or(currency, a.Currency)
	}
	return a, nil
}
