package payments_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// A kept body is searchable when it is a JSON object, and what
// SearchableBody keeps of it PostgreSQL's jsonb can always hold — one that
// jsonb refused would fail the whole batch of delivery rows. What jsonb
// cannot hold (a NUL character, a number out of numeric's range) is not
// searchable; what Go mends (a lone surrogate, invalid UTF-8) is kept
// mended.
func TestSearchableBodyIsWhatJSONBHolds(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	for _, c := range []struct {
		body       string
		searchable bool
	}{
		{`{"data":{"object":{"id":"pi_123","amount":1000}}}`, true},
		{`{"a":[1,2,{"b":true}],"c":null,"d":1.5e3,"e":"<&>"}`, true},
		{`{"lone":"\ud800","bad":"` + "\xff" + `"}`, true},
		{`{"n":1e1000}`, true},
		{`{"n":1e5000}`, false},
		{`{"n":1e-5000}`, false},
		{`{"n":0.` + strings.Repeat("1", 1200) + `}`, false},
		{`{"nul":"a\u0000b"}`, false},
		{`{"a\u0000":1}`, false},
		{`[{"a":1}]`, false},
		{`"text"`, false},
		{`null`, false},
		{`{"a":1`, false},
		{`{"a":1} {"b":2}`, false},
		{``, false},
	} {
		got := payments.SearchableBody([]byte(c.body))
		if (got != nil) != c.searchable {
			t.Errorf("%.60s: searchable %v, want %v", c.body, got != nil, c.searchable)
			continue
		}
		if got == nil {
			continue
		}
		if err := db.Exec("SELECT ?::jsonb", string(got)).Error; err != nil {
			t.Errorf("%.60s: kept as %.60s, which jsonb refuses: %v", c.body, got, err)
			continue
		}
		var same bool
		if err := db.Raw("SELECT ?::jsonb = ?::jsonb", string(got), c.body).Scan(&same).Error; err == nil && !same {
			t.Errorf("%.60s: kept as %.60s, another document", c.body, got)
		}
	}
}

// A path = value is dotted object keys, "=", and the rest; a path is
// bounded in depth and key length.
func TestParseBodyField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		path []string
		val  string
		ok   bool
	}{
		{"data.object.id=pi_123", []string{"data", "object", "id"}, "pi_123", true},
		{"note=a=b", []string{"note"}, "a=b", true},
		{"note=", []string{"note"}, "", true},
		{"a.b.c.d.e.f.g.h=1", []string{"a", "b", "c", "d", "e", "f", "g", "h"}, "1", true},
		{"a.b.c.d.e.f.g.h.i=1", nil, "", false},
		{strings.Repeat("k", 65) + "=1", nil, "", false},
		{"a..b=1", nil, "", false},
		{".a=1", nil, "", false},
		{"=1", nil, "", false},
		{"no value", nil, "", false},
	} {
		f, err := payments.ParseBodyField(c.in)
		if (err == nil) != c.ok {
			t.Errorf("%q: error %v, want ok %v", c.in, err, c.ok)
			continue
		}
		if err != nil {
			if models.ErrorCode(err) != models.EInvalid {
				t.Errorf("%q: error code %s, want %s", c.in, models.ErrorCode(err), models.EInvalid)
			}
			continue
		}
		if strings.Join(f.Path, "|") != strings.Join(c.path, "|") || f.Value != c.val || f.String() != c.in {
			t.Errorf("%q: read as %q = %q (%s)", c.in, f.Path, f.Value, f)
		}
	}
}

// The deliveries list and the callbacks list find kept bodies by a path =
// value: a string exactly, a number as the number, and nothing else.
func TestBodySearchFindsKeptDeliveries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.pay.KeepBodies = true
	ctx := context.Background()
	a, _ := f.orderIn(models.OrderPending)
	b, _ := f.orderIn(models.OrderPending)
	if out := f.deliverRef(a, "tx-search-a", models.EventPaid, price); out.Result != models.ResultProcessed {
		t.Fatalf("delivery of %s: %+v", a, out)
	}
	if out := f.deliverRef(b, "tx-search-b", models.EventPaid, price); out.Result != models.ResultProcessed {
		t.Fatalf("delivery of %s: %+v", b, out)
	}
	search := func(field string) (deliveries []string, callbacks []string) {
		t.Helper()
		bf, err := payments.ParseBodyField(field)
		if err != nil {
			t.Fatal(err)
		}
		ds, _, err := f.pay.ListDeliveries(ctx, payments.DeliveryFilter{Body: bf})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			var order string
			f.db.Raw("SELECT c.order_id FROM payment_callbacks c WHERE c.id = ?", d.CallbackID).Scan(&order)
			deliveries = append(deliveries, order)
			if d.Body != nil || d.BodyJSON != nil {
				t.Errorf("the list read delivery %d's kept body", d.ID)
			}
		}
		cbs, _, err := f.pay.ListCallbacks(ctx, payments.CallbackFilter{Body: bf})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cbs {
			callbacks = append(callbacks, c.OrderID)
		}
		return deliveries, callbacks
	}
	for _, c := range []struct {
		field string
		want  []string // order ids, newest first
	}{
		{"transaction_id=tx-search-a", []string{a}},
		{"order_id=" + b, []string{b}},
		{"paid_amount=" + strconv.Itoa(price), []string{b, a}},
		{"paid_amount=" + strconv.Itoa(price+1), nil},
		{"currency=IDR", []string{b, a}},
		{"currency=idr", nil},
		{"transaction_id=tx-search", nil},
		{"order_id.id=" + a, nil},
	} {
		ds, cbs := search(c.field)
		if strings.Join(ds, ",") != strings.Join(c.want, ",") || strings.Join(cbs, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: deliveries of %v, callbacks of %v; want %v", c.field, ds, cbs, c.want)
		}
	}
}

// The callbacks list's one search box finds a callback by its gateway
// transaction id, its payment's reference or its customer's email,
// exactly.
func TestCallbackSearchByTransactionReferenceOrEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a, _ := f.orderIn(models.OrderPending)
	if out := f.deliverRef(a, "tx-q-a", models.EventPaid, price); out.Result != models.ResultProcessed {
		t.Fatalf("delivery of %s: %+v", a, out)
	}
	if err := f.db.Exec("UPDATE orders SET customer_email = 'only-a@example.com' WHERE id = ?", a).Error; err != nil {
		t.Fatal(err)
	}
	b, _ := f.orderIn(models.OrderPending)
	if out := f.deliverRef(b, "tx-q-b", models.EventPaid, price); out.Result != models.ResultProcessed {
		t.Fatalf("delivery of %s: %+v", b, out)
	}
	// A reference that is not the callback's transaction id: the search
	// finds it through the payment.
	if err := f.db.Exec("UPDATE payments SET provider_reference = 'ref-of-b' WHERE order_id = ?", b).Error; err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{
		"tx-q-a": a, "ref-of-b": b, "only-a@example.com": a, "sm@example.com": b,
		"tx-q": "", "ONLY-A@example.com": "", a: "",
	} {
		cbs, _, err := f.pay.ListCallbacks(ctx, payments.CallbackFilter{Search: q})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range cbs {
			got = append(got, c.OrderID)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("q=%s: callbacks of %v, want %q", q, got, want)
		}
	}
}

// Only bodies whose signature passed, of at most 16 KiB, are searchable:
// a search whose value many bodies hold reads the newest rows, each
// row's jsonb decompressed and searched, so rows anyone can have kept —
// a refused body, 60 a minute per client — or large ones would slow it
// (1,000 refused objects of 4,500 keys took it from 0.2 ms to 130 ms).
// Both are kept, and shown; neither is searchable.
func TestOnlySignedBoundedBodiesAreSearchable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.pay.KeepBodies = true
	a, _ := f.orderIn(models.OrderPending)
	if out := f.deliverRef(a, "tx-searchable", models.EventPaid, price); out.Result != models.ResultProcessed {
		t.Fatalf("the signed delivery: %+v", out)
	}
	send := func(body []byte, h http.Header) payments.Outcome {
		return f.pay.Receive(context.Background(), payments.Delivery{Provider: sandbox.Name, Header: h,
			Body: bytes.NewReader(body), ContentType: "application/json", RemoteAddr: "192.0.2.1"})
	}
	refused := testenv.SandboxBody(a, "tx-refused", models.EventPaid, price)
	h := testenv.SandboxHeaders("evt_refused", refused, time.Now())
	h.Set("webhook-signature", "v1,Zm9yZ2Vk")
	if out := send(refused, h); out.Refusal != models.EInvalidSignature {
		t.Fatalf("the forged delivery: %+v", out)
	}
	large := []byte(strings.Replace(string(testenv.SandboxBody(a, "tx-large", models.EventPaid, price)), `{`,
		`{"pad":"`+strings.Repeat("x", 17<<10)+`",`, 1))
	if out := send(large, testenv.SandboxHeaders("evt_large", large, time.Now())); out.Status() >= 500 || out.Result == payments.Refused && out.Refusal == models.EInvalidSignature {
		t.Fatalf("the large signed delivery: %+v", out)
	}
	testenv.Eventually(t, "the three rows, with their bodies", func() bool {
		var n int64
		f.db.Model(&models.CallbackDelivery{}).Where("body IS NOT NULL").Count(&n)
		return n == 3
	})
	var searchable []string
	f.db.Raw("SELECT convert_from(body, 'UTF8')::jsonb ->> 'transaction_id' FROM callback_deliveries WHERE body_json IS NOT NULL ORDER BY id").Scan(&searchable)
	if strings.Join(searchable, ",") != "tx-searchable" {
		t.Errorf("searchable bodies of %v, want only the signed one of a few hundred bytes", searchable)
	}
}
