package payments

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
	events *recent[string, seenEvent]
}

type seenEvent struct {
	callbackID int64
	hash       string
}

func newSeenEvents(capacity int) *seenEvents {
	return &seenEvents{events: newRecent[string, seenEvent](capacity)}
}

func seenKey(provider, key string) string { return provider + "\x00" + key }

func (s *seenEvents) get(provider, key string) (seenEvent, bool) {
	return s.events.get(seenKey(provider, key))
}

func (s *seenEvents) add(provider, key string, e seenEvent) {
	s.events.add(seenKey(provider, key), e)
}
