package payments_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/payments"
)

// A kept delivery's headers never hold what authenticates a sender: a
// credential is "[redacted]", a signature keeps its first characters
// (enough to tell two apart, not to replay one); the rest is kept as
// sent, each value bounded.
func TestKeptHeadersRedactSecrets(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("Authorization", "Basic c2VjcmV0Og==")
	h.Set("X-Callback-Token", "xnd-callback-token-0123456789")
	h.Set("Acmepay-Signature", "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")
	h.Set("Webhook-Signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	h.Set("X-Api-Key", "k-0123")
	h.Set("Cookie", "session=abc")
	h.Set("Webhook-Id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("User-Agent", strings.Repeat("a", 2000))
	var kept map[string][]string
	first := payments.KeptHeaders(h)
	if err := json.Unmarshal(first, &kept); err != nil {
		t.Fatal(err)
	}
	if again := payments.KeptHeaders(h); !bytes.Equal(again, first) { // the names' kinds from memory
		t.Errorf("kept again as %s, first as %s", again, first)
	}
	for name, want := range map[string]string{
		"Authorization":     "[redacted]",
		"X-Callback-Token":  "[redacted]",
		"X-Api-Key":         "[redacted]",
		"Cookie":            "[redacted]",
		"Acmepay-Signature": "t=1700000000…",
		"Webhook-Signature": "v1,g0hM9SsE+…",
		"Webhook-Id":        "msg_p5jXN8AQM9LWM0D4loKWxJek",
	} {
		if got := kept[name]; len(got) != 1 || got[0] != want {
			t.Errorf("%s kept as %q, want %q", name, got, want)
		}
	}
	if ua := kept["User-Agent"][0]; len(ua) > 520 || !strings.HasSuffix(ua, "…") {
		t.Errorf("a 2,000-byte value kept as %d bytes", len(ua))
	}
}

// The kept headers are a JSON object of every header, in name order, with
// each of its values, whatever they hold; a header without values is left
// out.
func TestKeptHeadersKeepEveryValue(t *testing.T) {
	t.Parallel()
	h := http.Header{
		"Accept":       {"a", "b"},
		"X-Quoted":     {`say "hi" \ back`},
		"X-Note":       {"café …", "bad \xff"},
		"Content-Type": {"application/json"},
		"X-Empty":      {},
	}
	got := payments.KeptHeaders(h)
	var kept map[string][]string
	if err := json.Unmarshal(got, &kept); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	want := map[string][]string{
		"Accept": {"a", "b"}, "X-Quoted": {`say "hi" \ back`}, "X-Note": {"café …", "bad \ufffd"},
		"Content-Type": {"application/json"},
	}
	if !reflect.DeepEqual(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if !strings.HasPrefix(string(got), `{"Accept":`) {
		t.Errorf("not in name order: %s", got)
	}
	if got := string(payments.KeptHeaders(http.Header{})); got != "{}" {
		t.Errorf("no headers kept as %s", got)
	}
}

// BenchmarkKeptHeaders is the headers a sandbox delivery's row keeps.
func BenchmarkKeptHeaders(b *testing.B) {
	h := http.Header{
		"Content-Type": {"application/json"}, "User-Agent": {"Go-http-client/1.1"}, "Accept-Encoding": {"gzip"},
		"Content-Length": {"123"}, "Webhook-Id": {"evt-dup"}, "Webhook-Timestamp": {"1765085000"},
		"Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}
	b.ReportAllocs()
	for b.Loop() {
		payments.KeptHeaders(h)
	}
}

// Credentials are found by the words in their names, not by a list of
// names: every header below is "[redacted]", and a header that names no
// credential is kept.
func TestKeptHeadersRedactCredentialsByRule(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	secret := []string{"X-Password", "X-Passwd", "X-Auth", "Authentication", "Proxy-Authorization", "X-Jwt",
		"Cf-Access-Jwt-Assertion", "X-Session-Id", "X-Credential", "X-Api-Key", "Set-Cookie", "X-Access-Token", "X-Client-Secret"}
	for _, name := range secret {
		h.Set(name, "hunter2-"+name)
	}
	h.Set("X-Request-Id", "req-1")
	var kept map[string][]string
	if err := json.Unmarshal(payments.KeptHeaders(h), &kept); err != nil {
		t.Fatal(err)
	}
	for _, name := range secret {
		if got := kept[name]; len(got) != 1 || got[0] != "[redacted]" {
			t.Errorf("%s kept as %q, want [redacted]", name, got)
		}
	}
	if got := kept["X-Request-Id"]; len(got) != 1 || got[0] != "req-1" {
		t.Errorf("X-Request-Id kept as %q", got)
	}
}

// A kept body is shown with its secrets cut: a signature_key to
// its first characters, a credential-named member "[redacted]" at any
// depth, whatever its value; everything else byte for byte as received,
// references named key included. Its searchable form is cut alike.
func TestKeptBodyRedactsSecrets(t *testing.T) {
	t.Parallel()
	sig := strings.Repeat("ab12", 32)
	body := `{"order_id":"ORD-1", "signature_key" : "` + sig + `","gross_amount":"150000.00",` +
		`"refunds":[{"refund_key":"rk-1","x":{"client_secret":"pi_1_secret_2","password":{"a":[1,2]},"token":7}}],"n":1.0}`
	got := string(payments.RedactedBody([]byte(body)))
	want := `{"order_id":"ORD-1", "signature_key" : "ab12ab12ab12…","gross_amount":"150000.00",` +
		`"refunds":[{"refund_key":"rk-1","x":{"client_secret":"[redacted]","password":"[redacted]","token":"[redacted]"}}],"n":1.0}`
	if got != want {
		t.Errorf("redacted:\n got %s\nwant %s", got, want)
	}
	if plain := `{"a":[1,{"b":"c"}]}`; string(payments.RedactedBody([]byte(plain))) != plain {
		t.Errorf("a body with no secret changed: %s", payments.RedactedBody([]byte(plain)))
	}
	if bad := `{"signature_key":"` + sig; string(payments.RedactedBody([]byte(bad))) != bad {
		t.Error("a body that is not JSON changed")
	}
	searchable := string(payments.SearchableBody([]byte(body)))
	if strings.Contains(searchable, sig) || strings.Contains(searchable, "pi_1_secret_2") || !strings.Contains(searchable, `"refund_key":"rk-1"`) {
		t.Errorf("searchable: %s", searchable)
	}
}
