package sandboxgw

import "github.com/sekali/sekali/app/payments"

// HoldStripeBeginning makes each Stripe request under a new idempotency
// key call hold as it begins, before it acts: a test keeps one in
// progress so.
func (g *Gateway) HoldStripeBeginning(hold func()) {
	g.stripe.mu.Lock()
	g.stripe.beginning = hold
	g.stripe.mu.Unlock()
}

// Reported makes the gateway know payment f as though it had reported
// it in format's notification (without sending it): the charge its
// emulated Stripe and Xendit APIs then refund.
func (g *Gateway) Reported(format string, f payments.Fact) {
	g.learn(event{format: format, fact: f})
}

// MidtransRefunded is the amount the Midtrans emulation has refunded of
// transaction tx.
func (g *Gateway) MidtransRefunded(tx string) int64 {
	m := &g.midtransAPI
	m.mu.Lock()
	defer m.mu.Unlock()
	refunds, _ := m.refunded.get(tx)
	var n int64
	for _, r := range refunds {
		n += r.Amount
	}
	return n
}
