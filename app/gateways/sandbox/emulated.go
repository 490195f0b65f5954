package sandbox

// Emulated are the sandbox's settings for a server whose sandbox
// gateway is served at base: none, since the sandbox gateway is its own
// API and signs with the development secret by default. It is here so
// that tests drive every gateway of the registry alike.
func Emulated(string) map[string]string { return map[string]string{} }

// RefundNotices is how many notifications the sandbox gateway sends of
// one refund made when asked.
const RefundNotices = 1
