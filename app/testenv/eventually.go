package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, and fails the test if
// it still does not by the test's budget (Budget). Tests wait for a
// condition this way, never for a fixed time: a background write, a job,
// a delivery row. A machine busy with other work makes the wait longer,
// not the test red.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	budget := Budget(tb)
	deadline := time.Now().Add(budget)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up waiting after %s (the test's budget) until %s", budget.Round(time.Second), what)
		}
		<-tick.C
	}
}

// Budget is how long a test may still wait for something: the time left
// before its deadline (go test -timeout), less a margin so that it fails
// with its own message rather than the timeout's panic; ten minutes when
// it has no deadline (a benchmark).
func Budget(tb testing.TB) time.Duration {
	t, ok := tb.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return 10 * time.Minute
	}
	d, ok := t.Deadline()
	if !ok {
		return 10 * time.Minute
	}
	left := time.Until(d)
	return max(left-min(30*time.Second, left/2), time.Second)
}
