package payments

import (
	"encoding/json"
	"net/http"
	"slices"
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
var KeptColumns = []string{"headers", "body"}

// keptHeaders are d's headers as its row keeps them: nil unless bodies
// are kept and d's body was read.
func (s *Service) keptHeaders(d Delivery) []byte {
	if !s.KeepBodies || d.body == nil {
		return nil
	}
	return keptHeaders(d.Header)
}

// keptBody is d's body as its row keeps it: nil unless bodies are kept.
func (s *Service) keptBody(d Delivery) []byte {
	if !s.KeepBodies {
		return nil
	}
	return d.body
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
