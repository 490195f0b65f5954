package payments

import "sync"

// recent is a map bounded to a capacity: once full, each new entry
// pushes out the oldest. It is safe for concurrent use. The pipeline's
// memories are recent maps: seenEvents, parsedBodies and the kinds of
// header names (kept.go).
type recent[K comparable, V any] struct {
	mu    sync.Mutex
	items map[K]V
	order []K // insertion order, for eviction
	next  int // once full, the index of the oldest entry
}

func newRecent[K comparable, V any](capacity int) *recent[K, V] {
	return &recent[K, V]{items: make(map[K]V, capacity), order: make([]K, 0, capacity)}
}

func (r *recent[K, V]) get(k K) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.items[k]
	return v, ok
}

// add remembers v under k; an entry already under k is kept as it is.
func (r *recent[K, V]) add(k K, v V) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.items[k]; ok {
		return
	}
	if len(r.order) < cap(r.order) {
		r.order = append(r.order, k)
	} else {
		delete(r.items, r.order[r.next])
		r.order[r.next] = k
		r.next = (r.next + 1) % len(r.order)
	}
	r.items[k] = v
}
