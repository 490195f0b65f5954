package canonjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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
			if json.Valid(data) && utf8.Valid(data) {
				t.Fatalf("Canonicalize refused valid JSON %q: %v", data, err)
			}
			return
		}
		if !json.Valid(data) || !utf8.Valid(data) {
			t.Fatalf("Canonicalize accepted invalid JSON %q as %q", data, c)
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
