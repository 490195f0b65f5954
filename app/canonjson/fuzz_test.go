package canonjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sekali/sekali/app/canonjson"
)

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		base,
		`{"currency":"IDR","paid_amount":150000,"payment_status":"paid","transaction_id":"tx-1","order_id":"ORD-1"}`,
		" \n\t{ \"b\" : 1 ,\r\n \"a\" : [ 1 , 2 ] } \n",
		`{"z":{"y":{"x":[{"b":1,"a":2},[],{}]}},"a":null}`,
		`1e3`, `1.0`, `-0`, `1e400`, `1E+2`, `0.000001`, `123456789012345678901234567890`, `-9223372036854775809`,
		`"\u00e9\ud83d\ude00\u2028\u0000<&>"`,
		`"\ud800"`, // a lone surrogate
		"\"\xff\"",
		`{"a":1,"a":2}`,
		`{"b":1,"a":2} trailing`,
		`{"a":1}{"a":1}`,
		`{`, `{"a":}`, `[1,]`, `01`, `+1`, `.5`, `NaN`,
		``, ` `,
		`[]`, `[3,2,1]`, `[{"b":0,"a":0}]`,
		`true`, `null`,
		"\ufeff{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := canonjson.Canonicalize(data)
		fp, fpErr := canonjson.Fingerprint(data)
		if err != nil {
			if !errors.Is(err, canonjson.ErrInvalid) {
				t.Fatalf("Canonicalize(%q) error %v is not ErrInvalid", data, err)
			}
			if fpErr == nil {
				t.Fatalf("Fingerprint(%q) succeeded where Canonicalize failed", data)
			}
			if json.Valid(data) && utf8.Valid(data) && !ambiguous(data) {
				t.Fatalf("Canonicalize refused valid, unambiguous JSON %q: %v", data, err)
			}
			return
		}
		if !json.Valid(data) || !utf8.Valid(data) {
			t.Fatalf("Canonicalize accepted invalid JSON %q as %q", data, c)
		}
		if ambiguous(data) {
			t.Fatalf("Canonicalize accepted %q, which has a key twice, keys equal but for case, or a lone surrogate", data)
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form %q of %q is not valid JSON", c, data)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, c); err != nil || !bytes.Equal(compact.Bytes(), c) {
			t.Fatalf("canonical form %q has insignificant whitespace", c)
		}
		if err := keysSorted(c); err != nil {
			t.Fatalf("canonical form %q: %v", c, err)
		}
		cc, err := canonjson.Canonicalize(c)
		if err != nil || !bytes.Equal(cc, c) {
			t.Fatalf("not idempotent: canon(%q) = %q, canon of that = %q, %v", data, c, cc, err)
		}
		fpc, err := canonjson.Fingerprint(c)
		if fpErr != nil || err != nil || fp != fpc || fp != canonjson.Hash(c) {
			t.Fatalf("Fingerprint(x) = %q, %v; Fingerprint(canon(x)) = %q, %v; Hash(canon(x)) = %q",
				fp, fpErr, fpc, err, canonjson.Hash(c))
		}
	})
}

// FuzzOneFingerprintOneValue: two bodies with one fingerprint decode to
// the same value — also for a parser that keeps duplicate keys or lone
// surrogates apart (the decoder below keeps every key and every escape).
func FuzzOneFingerprintOneValue(f *testing.F) {
	f.Add([]byte(`{"paid_amount":1,"paid_amount":75000}`), []byte(`{"paid_amount":75000}`))
	f.Add([]byte(`{"a":"\ud800"}`), []byte(`{"a":"\udbff"}`))
	f.Add([]byte(`{"b":1,"a":2}`), []byte(` {"a":2, "b":1} `))
	f.Add([]byte(`"\u0041"`), []byte(`"A"`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fa, errA := canonjson.Fingerprint(a)
		fb, errB := canonjson.Fingerprint(b)
		if errA != nil || errB != nil || fa != fb {
			return
		}
		va, vb := strictDecode(t, a), strictDecode(t, b)
		if va != vb {
			t.Fatalf("%q and %q share a fingerprint but mean %q and %q", a, b, va, vb)
		}
	})
}

// strictDecode writes what a strict parser sees: every key in the order
// given (sorted per object, duplicates kept) and every string's runes,
// lone surrogates as themselves.
func strictDecode(t *testing.T, data []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out strings.Builder
	type frame struct{ parts []string }
	var stack []*frame
	emit := func(s string) {
		if n := len(stack); n > 0 {
			stack[n-1].parts = append(stack[n-1].parts, s)
			return
		}
		out.WriteString(s)
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out.String()
		}
		if err != nil {
			t.Fatalf("strictDecode(%q): %v", data, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'):
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			var pairs []string
			for i := 0; i+1 < len(f.parts); i += 2 {
				pairs = append(pairs, f.parts[i]+":"+f.parts[i+1])
			}
			slices.Sort(pairs)
			emit("{" + strings.Join(pairs, ",") + "}")
		case json.Delim(']'):
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			emit("[" + strings.Join(f.parts, ",") + "]")
		default:
			emit(fmt.Sprintf("%T:%v", tok, tok))
		}
	}
}

// ambiguous reports whether data (valid JSON) has a key twice in one
// object, two keys of one object equal under strings.EqualFold (which
// encoding/json's field matching follows), or a lone surrogate escape:
// what Canonicalize refuses.
func ambiguous(data []byte) bool {
	re := regexp.MustCompile(`\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\\\\`)
	for _, m := range re.FindAll(data, -1) {
		if len(m) == 6 { // a surrogate escape without its pair
			return true
		}
	}
	return hasDuplicateKey(data)
}

func hasDuplicateKey(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object, wantKey bool
		seen            []string
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].wantKey = true
			}
			continue
		}
		if top != nil && top.object && top.wantKey {
			k := tok.(string)
			for _, s := range top.seen {
				if strings.EqualFold(s, k) {
					return true
				}
			}
			top.seen = append(top.seen, k)
			top.wantKey = false
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{object: d == '{', wantKey: d == '{'})
			continue
		}
		if top != nil && top.object {
			top.wantKey = true
		}
	}
}

// keysSorted reports an error unless every object in the JSON value data
// has its keys in strictly increasing byte order.
func keysSorted(data []byte) error {
	type frame struct {
		object, wantKey bool
		last            string
		hasLast         bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // 1e400 is valid JSON but no float64
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.object && top.wantKey {
			k := tok.(string)
			if top.hasLast && k <= top.last {
				return errors.New("key " + k + " follows " + top.last)
			}
			top.last, top.hasLast, top.wantKey = k, true, false
			continue
		}
		if top != nil && top.object {
			top.wantKey = true // the value of the last key
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{object: d == '{', wantKey: d == '{'})
		}
	}
}
