// Package stdwebhooks signs and verifies webhooks per the Standard Webhooks
// specification: headers webhook-id, webhook-timestamp and
// webhook-signature ("v1,<base64 HMAC-SHA256(key, id.timestamp.body)>",
// space-separated), with secrets written as "whsec_<base64 key>".
package stdwebhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names (webhook-id, …), written as http.Header keeps them, so
// that reading them needs no conversion.
const (
	HeaderID        = "Webhook-Id"
	HeaderTimestamp = "Webhook-Timestamp"
	HeaderSignature = "Webhook-Signature"
)

// Tolerance is how far a timestamp may lie from now, in either direction.
const Tolerance = 5 * time.Minute

const secretPrefix = "whsec_"

// Verification errors. They say what was wrong without echoing a signature.
var (
	ErrMissingHeader    = errors.New("missing webhook-id, webhook-timestamp or webhook-signature header")
	ErrRepeatedHeader   = errors.New("webhook-id and webhook-timestamp must each be sent once")
	ErrBadTimestamp     = errors.New("webhook-timestamp is not a unix time in seconds, written as a plain decimal")
	ErrTimestampTooOld  = errors.New("webhook-timestamp is too old")
	ErrTimestampTooNew  = errors.New("webhook-timestamp is too far in the future")
	ErrNoMatchingSig    = errors.New("no webhook-signature matches")
	ErrMalformedSecrets = errors.New(`secret must be "whsec_" followed by base64`)
)

// DecodeSecret turns "whsec_<base64>" into the HMAC key.
func DecodeSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(secret), secretPrefix)
	if !ok {
		return nil, ErrMalformedSecrets
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, ErrMalformedSecrets
	}
	return key, nil
}

// EncodeSecret is the inverse of DecodeSecret.
func EncodeSecret(key []byte) string {
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Sign returns the "v1,<base64>" signature of body for id and timestamp.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body))
}

// Headers returns the three signed headers for body, ready to send.
func Headers(key []byte, id string, ts time.Time, body []byte) http.Header {
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(key, id, ts.Unix(), body))
	return h
}

// Verify checks that one of the signatures in h was made with one of keys
// (several keys may be active during a rotation) over h's id and timestamp
// — the header text as sent, as the specification signs it — and body,
// and that the timestamp lies within Tolerance of now. The id and the
// timestamp must each come once, and the timestamp only as a plain
// decimal ("0001614265330" or "+1614265330" would sign other text than
// the one checked). Every comparison is constant-time.
func Verify(keys [][]byte, h http.Header, body []byte, now time.Time) error {
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), strings.Join(h.Values(HeaderSignature), " ")
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeader
	}
	if len(h.Values(HeaderID)) != 1 || len(h.Values(HeaderTimestamp)) != 1 {
		return ErrRepeatedHeader
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil || ts <= 0 || strconv.FormatInt(ts, 10) != tsText {
		return ErrBadTimestamp
	}
	sent := time.Unix(ts, 0)
	if now.Sub(sent) > Tolerance {
		return ErrTimestampTooOld
	}
	if sent.Sub(now) > Tolerance {
		return ErrTimestampTooNew
	}
	for _, key := range keys {
		want := mac(key, id, ts, body)
		for _, sig := range strings.Fields(sigs) {
			version, b64, ok := strings.Cut(sig, ",")
			if !ok || version != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				continue
			}
			if hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSig
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return m.Sum(nil)
}
