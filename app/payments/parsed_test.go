package payments

import (
	"bytes"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// TestParsedBodiesRemembersEvents: a remembered event is the one Parse
// and the fingerprint give, per provider, body and event header; headers
// Parse does not read (the signature, its time) do not make a body new;
// the memory is bounded, oldest out first; refused and ignored bodies are
// refused or ignored every time and not remembered.
func TestParsedBodiesRemembersEvents(t *testing.T) {
	t.Parallel()
	c := newParsedBodies(2)
	sandbox := testProvider{}
	body := func(order string) []byte {
		return []byte(`{"order_id":"` + order + `","transaction_id":"tx-1","payment_status":"paid","paid_amount":1000,"currency":"IDR"}`)
	}
	header := func(id, signature string) http.Header {
		h := http.Header{}
		h.Set(stdwebhooks.HeaderID, id)
		h.Set(stdwebhooks.HeaderSignature, signature)
		return h
	}
	want := func(id string, b []byte) Event {
		ev, err := sandbox.Parse(header(id, ""), b)
		if err != nil {
			t.Fatal(err)
		}
		ev.Fingerprint, err = fingerprintOf(sandbox, b)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for _, tc := range []struct {
		id, signature, order string
		remembered           int // after this delivery
	}{
		{"evt-1", "v1,first", "ORD-1", 1},
		{"evt-1", "v1,retry", "ORD-1", 1}, // a retry: only the signature differs
		{"evt-2", "v1,first", "ORD-1", 2}, // another event id, the same body
		{"evt-1", "v1,first", "ORD-2", 2}, // another body, the same event id: the oldest leaves
	} {
		pb, err := c.parse(sandbox, header(tc.id, tc.signature), body(tc.order), false)
		if got, w := pb.event, want(tc.id, body(tc.order)); err != nil || !reflect.DeepEqual(got, w) {
			t.Fatalf("parse(%s, %s) = %+v, %v; want %+v", tc.id, tc.order, got, err, w)
		}
		if len(c.events.items) != tc.remembered {
			t.Fatalf("after %s %s %s: %d remembered, want %d", tc.id, tc.signature, tc.order, len(c.events.items), tc.remembered)
		}
	}
	if len(c.events.order) != 2 {
		t.Fatalf("%d in the eviction order; want the capacity, 2", len(c.events.order))
	}
	if _, ok := c.events.items[parsedKey("sandbox", sandbox.EventHeaders(), header("evt-1", ""), body("ORD-1"))]; ok {
		t.Fatal("the oldest body is still remembered past the capacity")
	}

	// Two providers may read the same bytes differently (one may leave
	// its delivery fields out of the fingerprint): bodies are remembered
	// per provider.
	same := []byte(`{"id":"evt_1","pending_webhooks":2}`)
	if parsedKey("sandbox", nil, nil, same) == parsedKey("acmepay", nil, nil, same) {
		t.Fatal("two providers share a key for the same bytes")
	}

	for _, tc := range []struct {
		name string
		body string
		ok   func(error) bool
	}{
		{"ambiguous", `{"a":1,"a":2}`, func(err error) bool { return models.ErrorCode(err) == models.EInvalidPayload }},
		{"missing field", `{"order_id":"ORD-1"}`, func(err error) bool { return models.ErrorCode(err) == models.EMissingField }},
	} {
		for range 2 {
			if _, err := c.parse(sandbox, header("evt-x", ""), []byte(tc.body), false); !tc.ok(err) {
				t.Fatalf("%s: err = %v", tc.name, err)
			}
		}
	}
	for range 2 {
		if _, err := c.parse(sandbox, header("evt-void", ""), []byte(`{"payment_status":"void"}`), false); !errors.Is(err, ErrIgnored) {
			t.Fatalf("an ignored notification: err = %v", err)
		}
	}
	if len(c.events.items) != 2 {
		t.Fatalf("%d remembered after refused and ignored bodies", len(c.events.items))
	}
}

// Where bodies are kept, a body's searchable form is remembered with its
// event, and a retry's row takes it from memory; one larger than
// maxRememberedSearchable is remembered without it, and made again.
func TestParsedBodiesRememberSearchable(t *testing.T) {
	t.Parallel()
	sandbox := testProvider{}
	c := newParsedBodies(10)
	h := http.Header{}
	h.Set(stdwebhooks.HeaderID, "evt-1")
	small := []byte(`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":1000,"currency":"IDR"}`)
	large := []byte(`{"order_id":"ORD-2","transaction_id":"tx-2","payment_status":"paid","paid_amount":1000,"currency":"IDR","note":"` +
		strings.Repeat("n", maxRememberedSearchable) + `"}`)
	for _, tc := range []struct {
		body       []byte
		remembered bool
	}{{small, true}, {large, false}} {
		first, err := c.parse(sandbox, h, tc.body, true)
		if err != nil || !first.searched || !bytes.Equal(first.searchable, SearchableBody(tc.body)) {
			t.Fatalf("first parse: searchable %s (searched %t), %v", first.searchable, first.searched, err)
		}
		retry, err := c.parse(sandbox, h, tc.body, true)
		if err != nil || retry.searched != tc.remembered {
			t.Fatalf("a retry of a %d-byte body: searched %t, %v; want %t", len(tc.body), retry.searched, err, tc.remembered)
		}
		if tc.remembered && !bytes.Equal(retry.searchable, first.searchable) {
			t.Fatalf("a retry's searchable body %s, want %s", retry.searchable, first.searchable)
		}
	}
	notKept := []byte(`{"order_id":"ORD-3","transaction_id":"tx-3","payment_status":"paid","paid_amount":1000,"currency":"IDR"}`)
	if pb, err := c.parse(sandbox, h, notKept, false); err != nil || pb.searched || pb.searchable != nil {
		t.Fatalf("bodies not kept: searchable %s (searched %t), %v", pb.searchable, pb.searched, err)
	}
}

// TestParsedKeyParts: moving bytes from one header value to the next, or
// between the headers and the body, gives another key.
func TestParsedKeyParts(t *testing.T) {
	t.Parallel()
	names := []string{"A", "B"}
	keys := map[[32]byte]string{}
	for name, in := range map[string]struct {
		h    http.Header
		body string
	}{
		"a=xy":         {http.Header{"A": {"xy"}}, "{}"},
		"a=x b=y":      {http.Header{"A": {"x"}, "B": {"y"}}, "{}"},
		"a=x,y":        {http.Header{"A": {"x", "y"}}, "{}"},
		"b=xy":         {http.Header{"B": {"xy"}}, "{}"},
		"a=x body y{}": {http.Header{"A": {"x"}}, "y{}"},
	} {
		k := parsedKey("p", names, in.h, []byte(in.body))
		if other, ok := keys[k]; ok {
			t.Fatalf("%s and %s have one key", name, other)
		}
		keys[k] = name
	}
}

// TestParseSeesOnlyEventHeaders: the pipeline hands Parse the headers
// its provider names, and no other, so an event cannot depend on a
// header the memory does not key on.
func TestParseSeesOnlyEventHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Add(stdwebhooks.HeaderID, "evt-1")
	h.Add(stdwebhooks.HeaderID, "evt-2")
	h.Set(stdwebhooks.HeaderSignature, "v1,x")
	h.Set("X-Other", "y")
	p := &headerRecorder{}
	body := []byte(`{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":1000,"currency":"IDR"}`)
	if _, err := newParsedBodies(2).parse(p, h, body, false); err != nil {
		t.Fatal(err)
	}
	if len(p.got) != 1 || len(p.got.Values(stdwebhooks.HeaderID)) != 2 {
		t.Fatalf("Parse was given %v; want the two webhook-id values alone", p.got)
	}
}

// headerRecorder is the test provider, remembering the headers Parse was
// given.
type headerRecorder struct {
	testProvider
	got http.Header
}

func (r *headerRecorder) Parse(h http.Header, body []byte) (Event, error) {
	r.got = h
	return r.testProvider.Parse(h, body)
}

// BenchmarkParsedBodies compares a retry's parse from memory with the
// decode, canonicalization and Parse it spares, on a sandbox delivery.
func BenchmarkParsedBodies(b *testing.B) {
	sandbox := testProvider{}
	body := []byte(`{"order_id":"ORD-01JBENCH0000000000000000000","transaction_id":"tx-bench","payment_status":"paid","paid_amount":150000,"currency":"IDR"}`)
	h := http.Header{}
	h.Set(stdwebhooks.HeaderID, "evt-bench")
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseBody(sandbox, onlyHeaders(h, sandbox.EventHeaders()), body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		c := newParsedBodies(parsedCapacity)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.parse(sandbox, h, body, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
