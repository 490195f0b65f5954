package payments

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

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
var KeptColumns = []string{"headers", "body", "body_json"}

// keep sets what row keeps of d, unless bodies are not kept: its body,
// the body again as searchable JSON (SearchableBody), and its headers
// once its body was read.
func (s *Service) keep(d Delivery, row models.CallbackDelivery) models.CallbackDelivery {
	if !s.KeepBodies {
		return row
	}
	row.Body, row.BodyJSON = d.body, SearchableBody(d.body)
	if d.body != nil {
		row.Headers = keptHeaders(d.Header)
	}
	return row
}

// Bounds of a number that a body searchable as jsonb may hold: PostgreSQL's
// numeric refuses an exponent far out of range, and a row whose jsonb
// fails would fail its whole batch.
const (
	maxSearchableExponent = 1000
	maxSearchableFraction = 1000 // digits after the point
)

// SearchableBody is body as its row's body_json keeps it, for the search
// by path = value (docs/admin.md#search): a JSON object, decoded and
// encoded again so that what Go's decoder mends (invalid UTF-8, a lone
// surrogate) and jsonb would refuse is mended; nil for anything else, and
// for an object jsonb could not hold (a NUL character, a number beyond
// numeric's range) — such a body is kept, but not searchable.
func SearchableBody(body []byte) json.RawMessage {
	if len(body) == 0 || !json.Valid(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil || v == nil || !holdable(v) {
		return nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
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
// to tell two apart but not to replay one.
func keptHeaders(h http.Header) []byte {
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range h {
			if !yield(http.CanonicalHeaderKey(name)) {
				return
			}
		}
	})
	if len(names) > maxKeptHeaders {
		names = names[:maxKeptHeaders]
	}
	kept := make(map[string][]string, len(names))
	for _, name := range names {
		for _, v := range h.Values(name) {
			kept[name] = append(kept[name], redact(name, v))
		}
	}
	b, err := json.Marshal(kept)
	if err != nil { // only invalid UTF-8, which Marshal replaces: cannot happen
		return nil
	}
	return b
}

// redact is header value v of header name as it is kept.
func redact(name, v string) string {
	lower := strings.ToLower(name)
	switch {
	case strings.Contains(lower, "signature"):
		if len(v) > shownSignature {
			return models.Truncate(v, shownSignature) + "…"
		}
		return v
	case strings.Contains(lower, "authorization"), strings.Contains(lower, "token"), strings.Contains(lower, "secret"),
		strings.Contains(lower, "key"), strings.Contains(lower, "cookie"):
		return "[redacted]"
	}
	if len(v) > maxKeptHeaderValue {
		return models.Truncate(v, maxKeptHeaderValue) + "…"
	}
	return v
}
