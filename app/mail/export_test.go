package mail

import "time"

const (
	MaxIdleSessions = maxIdleSessions
	IdleSessionFor  = idleSessionFor
)

// SetClock replaces the clock s reads its sessions' idle times from.
func SetClock(s *SMTP, now func() time.Time) { s.now = now }
