package payments

import "testing"

func TestSeenEventsIsBounded(t *testing.T) {
	t.Parallel()
	s := newSeenEvents(3)
	for i, k := range []string{"a", "b", "c", "d"} {
		s.add("sandbox", k, seenEvent{callbackID: int64(i), hash: k})
	}
	if _, ok := s.get("sandbox", "a"); ok {
		t.Fatal("the oldest entry is still there past the capacity")
	}
	for _, k := range []string{"b", "c", "d"} {
		if e, ok := s.get("sandbox", k); !ok || e.hash != k {
			t.Fatalf("get(%s) = %+v, %v", k, e, ok)
		}
	}
	if _, ok := s.get("other", "d"); ok {
		t.Fatal("keys of another provider share an entry")
	}
	s.add("sandbox", "d", seenEvent{hash: "changed"}) // a second add keeps the first
	if e, _ := s.get("sandbox", "d"); e.hash != "d" || len(s.events.items) != 3 {
		t.Fatalf("re-adding changed the entry (%+v) or the size (%d)", e, len(s.events.items))
	}
}
