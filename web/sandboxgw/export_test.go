package sandboxgw

// HoldStripeBeginning makes each Stripe request under a new idempotency
// key call hold as it begins, before it acts: a test keeps one in
// progress so.
func (g *Gateway) HoldStripeBeginning(hold func()) {
	g.stripe.mu.Lock()
	g.stripe.beginning = hold
	g.stripe.mu.Unlock()
}
