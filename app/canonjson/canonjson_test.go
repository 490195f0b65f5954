package canonjson_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/canonjson"
)

const base = `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"}`

func TestFingerprintIgnoresKeyOrderAndWhitespace(t *testing.T) {
	t.Parallel()
	same := []string{
		base,
		`{"currency":"IDR","paid_amount":150000,"payment_status":"paid","transaction_id":"tx-1","order_id":"ORD-1"}`,
		"{\n  \"order_id\" : \"ORD-1\",\n\t\"transaction_id\":\"tx-1\", \"payment_status\":\"paid\",\r\n\"paid_amount\": 150000 , \"currency\":\"IDR\"}\n",
		`{"order_id":"ORD\u002d1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR"}`,
	}
	want := mustFingerprint(t, base)
	for _, body := range same {
		if got := mustFingerprint(t, body); got != want {
			t.Errorf("Fingerprint(%q) = %s, want %s (same content)", body, got, want)
		}
	}
}

func TestFingerprintSeesEveryValueChange(t *testing.T) {
	t.Parallel()
	different := map[string]string{
		"amount":            `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150001,"currency":"IDR"}`,
		"number spelling":   `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000.0,"currency":"IDR"}`,
		"number as string":  `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":"150000","currency":"IDR"}`,
		"status":            `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"failed","paid_amount":150000,"currency":"IDR"}`,
		"case of a value":   `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"idr"}`,
		"extra field":       `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000,"currency":"IDR","note":""}`,
		"missing field":     `{"order_id":"ORD-1","transaction_id":"tx-1","payment_status":"paid","paid_amount":150000}`,
		"null for a string": `{"order_id":"ORD-1","transaction_id":null,"payment_status":"paid","paid_amount":150000,"currency":"IDR"}`,
	}
	want := mustFingerprint(t, base)
	for name, body := range different {
		if got := mustFingerprint(t, body); got == want {
			t.Errorf("%s: Fingerprint(%q) equals the base fingerprint", name, body)
		}
	}
}

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"b": [3, 2, {"d": 1, "c": 0}], "a": "<&>"}`, `{"a":"<&>","b":[3,2,{"c":0,"d":1}]}`},
		{` 12.50 `, `12.50`},
		{`"é"`, `"é"`},
		{`null`, `null`},
	}
	for _, tt := range tests {
		got, err := canonjson.Canonicalize([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestCanonicalizeRefusesInvalidJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"a":1} {"b":2}`, `{"a":1}x`, `{'a':1}`, `[1,]`, "\xff", "\"\xff\"", "{\"a\":\"\xfe\"}"} {
		if _, err := canonjson.Canonicalize([]byte(in)); !errors.Is(err, canonjson.ErrInvalid) {
			t.Errorf("Canonicalize(%q) error = %v, want ErrInvalid", in, err)
		}
	}
}

// What two parsers could read differently is refused: a key twice in one
// object (at any depth), two keys that differ only in case (encoding/json
// fills one struct field from either: the Kelvin sign K folds with "k"),
// a lone surrogate escape. A pair of surrogates, an escaped backslash
// before "u", and keys equal but for case in different objects are fine.
func TestCanonicalizeRefusesAmbiguity(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"paid_amount":1,"paid_amount":75000}`, `{"a":{"b":1},"a":2}`, `{"a":[{"b":1,"b":2}]}`,
		`"\ud800"`, `"\udc00"`, `{"k":"x\ud83d"}`, `{"\ud800":1}`, `"\\\ud800"`,
		`{"transaction_status":"pending","TRANSACTION_STATUS":"expire"}`, `{"a":{"Order_ID":1,"order_id":2}}`,
		"{\"kind\":1,\"\u212aind\":2}", `{"\u0061":1,"A":2}`,
	} {
		if _, err := canonjson.Canonicalize([]byte(in)); !errors.Is(err, canonjson.ErrInvalid) {
			t.Errorf("Canonicalize(%s) error = %v, want ErrInvalid", in, err)
		}
	}
	for _, in := range []string{`{"a":1,"b":{"a":1}}`, `[{"a":1},{"a":1}]`, `"\ud83d\ude00"`, `"\\ud800"`,
		`{"a":1,"b":{"A":1}}`, `[{"a":1},{"A":1}]`, `{"status":"PAID"}`} {
		if _, err := canonjson.Canonicalize([]byte(in)); err != nil {
			t.Errorf("Canonicalize(%s) = %v, want it accepted", in, err)
		}
	}
}

func mustFingerprint(t *testing.T, body string) string {
	t.Helper()
	fp, err := canonjson.Fingerprint([]byte(body))
	if err != nil {
		t.Fatalf("Fingerprint(%q): %v", body, err)
	}
	return fp
}

// numberBodies are 64 KiB bodies of the numbers math/big would choke on:
// exponents, and digits as long as a body holds. Numbers are kept as
// written (json.Number), never converted, so they cost what their bytes
// do: compare with the same size of short numbers.
func numberBodies() map[string][]byte {
	const size = 64 << 10
	list := func(n string) []byte {
		b := []byte(`{"a":[` + n)
		for len(b)+len(n)+3 <= size {
			b = append(append(b, ','), n...)
		}
		return append(b, "]}"...)
	}
	return map[string][]byte{
		"exponents":    list("1e1000000"),
		"short":        list("123456789"),
		"64KiB-number": []byte(`{"a":` + strings.Repeat("9", size-6) + `}`),
	}
}

// The numbers of numberBodies are kept exactly as written.
func TestFingerprintKeepsLongNumbers(t *testing.T) {
	t.Parallel()
	for name, body := range numberBodies() {
		if c, err := canonjson.Canonicalize(body); err != nil || !bytes.Equal(c, body) {
			t.Errorf("%s: canonical form differs (%d bytes, %v)", name, len(c), err)
		}
	}
}

func BenchmarkFingerprintNumbers(b *testing.B) {
	for name, body := range numberBodies() {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				canonjson.Fingerprint(body)
			}
		})
	}
}

// AppendString spells every string as Encode does, whether it takes the
// plain-ASCII path or leaves the escaping to encoding/json.
func TestAppendStringSpellsAsEncode(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "msg_p5jXN8AQM9LWM0D4loKWxJek", `say "hi"`, `back\slash`, "tab\there", "nul\x00",
		"<script>&", "café", "…", "\u2028", "bad \xff utf-8", "v1,g0hM9SsE+…"} {
		want, err := canonjson.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonjson.AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendString(%q) = %s, want x%s", s, got, want)
		}
	}
}
