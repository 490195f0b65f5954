package payments

import "testing"

// TestFingerprintsRemembersBytes: a remembered fingerprint is the one
// fingerprintOf computes, per provider; the memory is bounded, oldest out
// first; a refused body is refused every time and not remembered.
func TestFingerprintsRemembersBytes(t *testing.T) {
	t.Parallel()
	f := newFingerprints(2)
	sandbox, stripe := NewSandbox(nil), Provider(&Stripe{})
	bodies := []string{`{"b":1,"a":2}`, `{"a":2, "b":1}`, `{"c":3}`}
	for _, b := range bodies {
		for range 2 {
			got, err := f.of(sandbox, []byte(b))
			want, _ := fingerprintOf(sandbox, []byte(b))
			if err != nil || got != want {
				t.Fatalf("of(%s) = %q, %v; want %q", b, got, err, want)
			}
		}
	}
	if len(f.items) != 2 || len(f.ring) != 2 {
		t.Fatalf("%d remembered, %d in the ring; want the capacity, 2", len(f.items), len(f.ring))
	}
	if _, ok := f.items[bodyKey(sandbox, []byte(bodies[0]))]; ok {
		t.Fatal("the oldest body is still remembered past the capacity")
	}
	// Stripe leaves its delivery fields out of the fingerprint: the same
	// bytes are remembered per provider.
	body := `{"id":"evt_1","pending_webhooks":2}`
	s, _ := f.of(sandbox, []byte(body))
	p, _ := f.of(stripe, []byte(body))
	if s == p {
		t.Fatal("two providers share a remembered fingerprint for bytes they read differently")
	}
	for range 2 {
		if _, err := f.of(sandbox, []byte(`{"a":1,"a":2}`)); err == nil {
			t.Fatal("a refused body was accepted")
		}
	}
	if len(f.items) != 2 {
		t.Fatalf("%d remembered after a refused body", len(f.items))
	}
}
