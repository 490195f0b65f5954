package payments

import "sync"

// seenCapacity bounds the processed-events cache (about 100 bytes each).
const seenCapacity = 100_000

// seenEvents remembers events that are processed, so a repeated delivery
// is answered — duplicate, or conflict when its fingerprint differs —
// without touching the database. That is safe because processed is
// terminal: once committed, a processed callback row never changes its
// hash or its status. Only committed processed rows go in; rejected
// events are not terminal and are always evaluated again. The cache is
// per process and bounded: the oldest entry leaves first, and a miss
// falls back to the database.
type seenEvents struct {
	mu    sync.Mutex
	items map[string]seenEvent
	ring  []string // insertion order, for eviction
	next  int
}

type seenEvent struct {
	callbackID int64
	hash       string
}

func newSeenEvents(capacity int) *seenEvents {
	return &seenEvents{items: make(map[string]seenEvent, capacity), ring: make([]string, capacity)}
}

func seenKey(provider, key string) string { return provider + "\x00" + key }

func (s *seenEvents) get(provider, key string) (seenEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[seenKey(provider, key)]
	return e, ok
}

func (s *seenEvents) add(provider, key string, e seenEvent) {
	k := seenKey(provider, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.items[k]; ok {
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.items, old)
	}
	s.ring[s.next] = k
	s.next = (s.next + 1) % len(s.ring)
	s.items[k] = e
}
