package payments

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"net/http"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/models"
)

// parsedCapacity bounds the bodies remembered (an event with its
// fingerprint: at most about 1.2 KB each).
const parsedCapacity = 10_000

// parsedBodies remembers what recent bodies parsed to: the event with its
// fingerprint, by the provider, the values of the headers its Parse reads
// (EventHeaders) and the body's exact bytes. A gateway's retries carry
// the same body and the same event id; only the signature and its time
// change, and those are verified on every delivery, before this. Parse
// sees no other header and the fingerprint is a function of the body, so
// a delivery seen before need not be decoded, canonicalized and parsed
// again: that was the largest part of a duplicate delivery's cost in the
// server (docs/performance.md). Refused and ignored bodies are not
// remembered.
type parsedBodies struct {
	events *recent[[sha256.Size]byte, Event]
}

func newParsedBodies(capacity int) *parsedBodies {
	return &parsedBodies{events: newRecent[[sha256.Size]byte, Event](capacity)}
}

// parse returns parseBody(p, h, body), from memory when the same provider
// had the same body and event headers before.
func (c *parsedBodies) parse(p Provider, h http.Header, body []byte) (Event, error) {
	names := p.EventHeaders()
	k := parsedKey(p.Name(), names, h, body)
	if ev, ok := c.events.get(k); ok {
		return ev, nil
	}
	ev, err := parseBody(p, onlyHeaders(h, names), body)
	if err != nil {
		return ev, err
	}
	c.events.add(k, ev)
	return ev, nil
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
