package midtrans

// Emulated are the settings that point Midtrans's parts at the sandbox
// gateway's emulation of its API and Snap served at base
// (http://host:port), with a development server key: its pages,
// refunds, status and notifications all work there without an account.
// Tests drive every gateway of the registry alike with it.
func Emulated(base string) map[string]string {
	return map[string]string{
		"MIDTRANS_SERVER_KEY": "SB-Mid-server-EMULATED0123456789",
		"MIDTRANS_API_URL":    base + SandboxAPIPath,
		"MIDTRANS_SNAP_URL":   base + SandboxAPIPath,
	}
}

// RefundNotices is how many notifications Midtrans sends of one refund
// made when asked: its refund notification.
const RefundNotices = 1
