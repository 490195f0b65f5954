package payments

import (
	"crypto/sha256"
	"sync"
)

// fingerprintCapacity bounds the fingerprints remembered (about 200
// bytes each).
const fingerprintCapacity = 10_000

// fingerprints remembers the fingerprint of recent bodies by their exact
// bytes. A gateway's retries carry the same bytes, and the fingerprint is
// a function of the provider and the bytes alone, so a body seen before
// need not be decoded and canonicalized again: that was the largest part
// of a duplicate delivery's cost in the server (docs/performance.md).
// Bodies that were refused are not remembered.
type fingerprints struct {
	mu    sync.Mutex
	items map[[sha256.Size]byte]string
	ring  [][sha256.Size]byte // insertion order, for eviction
	next  int
}

func newFingerprints(capacity int) *fingerprints {
	return &fingerprints{items: make(map[[sha256.Size]byte]string, capacity), ring: make([][sha256.Size]byte, 0, capacity)}
}

// of returns p's fingerprint of body (fingerprintOf), from memory when
// the same provider had the same bytes before.
func (f *fingerprints) of(p Provider, body []byte) (string, error) {
	k := bodyKey(p, body)
	f.mu.Lock()
	fp, ok := f.items[k]
	f.mu.Unlock()
	if ok {
		return fp, nil
	}
	fp, err := fingerprintOf(p, body)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.items[k]; ok {
		return fp, nil
	}
	if len(f.ring) < cap(f.ring) {
		f.ring = append(f.ring, k)
	} else {
		delete(f.items, f.ring[f.next])
		f.ring[f.next] = k
		f.next = (f.next + 1) % len(f.ring)
	}
	f.items[k] = fp
	return fp, nil
}

// bodyKey is the SHA-256 of the provider's name and the body's bytes.
func bodyKey(p Provider, body []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(p.Name()))
	h.Write([]byte{0})
	h.Write(body)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}
