package web

import (
	"encoding/json"
	"testing"
)

// A callback's answer, written by hand, is what encoding/json writes of
// callbackJSON: byte for byte for the usual answer, the same value for
// one whose strings need escaping (encoding/json also escapes <, > and &,
// which a JSON reader reads the same either way).
func TestCallbackAnswerIsItsJSON(t *testing.T) {
	t.Parallel()
	for _, a := range []callbackJSON{
		{Result: "duplicate", Provider: "sandbox", IdempotencyKey: "evt-1", OrderID: "ORD-1", OrderStatus: "paid"},
		{Result: "ignored", Provider: "acmepay", IdempotencyKey: "evt_1"},
		{Result: "unconfirmed", Provider: "otherpay", IdempotencyKey: "k", OrderID: "o", Detail: `the API said "settlement" \ café`},
		{Result: "unconfirmed", Provider: "p", Detail: "<b>&</b>\n"},
	} {
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		got := a.appendJSON(nil)
		var gotValue, wantValue callbackJSON
		if err := json.Unmarshal(got, &gotValue); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if err := json.Unmarshal(want, &wantValue); err != nil {
			t.Fatal(err)
		}
		if gotValue != wantValue {
			t.Errorf("answer %s reads as %+v, want %+v", got, gotValue, wantValue)
		}
		if a.Detail == "" && string(got) != string(want) {
			t.Errorf("answer %s, encoding/json writes %s", got, want)
		}
	}
}
