package payments

import (
	"sync"
	"time"
)

// Whoever can reach /callbacks can send bodies with bad signatures, and
// a callback_deliveries row for each refusal would be about 1.4 GB an
// hour from one unsigned sender. The rows of refused deliveries are
// rationed: at most refusedPerClient a minute from one client (an IPv4
// address, or an IPv6 network of CLIENT_IPV6_PREFIX bits: a sender with a
// /64 has 2^64 addresses to rotate through), and refusedPerMinute from
// everyone; the rows keep each delivery's own address. What is over the
// budget is still answered, logged at warn and counted — in
// sekali_callbacks_total by its result, and in
// sekali_callback_refused_rows_skipped_total — but not written. A gateway's genuine deliveries are never refused, so the
// budget never costs a row that records a fact.
const (
	refusedPerClient = 60
	refusedPerMinute = 6000
	// refusedClients bounds the clients counted in one minute; past it
	// only the total counts.
	refusedClients = 10_000
)

// refusalBudget counts the refused rows written in the current minute.
type refusalBudget struct {
	mu       sync.Mutex
	minute   time.Time
	total    int
	byClient map[string]int
}

func newRefusalBudget() *refusalBudget { return &refusalBudget{byClient: map[string]int{}} }

// allow reports whether one more refused row from client may be written
// at now, and counts it if so.
func (b *refusalBudget) allow(client string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := now.Truncate(time.Minute); !m.Equal(b.minute) {
		b.minute, b.total = m, 0
		clear(b.byClient)
	}
	n, known := b.byClient[client]
	if b.total >= refusedPerMinute || n >= refusedPerClient || (!known && len(b.byClient) >= refusedClients) {
		return false
	}
	b.byClient[client] = n + 1
	b.total++
	return true
}
