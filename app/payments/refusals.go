package payments

import (
	"sync"
	"time"
)

// Whoever can reach /callbacks can send bodies with bad signatures, and
// each refusal used to be a callback_deliveries row: about 1.4 GB an hour
// from one unsigned sender. The rows of refused deliveries are now
// rationed: at most refusedPerAddress a minute from one client address,
// and refusedPerMinute from everyone. What is over the budget is still
// answered, logged at warn and counted — in sekali_callbacks_total by its
// result, and in sekali_callback_refused_rows_skipped_total — but not
// written. A gateway's genuine deliveries are never refused, so the
// budget never costs a row that records a fact.
const (
	refusedPerAddress = 60
	refusedPerMinute  = 6000
	// refusedAddresses bounds the addresses counted in one minute; past
	// it only the total counts.
	refusedAddresses = 10_000
)

// refusalBudget counts the refused rows written in the current minute.
type refusalBudget struct {
	mu     sync.Mutex
	minute time.Time
	total  int
	byAddr map[string]int
}

func newRefusalBudget() *refusalBudget { return &refusalBudget{byAddr: map[string]int{}} }

// allow reports whether one more refused row from addr may be written at
// now, and counts it if so.
func (b *refusalBudget) allow(addr string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := now.Truncate(time.Minute); !m.Equal(b.minute) {
		b.minute, b.total = m, 0
		clear(b.byAddr)
	}
	n, known := b.byAddr[addr]
	if b.total >= refusedPerMinute || n >= refusedPerAddress || (!known && len(b.byAddr) >= refusedAddresses) {
		return false
	}
	b.byAddr[addr] = n + 1
	b.total++
	return true
}
