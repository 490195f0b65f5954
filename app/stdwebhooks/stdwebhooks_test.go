package stdwebhooks_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sekali/sekali/app/stdwebhooks"
)

// The vector published with the Standard Webhooks specification.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustKey(t *testing.T, s string) []byte {
	t.Helper()
	k, err := stdwebhooks.DecodeSecret(s)
	if err != nil {
		t.Fatalf("DecodeSecret(%q): %v", s, err)
	}
	return k
}

func TestSignPublishedVector(t *testing.T) {
	t.Parallel()
	got := stdwebhooks.Sign(mustKey(t, vectorSecret), vectorID, vectorTS, []byte(vectorBody))
	if got != vectorSig {
		t.Fatalf("Sign = %q, want %q", got, vectorSig)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	key := mustKey(t, vectorSecret)
	other := mustKey(t, stdwebhooks.EncodeSecret([]byte("another key of ours, rotated in")))
	at := time.Unix(vectorTS, 0)

	headers := func(id, ts, sig string) http.Header {
		h := http.Header{}
		if id != "" {
			h.Set(stdwebhooks.HeaderID, id)
		}
		if ts != "" {
			h.Set(stdwebhooks.HeaderTimestamp, ts)
		}
		if sig != "" {
			h.Set(stdwebhooks.HeaderSignature, sig)
		}
		return h
	}
	vectorTSText := strconv.Itoa(vectorTS)
	signedAt := func(k []byte, ts time.Time, body string) http.Header {
		return stdwebhooks.Headers(k, vectorID, ts, []byte(body))
	}

	tests := []struct {
		name string
		keys [][]byte
		h    http.Header
		body string
		now  time.Time
		want error
	}{
		{"published vector", [][]byte{key}, headers(vectorID, vectorTSText, vectorSig), vectorBody, at, nil},
		{"one of several signatures", [][]byte{key}, headers(vectorID, vectorTSText, "v1,bm9wZQ== "+vectorSig), vectorBody, at, nil},
		{"rotation: second of two secrets", [][]byte{other, key}, headers(vectorID, vectorTSText, vectorSig), vectorBody, at, nil},
		{"rotation: signed with the new secret", [][]byte{key, other}, signedAt(other, at, vectorBody), vectorBody, at, nil},
		{"wrong secret", [][]byte{other}, headers(vectorID, vectorTSText, vectorSig), vectorBody, at, stdwebhooks.ErrNoMatchingSig},
		{"tampered body", [][]byte{key}, headers(vectorID, vectorTSText, vectorSig), `{"test": 2432232315}`, at, stdwebhooks.ErrNoMatchingSig},
		{"tampered id", [][]byte{key}, headers("msg_other", vectorTSText, vectorSig), vectorBody, at, stdwebhooks.ErrNoMatchingSig},
		{"4m59s old", [][]byte{key}, signedAt(key, at.Add(-299*time.Second), vectorBody), vectorBody, at, nil},
		{"6 min old", [][]byte{key}, signedAt(key, at.Add(-6*time.Minute), vectorBody), vectorBody, at, stdwebhooks.ErrTimestampTooOld},
		{"6 min in the future", [][]byte{key}, signedAt(key, at.Add(6*time.Minute), vectorBody), vectorBody, at, stdwebhooks.ErrTimestampTooNew},
		{"missing signature header", [][]byte{key}, headers(vectorID, vectorTSText, ""), vectorBody, at, stdwebhooks.ErrMissingHeader},
		{"missing id header", [][]byte{key}, headers("", vectorTSText, vectorSig), vectorBody, at, stdwebhooks.ErrMissingHeader},
		{"timestamp not a number", [][]byte{key}, headers(vectorID, "yesterday", vectorSig), vectorBody, at, stdwebhooks.ErrBadTimestamp},
		// The signature covers the header text: a timestamp written another
		// way would be checked as one text and signed as another.
		{"timestamp with leading zeros", [][]byte{key}, headers(vectorID, "000"+vectorTSText, vectorSig), vectorBody, at, stdwebhooks.ErrBadTimestamp},
		{"timestamp with a plus sign", [][]byte{key}, headers(vectorID, "+"+vectorTSText, vectorSig), vectorBody, at, stdwebhooks.ErrBadTimestamp},
		{"timestamp zero", [][]byte{key}, headers(vectorID, "0", vectorSig), vectorBody, at, stdwebhooks.ErrBadTimestamp},
		{"two ids", [][]byte{key}, func() http.Header {
			h := headers(vectorID, vectorTSText, vectorSig)
			h.Add(stdwebhooks.HeaderID, "msg_other")
			return h
		}(), vectorBody, at, stdwebhooks.ErrRepeatedHeader},
		{"two timestamps", [][]byte{key}, func() http.Header {
			h := headers(vectorID, vectorTSText, vectorSig)
			h.Add(stdwebhooks.HeaderTimestamp, vectorTSText)
			return h
		}(), vectorBody, at, stdwebhooks.ErrRepeatedHeader},
		{"signatures in two headers", [][]byte{key}, func() http.Header {
			h := headers(vectorID, vectorTSText, "v1,bm9wZQ==")
			h.Add(stdwebhooks.HeaderSignature, vectorSig)
			return h
		}(), vectorBody, at, nil},
		{"signature without version", [][]byte{key}, headers(vectorID, vectorTSText, "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), vectorBody, at, stdwebhooks.ErrNoMatchingSig},
		{"unknown version", [][]byte{key}, headers(vectorID, vectorTSText, "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), vectorBody, at, stdwebhooks.ErrNoMatchingSig},
		{"signature not base64", [][]byte{key}, headers(vectorID, vectorTSText, "v1,***"), vectorBody, at, stdwebhooks.ErrNoMatchingSig},
		{"no keys configured", nil, headers(vectorID, vectorTSText, vectorSig), vectorBody, at, stdwebhooks.ErrNoMatchingSig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := stdwebhooks.Verify(tt.keys, tt.h, []byte(tt.body), tt.now)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecodeSecret(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_%%%", "sk_live_123"} {
		if _, err := stdwebhooks.DecodeSecret(bad); !errors.Is(err, stdwebhooks.ErrMalformedSecrets) {
			t.Errorf("DecodeSecret(%q) = %v, want ErrMalformedSecrets", bad, err)
		}
	}
	key := []byte("round trip")
	got, err := stdwebhooks.DecodeSecret(stdwebhooks.EncodeSecret(key))
	if err != nil || string(got) != string(key) {
		t.Fatalf("round trip = %q, %v", got, err)
	}
}

// BenchmarkVerify is the check every sandbox delivery pays, retries too.
func BenchmarkVerify(b *testing.B) {
	key, err := stdwebhooks.DecodeSecret(vectorSecret)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(vectorBody)
	now := time.Unix(vectorTS, 0)
	h := stdwebhooks.Headers(key, vectorID, now, body)
	b.ReportAllocs()
	for b.Loop() {
		if err := stdwebhooks.Verify([][]byte{key}, h, body, now); err != nil {
			b.Fatal(err)
		}
	}
}
