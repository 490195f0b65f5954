// Package canonjson gives a JSON document one canonical spelling, so that
// two bodies that say the same thing get the same fingerprint: objects are
// re-encoded with sorted keys and no whitespace, and numbers are kept
// exactly as written (1.0 and 1 differ; a value change always shows).
package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// ErrInvalid is returned for input that is not exactly one JSON value.
var ErrInvalid = errors.New("not a single valid JSON value")

// Decode parses exactly one JSON value, keeping numbers as json.Number.
// Invalid UTF-8 is refused: encoding/json would turn every invalid byte
// into U+FFFD, and two different payloads would share one fingerprint.
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

// Fingerprint returns the hex SHA-256 of data's canonical encoding.
func Fingerprint(data []byte) (string, error) {
	c, err := Canonicalize(data)
	if err != nil {
		return "", err
	}
	return Hash(c), nil
}

// Hash returns the hex SHA-256 of already canonical bytes.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}
