package sandboxgw

import (
	"context"
	"fmt"
	"sync"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/outbound"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// The sandbox refunds its own charges (outbound.Refunder for provider
// sandbox) in-process, as a gateway would over its API: the refund is
// made at once, a refund_id asked for twice is the same refund (the
// first answer again), and the gateway then tells Sekali with a signed
// refund notification (refund_id = the key) — so the answer and the
// notification both reach Sekali, in either order. The fault switches
// apply as to the emulated APIs: FailNext fails before acting,
// TimeOutAfterActing refunds and then answers only when the caller gives
// up.

// sandboxRefunds are the refunds made, by refund_id.
type sandboxRefunds struct {
	mu    sync.Mutex
	once  sync.Once
	byKey *kept[outbound.Refunded]
}

func (s *sandboxRefunds) init() {
	s.once.Do(func() { s.byKey = newKept[outbound.Refunded](keptMidtrans) })
}

// Refund implements outbound.Refunder for the sandbox's charges.
func (g *Gateway) Refund(ctx context.Context, r outbound.RefundRequest) (outbound.Refunded, error) {
	fail, hang := g.faults.take()
	if fail {
		return outbound.Refunded{}, fmt.Errorf("sandbox gateway: 500 internal error")
	}
	if r.Key == "" || r.Amount < 1 {
		return outbound.Refunded{}, &outbound.Refused{Status: 400, Message: "refund_id and a positive amount are required"}
	}
	s := &g.refunds
	s.init()
	s.mu.Lock()
	a, seen := s.byKey.get(r.Key)
	if !seen {
		a = outbound.Refunded{ObjectID: newID("sbx-rf-"), RefundKey: r.Key, Amount: r.Amount}
		s.byKey.put(r.Key, a)
	}
	s.mu.Unlock()
	if !seen {
		ev := event{format: sandbox.Name, fact: payments.Fact{EventID: newID("evt_sbx_"), OrderID: r.OrderID,
			TransactionID: r.Charge, Status: models.EventRefunded, Amount: r.Amount, Currency: r.Currency, RefundID: r.Key}}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.deliver(r.OrderID, ev, "refund asked by Sekali")
		}()
	}
	if hang {
		g.faults.hold(1)
		<-ctx.Done() // the caller gave up
		g.faults.hold(-1)
		return outbound.Refunded{}, fmt.Errorf("sandbox gateway: no answer: %w", ctx.Err())
	}
	return a, nil
}
