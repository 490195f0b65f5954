package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, and fails the test if
// it still does not after timeout. Tests wait for a condition this way,
// never for a fixed time: a background write, a job, a delivery row.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up waiting after %s until %s", timeout, what)
		}
		<-tick.C
	}
}
