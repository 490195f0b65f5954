package gatewaycalls

import (
	"fmt"
	"strings"
	"time"
)

// A call's outcome can stay unknown: its answer was lost (a timeout, a
// 5xx, a crash) and nobody repeated it — the refund's job gave up, the
// customer never pressed Pay again — or the gateway accepted a refund
// and has not settled it (pending), and its notification never came.
// The janitor (app/janitor) asks the gateway about each such call again
// on a schedule, until the gateway says final, as Kill Bill's Janitor
// does with its payment transactions in state UNKNOWN or PENDING.

// FirstAsk is how long after a call is sent the janitor first asks
// about it, should it still be unknown then: by then its lease (twice
// the call's time-out) has long passed, and the call's own repeats (the
// refund's job, the customer's next press) have had their chance. It is
// the same for every gateway: it is about Sekali's call, not the
// gateway.
const FirstAsk = time.Minute

// Schedule is a gateway's waits between asks about one unknown outcome:
// after the first ask (FirstAsk after the call), the janitor waits
// Schedule[0], asks again, waits Schedule[1], …; after the last wait it
// keeps asking at that wait until the gateway says final. Each gateway's
// package states its own, and why (its idempotency keys' lifetime, how
// long it keeps a refund pending, how long it retries its
// notifications); the registry (app/gateways) lists them.
type Schedule []time.Duration

// DefaultSchedule is the schedule of a gateway that states none: a
// provider whose rows remain after its package was removed.
var DefaultSchedule = Schedule{5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// EndGrace is how long past its last scheduled ask an outcome may still
// be unknown before the audit reports it: the janitor runs every minute
// and asks a bounded number of calls per run, so a due ask may wait a
// little.
const EndGrace = 15 * time.Minute

// Wait is how long the janitor waits after its asks-th ask (1 for the
// first) before it asks again: the schedule's wait for that ask, or its
// last once it has run out.
func (s Schedule) Wait(asks int) time.Duration {
	s = s.orDefault()
	return s[min(max(asks, 1), len(s))-1]
}

// End is how long an outcome may stay unknown before the audit reports
// it: until the schedule's last laid-out ask, and EndGrace more. An
// outcome still unknown then is not left alone — the janitor goes on
// asking at the last wait — but no one will tell Sekali of it any more
// (each gateway's schedule outlasts its own notification retries), so a
// person must look.
func (s Schedule) End() time.Duration {
	end := FirstAsk + EndGrace
	for _, w := range s.orDefault() {
		end += w
	}
	return end
}

// String is the schedule as the docs write it: "1m, 5m, 30m, then every 24h".
func (s Schedule) String() string {
	s = s.orDefault()
	parts := []string{short(FirstAsk)}
	for _, w := range s[:len(s)-1] {
		parts = append(parts, short(w))
	}
	return strings.Join(parts, ", ") + ", then every " + short(s[len(s)-1])
}

// short writes d as the docs do: 90s, 5m, 2h, 1d12h.
func short(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d > 24*time.Hour:
		return fmt.Sprintf("%dd%s", d/(24*time.Hour), short(d%(24*time.Hour)))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// orDefault is s, or DefaultSchedule when s is empty.
func (s Schedule) orDefault() Schedule {
	if len(s) == 0 {
		return DefaultSchedule
	}
	return s
}

// Schedules are the gateways' schedules, by provider.
type Schedules map[string]Schedule

// Of is provider's schedule, or DefaultSchedule.
func (s Schedules) Of(provider string) Schedule {
	return s[provider].orDefault()
}
