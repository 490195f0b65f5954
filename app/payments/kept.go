package payments

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/models"
)

// A delivery's body and headers are kept on its row for the console
// (docs/admin.md#kept-deliveries) when Service.KeepBodies is set:
// the body as received — at most MaxBodyBytes, since a larger one is
// refused unread — and the headers with their secrets redacted. What a
// row holds is bounded, and so is what the delivery log may hold in
// memory before writing (maxQueuedBodyBytes).
const (
	maxKeptHeaders     = 64       // headers kept of one delivery, in name order
	maxKeptHeaderValue = 512      // bytes kept of one header value
	maxQueuedBodyBytes = 16 << 20 // bodies and headers queued in the delivery log at once
	shownSignature     = 12       // characters of a signature kept
)

// KeptColumns are the columns of a delivery row that hold its kept body
// and headers: lists leave them out (Omit), since a page of them could be
// megabytes, and read them for one row at a time.
var KeptColumns = []string{"headers", "body", "body_json", "body_hash"}

// keep sets what row keeps of d, unless bodies are not kept: its body,
// the body again as searchable JSON (SearchableBody, remembered with the
// body's parsed event when it was parsed), and its headers once its body
// was read.
func (s *Service) keep(d Delivery, row models.CallbackDelivery) models.CallbackDelivery {
	if !s.KeepBodies {
		return row
	}
	row.Body, row.BodyJSON = d.body, d.searchable
	switch {
	case !d.verified: // anyone can send it: see maxSearchableBytes
		row.BodyJSON = nil
	case !d.searched:
		row.BodyJSON = SearchableBody(d.body)
	}
	if d.body != nil {
		row.Headers = keptHeaders(d.Header)
		row.BodyHash = s.bodyHash(row.Provider, d.Header, d.body)
	}
	return row
}

// keptBodyLabel separates the kept-body key from the other uses of the
// secret it is derived from.
const keptBodyLabel = "sekali kept delivery body v1"

// KeptBodyKey derives the key of kept bodies' hashes from secret (the
// order token secret): set Service.KeptBodyKey to it. Every web process
// derives the same key from the same secret; a new secret makes the
// bodies kept before it ones that are not applied again.
func KeptBodyKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keptBodyLabel))
	return m.Sum(nil)
}

// bodyHash is the HMAC-SHA256, under the kept-body key, of what a kept
// delivery's event is made of: the values, as kept, of the headers its
// provider's Parse reads (EventHeaders: the event id of a gateway that
// sends it as a header) and the body, each after its length.
func (s *Service) bodyHash(provider string, h http.Header, body []byte) []byte {
	var names []string
	if p, ok := s.providers[provider]; ok {
		names = p.EventHeaders()
	}
	return KeptHash(s.KeptBodyKey, names, h, body)
}

// KeptHash is the hash a kept delivery's row holds (body_hash): the
// HMAC-SHA256 under key of the values, as kept, of the headers names
// (its provider's EventHeaders) and of body, each after its length. A
// writer of kept rows other than the pipeline (a seed) writes it so.
func KeptHash(key []byte, names []string, h http.Header, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, name := range names {
		values := h.Values(name)
		writeLength(m, len(values))
		for _, v := range values {
			writePart(m, kindOf(http.CanonicalHeaderKey(name)).redact(v))
		}
	}
	writeLength(m, len(body))
	m.Write(body)
	return m.Sum(nil)
}

// keptUnchanged reports whether delivery d, read from its row, carries
// the event headers and body that were kept: their hash, recomputed,
// matches the one written with them.
func (s *Service) keptUnchanged(row models.CallbackDelivery, d Delivery) bool {
	return row.BodyHash != nil && hmac.Equal(row.BodyHash, s.bodyHash(row.Provider, d.Header, row.Body))
}

// maxSearchableBytes bounds a body searchable as jsonb. A search by path
// = value whose value many bodies hold reads the newest rows until a page
// is full, decompressing and searching each row's jsonb; 1,000 rows of a
// 64 KiB object of 4,500 keys, newer than the bodies that match, took a
// search of 1,239 rows from 2 ms to hundreds. A gateway's notification is
// a few KiB. For the same reason only a body whose signature passed is
// searchable: whoever can reach the endpoint can have 60 refused rows a
// minute kept (refusals.go), but not searchable.
const maxSearchableBytes = 16 << 10

// Bounds of a number that a body searchable as jsonb may hold: PostgreSQL's
// numeric refuses an exponent far out of range, and a row whose jsonb
// fails would fail its whole batch.
const (
	maxSearchableExponent = 1000
	maxSearchableFraction = 1000 // digits after the point
)

// SearchableBody is body as its row's body_json keeps it, for the search
// by path = value (docs/admin.md#search), with its secrets redacted as
// RedactedBody shows them (a search is no oracle of a signature): a JSON
// object of at most maxSearchableBytes, at most MaxBodyDepth deep, decoded and
// encoded again so that what Go's decoder mends (invalid UTF-8, a lone
// surrogate) and jsonb would refuse is mended; nil for anything else, and
// for an object jsonb could not hold (a NUL character, a number beyond
// numeric's range) — such a body is kept, but not searchable.
func SearchableBody(body []byte) json.RawMessage {
	if len(body) == 0 || len(body) > maxSearchableBytes || canonjson.Depth(body, MaxBodyDepth) > MaxBodyDepth || !json.Valid(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil || v == nil || !holdable(v) {
		return nil
	}
	redactMembers(v)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// redactMembers redacts, in decoded JSON v, the values of the members
// named as secrets, as RedactedBody does.
func redactMembers(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch kind := nameKind(k); {
			case kind == plainHeader:
				redactMembers(e)
			case kind == signatureHeader && isString(e):
				v[k] = kind.redact(e.(string))
			default:
				v[k] = "[redacted]"
			}
		}
	case []any:
		for _, e := range v {
			redactMembers(e)
		}
	}
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// holdable says whether jsonb can hold decoded JSON v.
func holdable(v any) bool {
	switch v := v.(type) {
	case string:
		return !strings.ContainsRune(v, 0)
	case json.Number:
		mantissa, exp, _ := strings.Cut(strings.ToLower(string(v)), "e")
		_, fraction, _ := strings.Cut(mantissa, ".")
		if len(fraction) > maxSearchableFraction {
			return false
		}
		if exp == "" {
			return true
		}
		n, err := strconv.Atoi(exp)
		return err == nil && n >= -maxSearchableExponent && n <= maxSearchableExponent
	case map[string]any:
		for k, e := range v {
			if !holdable(k) || !holdable(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !holdable(e) {
				return false
			}
		}
	}
	return true
}

// keptHeaders is h as a JSON object of canonical name → values, with the
// values that authenticate a sender redacted: a credential (a name with
// authorization, token, secret, key or cookie in it) is "[redacted]", a
// signature (signature in its name) keeps its first characters, enough
// to tell two apart but not to replay one. Every delivery's row keeps
// them, so the object is written by hand: json.Marshal of a map, with
// its reflection and its own sort, was most of a duplicate's cost here.
func keptHeaders(h http.Header) []byte {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, http.CanonicalHeaderKey(name))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > maxKeptHeaders {
		names = names[:maxKeptHeaders]
	}
	b := append(make([]byte, 0, 512), '{')
	for _, name := range names {
		values := h[name]
		if len(values) == 0 {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(canonjson.AppendString(b, name), ':', '[')
		kind := kindOf(name)
		for i, v := range values {
			if i > 0 {
				b = append(b, ',')
			}
			b = canonjson.AppendString(b, kind.redact(v))
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// headerKind is what a header's name says of its values.
type headerKind int

const (
	plainHeader      headerKind = iota
	signatureHeader             // kept in part
	credentialHeader            // never kept
)

// headerKinds remembers the kind of the header names seen lately: a
// gateway sends the same few names with every delivery, and reading the
// words of each, for every delivery's row, cost more than the lookup.
var headerKinds = newRecent[string, headerKind](1024)

// credentialWords are the words that make a name one of a credential, by
// rule rather than by a list of names: X-Password, X-Auth,
// Authentication, X-Jwt, Cf-Access-Jwt-Assertion, a body's
// client_secret are all caught by a word in them. A header's name with
// "key" in it is one too (X-Api-Key, X-Callback-Key); a body's is not,
// since bodies name their references so (idempotency_key, refund_key)
// and an operator needs those.
var credentialWords = []string{"auth", "password", "passwd", "secret", "token", "jwt", "cookie", "session", "credential",
	"api-key", "api_key", "apikey", "private_key", "private-key"}

// kindOf is the kind of header name, by the words in it, in any case.
func kindOf(name string) headerKind {
	if k, ok := headerKinds.get(name); ok {
		return k
	}
	k := nameKind(name)
	if k == plainHeader && strings.Contains(strings.ToLower(name), "key") {
		k = credentialHeader
	}
	headerKinds.add(name, k)
	return k
}

// nameKind is what a header's or a body member's name says of its value,
// by the words in it, in any case: a signature (kept in part), a
// credential (never kept), or neither.
func nameKind(name string) headerKind {
	lower := strings.ToLower(name)
	if strings.Contains(lower, "signature") {
		return signatureHeader
	}
	for _, w := range credentialWords {
		if strings.Contains(lower, w) {
			return credentialHeader
		}
	}
	return plainHeader
}

// redact is header value v as a header of kind k keeps it.
func (k headerKind) redact(v string) string {
	switch k {
	case signatureHeader:
		if len(v) > shownSignature {
			return models.Truncate(v, shownSignature) + "…"
		}
		return v
	case credentialHeader:
		return "[redacted]"
	}
	if len(v) > maxKeptHeaderValue {
		return models.Truncate(v, maxKeptHeaderValue) + "…"
	}
	return v
}
