// Package canonjson gives a JSON document one canonical spelling, so that
// two bodies that say the same thing get the same fingerprint: objects are
// re-encoded with sorted keys and no whitespace, and numbers are kept
// exactly as written (1.0 and 1 differ; a value change always shows).
//
// It refuses what would let two different bodies share a fingerprint, or
// one body mean two things to two parsers: invalid UTF-8, a key twice in
// one object (encoding/json keeps the last, other parsers the first), two
// keys of one object that differ only in case ("status" and "STATUS":
// encoding/json fills a struct field from either, case-insensitively, so
// which one wins depends on their order), and a lone surrogate escape such
// as "\ud800" (encoding/json turns every one into U+FFFD).
package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalid is returned for input that is not exactly one JSON value.
var ErrInvalid = errors.New("not a single valid JSON value")

// Decode parses exactly one JSON value, keeping numbers as json.Number.
// It refuses invalid UTF-8, duplicate keys, keys equal but for case and
// lone surrogate escapes (see the package comment).
func Decode(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.Join(ErrInvalid, errors.New("the body is not valid UTF-8"))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.Join(ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.Join(ErrInvalid, errors.New("trailing data after the JSON value"))
	}
	if err := unambiguous(data); err != nil {
		return nil, errors.Join(ErrInvalid, err)
	}
	return v, nil
}

// Canonicalize returns data's canonical encoding.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return Encode(v)
}

// Encode writes a decoded value canonically: encoding/json already sorts
// map keys and writes json.Number verbatim.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// AppendString appends s as a JSON string, spelled as Encode spells it,
// for code that writes a small, fixed-shape document by hand rather than
// through encoding/json's reflection. Plain ASCII, the usual case, is
// copied between quotes; anything that needs escaping (a quote, a
// backslash, a control character, any non-ASCII byte) is left to
// encoding/json, so the two never disagree.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			encoded, _ := Encode(s) // a string always encodes
			return append(b, encoded...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Fingerprint returns the hex SHA-256 of data's canonical encoding.
func Fingerprint(data []byte) (string, error) {
	c, err := Canonicalize(data)
	if err != nil {
		return "", err
	}
	return Hash(c), nil
}

// Reason says in one line why data was refused, for an error message.
func Reason(err error) string { return strings.ReplaceAll(err.Error(), "\n", ": ") }

// Hash returns the hex SHA-256 of already canonical bytes.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// unambiguous checks that data, valid JSON in UTF-8 (Decode parsed it),
// has no key twice in one object, no two keys equal but for case, and no
// lone surrogate escape.
func unambiguous(data []byte) error {
	if loneSurrogate(data) {
		return errors.New("a string holds a lone surrogate escape (\\ud800-\\udfff without its pair)")
	}
	switch duplicateKey(data) {
	case sameKey:
		return errors.New("a key appears twice in one object")
	case caseVariant:
		return errors.New("two keys of one object differ only in case")
	}
	return nil
}

// What duplicateKey found.
const (
	noDuplicate = iota
	sameKey     // "a" twice
	caseVariant // "a" and "A"
)

// duplicateKey reports whether an object in data, valid JSON, has a key
// twice, or two keys that encoding/json would both read into one struct
// field (equal under its case folding, foldKey). It reads the bytes once,
// without decoding the values: in valid JSON a string is a key exactly
// when it follows an object's "{" or one of its ",". (A walk over
// json.Decoder.Token did the same at about a fifth of the server's CPU
// time on a duplicate callback.)
func duplicateKey(data []byte) int {
	var open []map[string]string // per open object its keys, folded, to the key as written; nil for an open array
	expectKey := false
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			open = append(open, map[string]string{})
			expectKey = true
		case '[':
			open = append(open, nil)
			expectKey = false
		case '}', ']':
			open = open[:len(open)-1]
			expectKey = false
		case ',':
			expectKey = open[len(open)-1] != nil
		case '"':
			end := i + 1
			for data[end] != '"' {
				if data[end] == '\\' {
					end++ // the escaped character cannot end the string
				}
				end++
			}
			if expectKey {
				key := string(data[i+1 : end])
				if strings.IndexByte(key, '\\') >= 0 { // "\u0061" and "a" are one key
					json.Unmarshal(data[i:end+1], &key)
				}
				keys, folded := open[len(open)-1], foldKey(key)
				if seen, ok := keys[folded]; ok {
					if seen == key {
						return sameKey
					}
					return caseVariant
				}
				keys[folded] = key
				expectKey = false
			}
			i = end
		}
	}
	return noDuplicate
}

// foldKey folds a key as encoding/json matches names to struct fields
// (bytes.EqualFold): ASCII letters to upper case, any other rune to the
// upper case of its lower case, so the Kelvin sign folds with "k".
func foldKey(key string) string {
	plain := true
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= utf8.RuneSelf || 'a' <= c && c <= 'z' {
			plain = false
			break
		}
	}
	if plain {
		return key
	}
	b := make([]byte, 0, len(key))
	for _, r := range key {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b = append(b, byte(r))
			continue
		}
		b = utf8.AppendRune(b, unicode.ToUpper(unicode.ToLower(r)))
	}
	return string(b)
}

// loneSurrogate reports whether a string in data has a \uD800–\uDFFF
// escape that is not a high surrogate followed by a low one.
func loneSurrogate(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(data) && data[i+1] != 'u':
			i++ // a two-character escape such as \" or \\
		case c == '\\':
			r, ok := escapedRune(data, i)
			if !ok {
				return false // malformed: Decode reports it
			}
			i += 5
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00: // high: a low one must follow
				low, ok := escapedRune(data, i+1)
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return true
				}
				i += 6
			case utf16.IsSurrogate(r): // a low one on its own
				return true
			}
		}
	}
	return false
}

// escapedRune reads the \uXXXX escape at data[i:].
func escapedRune(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}
