package payments

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"io"
	"net/http"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/models"
)

// parsedCapacity bounds the bodies remembered: an event with its
// fingerprint, at most about 1.2 KB each, and a searchable body of at
// most maxRememberedSearchable — 32 MB for all of them at the most.
const parsedCapacity = 10_000

// maxRememberedSearchable is the largest searchable body remembered with
// its event; a larger one is made again for each delivery's row.
const maxRememberedSearchable = 2 << 10

// parsedBodies remembers what recent bodies parsed to: the event with its
// fingerprint, by the provider, the values of the headers its Parse reads
// (EventHeaders) and the body's exact bytes. A gateway's retries carry
// the same body and the same event id; only the signature and its time
// change, and those are verified on every delivery, before this. Parse
// sees no other header and the fingerprint is a function of the body, so
// a delivery seen before need not be decoded, canonicalized and parsed
// again: that was the largest part of a duplicate delivery's cost in the
// server (docs/performance.md). Where bodies are kept, the body's
// searchable form is remembered too: each delivery's row holds it, and
// it is a function of the body alone. Refused and ignored bodies are not
// remembered.
type parsedBodies struct {
	events *recent[[sha256.Size]byte, parsedBody]
}

// parsedBody is what a body parsed to.
type parsedBody struct {
	event Event
	// searchable is SearchableBody of the body, when searched; a body
	// parsed while bodies are not kept, or whose searchable form is
	// larger than maxRememberedSearchable, is remembered without it.
	searchable json.RawMessage
	searched   bool
}

func newParsedBodies(capacity int) *parsedBodies {
	return &parsedBodies{events: newRecent[[sha256.Size]byte, parsedBody](capacity)}
}

// parse returns parseBody(p, h, body), and the body's searchable form
// when searchable is set (bodies are kept), from memory when the same
// provider had the same body and event headers before.
func (c *parsedBodies) parse(p Provider, h http.Header, body []byte, searchable bool) (parsedBody, error) {
	names := p.EventHeaders()
	k := parsedKey(p.Name(), names, h, body)
	if pb, ok := c.events.get(k); ok {
		return pb, nil
	}
	ev, err := parseBody(p, onlyHeaders(h, names), body)
	if err != nil {
		return parsedBody{event: ev}, err
	}
	pb := parsedBody{event: ev}
	if searchable {
		pb.searchable, pb.searched = SearchableBody(body), true
	}
	if len(pb.searchable) > maxRememberedSearchable {
		c.events.add(k, parsedBody{event: ev})
	} else {
		c.events.add(k, pb)
	}
	return pb, nil
}

// parseBody fingerprints body, then has p parse it. The fingerprint is
// the pipeline's, the same for every provider (fingerprintOf): a body two
// JSON parsers could read differently is refused here, before any
// provider reads it.
func parseBody(p Provider, h http.Header, body []byte) (Event, error) {
	fingerprint, err := fingerprintOf(p, body)
	if err != nil {
		return Event{}, models.Errorf(models.EInvalidPayload, "the body is refused: %s", canonjson.Reason(err))
	}
	ev, err := p.Parse(h, body)
	if err != nil {
		return ev, err
	}
	ev.Fingerprint = fingerprint
	return ev, nil
}

// onlyHeaders is the part of h that names lists.
func onlyHeaders(h http.Header, names []string) http.Header {
	only := make(http.Header, len(names))
	for _, name := range names {
		if values := h.Values(name); values != nil {
			only[http.CanonicalHeaderKey(name)] = values
		}
	}
	return only
}

// parsedKey is the SHA-256 of the provider's name, the values of the
// named headers and the body. Each part is written after its length, so
// that no two different inputs write the same bytes.
func parsedKey(provider string, names []string, h http.Header, body []byte) [sha256.Size]byte {
	d := sha256.New()
	writePart(d, provider)
	for _, name := range names {
		values := h.Values(name)
		writeLength(d, len(values))
		for _, v := range values {
			writePart(d, v)
		}
	}
	writeLength(d, len(body))
	d.Write(body)
	var k [sha256.Size]byte
	d.Sum(k[:0])
	return k
}

func writePart(d hash.Hash, s string) {
	writeLength(d, len(s))
	io.WriteString(d, s)
}

func writeLength(d hash.Hash, n int) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	d.Write(b[:])
}
