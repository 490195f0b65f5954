package gatewaycalls_test

import (
	"testing"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
)

// A schedule's waits come one per ask, the last one again once they run
// out; its end is its last laid-out ask and the grace; a gateway with
// none gets the default.
func TestSchedule(t *testing.T) {
	t.Parallel()
	m, h := time.Minute, time.Hour
	s := gatewaycalls.Schedule{5 * m, 30 * m, 24 * h}
	for _, tt := range []struct {
		asks int
		want time.Duration
	}{
		{0, 5 * m}, // not asked yet: as after the first
		{1, 5 * m},
		{2, 30 * m},
		{3, 24 * h},
		{4, 24 * h}, // run out: the last wait again, until final
		{100, 24 * h},
	} {
		if got := s.Wait(tt.asks); got != tt.want {
			t.Errorf("Wait(%d) = %v, want %v", tt.asks, got, tt.want)
		}
	}
	if got, want := s.End(), gatewaycalls.FirstAsk+5*m+30*m+24*h+gatewaycalls.EndGrace; got != want {
		t.Errorf("End() = %v, want %v", got, want)
	}
	if got, want := s.String(), "1m, 5m, 30m, then every 1d"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	all := gatewaycalls.Schedules{"fast": {m}}
	if got := all.Of("fast").Wait(3); got != m {
		t.Errorf("the fast gateway's wait: %v", got)
	}
	if got, want := all.Of("gone").End(), gatewaycalls.DefaultSchedule.End(); got != want {
		t.Errorf("a gateway without a schedule ends at %v, want the default's %v", got, want)
	}
	var none gatewaycalls.Schedule
	if none.Wait(1) != gatewaycalls.DefaultSchedule.Wait(1) || none.End() != gatewaycalls.DefaultSchedule.End() {
		t.Error("an empty schedule is not the default")
	}
}
