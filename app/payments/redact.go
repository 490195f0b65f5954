package payments

import (
	"bytes"
	"encoding/json"
	"io"
)

// RedactedBody is a kept body as the console shows it: each member whose
// name says it holds a signature (a signature_key) is cut to
// its first characters, as a signature header is, and each one whose
// name says it holds a credential (a client_secret, a password, a
// token) is "[redacted]", at any depth; every other byte is as received.
// The row keeps the body whole — applying it again fingerprints it as
// the gateway sent it — so the rule is applied wherever it is shown. A
// body that is not JSON is returned as it is: no gateway's signature
// check accepts one.
func RedactedBody(body []byte) []byte {
	cuts, ok := secretValues(body)
	if !ok || len(cuts) == 0 {
		return body
	}
	out := make([]byte, 0, len(body))
	last := 0
	for _, c := range cuts {
		out = append(out, body[last:c.start]...)
		out = append(out, c.with...)
		last = c.end
	}
	return append(out, body[last:]...)
}

// cut replaces body[start:end] with with.
type cut struct {
	start, end int
	with       []byte
}

// frame is an open array or object of the walk.
type frame struct {
	object  bool
	wantKey bool // the next token of the object is a member's name
}

// secretValues finds the values of the members of body named as secrets,
// in order, with what replaces each; false when body is not JSON.
func secretValues(body []byte) ([]cut, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []frame
	var cuts []cut
	pending := plainHeader // the kind of the member whose value comes next
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			return cuts, true
		}
		if err != nil {
			return nil, false
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if name, ok := tok.(string); ok {
				stack[n-1].wantKey, pending = false, nameKind(name)
				continue
			}
		}
		kind := pending
		pending = plainHeader
		start := valueStart(body, int(before))
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				if kind != plainHeader { // a secret's whole value: skip it
					if err := skipValue(dec); err != nil {
						return nil, false
					}
					cuts = append(cuts, cut{start, int(dec.InputOffset()), []byte(`"[redacted]"`)})
					valueDone()
					continue
				}
				stack = append(stack, frame{object: tok == '{', wantKey: tok == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case string:
			if kind != plainHeader {
				with, _ := json.Marshal(kind.redact(tok))
				cuts = append(cuts, cut{start, int(dec.InputOffset()), with})
			}
		default:
			if kind != plainHeader {
				cuts = append(cuts, cut{start, int(dec.InputOffset()), []byte(`"[redacted]"`)})
			}
		}
		valueDone()
	}
}

// valueStart is where the value after offset begins: past the spaces,
// the colon or the comma the decoder had not yet read.
func valueStart(body []byte, offset int) int {
	for offset < len(body) {
		switch body[offset] {
		case ' ', '\t', '\r', '\n', ':', ',':
			offset++
		default:
			return offset
		}
	}
	return offset
}

// skipValue reads the rest of an array or object whose opening the
// decoder has just read.
func skipValue(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
	}
	return nil
}
