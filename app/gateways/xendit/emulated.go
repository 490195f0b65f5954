package xendit

// Emulated are the settings that point Xendit's parts at the sandbox
// gateway's emulation of its API served at base (http://host:port),
// with development secrets: its invoices, refunds, status and callbacks
// all work there without an account. Tests drive every gateway of the
// registry alike with it.
func Emulated(base string) map[string]string {
	return map[string]string{
		"XENDIT_SECRET_KEY":     "xnd_development_sekali_emulated",
		"XENDIT_API_URL":        base + EmulatorPath,
		"XENDIT_CALLBACK_TOKEN": "xnd-callback-token-emulated-0123",
	}
}

// RefundNotices is how many callbacks Xendit sends of one refund made
// when asked: refund.succeeded.
const RefundNotices = 1
