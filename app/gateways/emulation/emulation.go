// Package emulation holds what the gateways' emulations of their APIs
// (app/gateways/{name}/emulator.go, served by the sandbox gateway in
// development and QA) share: bounded memory, ids, and how an answer is
// written.
package emulation

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Kept is a map that keeps at most max entries: putting one more evicts
// the oldest. Not safe for concurrent use (an emulation's state holds its
// own lock).
type Kept[V any] struct {
	max   int
	m     map[string]keptEntry[V]
	order []keptKey // oldest first; an entry deleted or replaced leaves a stale key, skipped by its seq
	seq   uint64
}

type keptEntry[V any] struct {
	v   V
	seq uint64
}

type keptKey struct {
	key string
	seq uint64
}

// NewKept returns an empty map of at most max entries.
func NewKept[V any](max int) *Kept[V] {
	return &Kept[V]{max: max, m: map[string]keptEntry[V]{}}
}

// Get returns the value of key.
func (k *Kept[V]) Get(key string) (V, bool) {
	e, ok := k.m[key]
	return e.v, ok
}

// Put sets key's value, evicting the oldest entry beyond max.
func (k *Kept[V]) Put(key string, v V) {
	k.seq++
	k.m[key] = keptEntry[V]{v: v, seq: k.seq}
	k.order = append(k.order, keptKey{key, k.seq})
	for len(k.m) > k.max {
		old := k.order[0]
		k.order = k.order[1:]
		if e, ok := k.m[old.key]; ok && e.seq == old.seq {
			delete(k.m, old.key)
		}
	}
	if len(k.order) > 2*len(k.m)+64 { // mostly stale keys: drop them
		k.order = slices.DeleteFunc(k.order, func(o keptKey) bool { return k.m[o.key].seq != o.seq })
	}
}

// Delete forgets key.
func (k *Kept[V]) Delete(key string) { delete(k.m, key) }

// Newest calls yield with the entries, newest first, until it returns
// false.
func (k *Kept[V]) Newest(yield func(key string, v V) bool) {
	for i := len(k.order) - 1; i >= 0; i-- {
		ok := k.order[i]
		if e, live := k.m[ok.key]; live && e.seq == ok.seq && !yield(ok.key, e.v) {
			return
		}
	}
}

// NewID is prefix and 12 random hex digits.
func NewID(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// NewUUID is a random (version 4) UUID.
func NewUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := fmt.Sprintf("%x", b)
	return strings.Join([]string{h[0:8], h[8:12], h[12:16], h[16:20], h[20:32]}, "-")
}

// Answer is what an emulated API call answers: a JSON body.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON is the answer of v with status.
func JSON(status int, v any) Answer {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and structs of strings and numbers
	}
	return Answer{Status: status, Header: http.Header{}, Body: b}
}

// Write sends a.
func (a Answer) Write(w http.ResponseWriter) {
	for k, vs := range a.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	w.Write(a.Body)
}
