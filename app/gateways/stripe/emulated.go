package stripe

// Emulated are the settings that point Stripe's parts at the sandbox
// gateway's emulation of its API served at base (http://host:port),
// with development secrets: its pages, refunds, status and
// notifications all work there without an account. Tests drive every
// gateway of the registry alike with it.
func Emulated(base string) map[string]string {
	return map[string]string{
		"STRIPE_SECRET_KEY":     "sk_test_sekali_emulated",
		"STRIPE_API_URL":        base + EmulatorPath,
		"STRIPE_WEBHOOK_SECRET": "whsec_sekali_emulated_0123456789",
	}
}

// RefundNotices is how many notifications Stripe sends of one refund
// made when asked: refund.updated and charge.refunded.
const RefundNotices = 2
