package stripe_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/sekali/sekali/app/gateways/stripe"
)

const (
	secret = "whsec_test_0123456789abcdef"
	other  = "whsec_not_ours_0123456789"
)

// now is the delivery's time in these tests: far from the wall clock, so
// a check that read the wall clock instead would be seen.
var now = time.Unix(1732960800, 0) // 2024-11-30T10:00:00Z

// signature is Stripe's v1 signature: hex HMAC-SHA256, keyed with the
// endpoint secret, of t + "." + body.
func signature(at time.Time, body []byte, secret string) string {
	return fmt.Sprintf("%x", webhook.ComputeSignature(at, body, secret))
}

func stripeSignature(header string) http.Header {
	return http.Header{"Stripe-Signature": {header}}
}

// Stripe's formula (docs.stripe.com/webhooks#verify-manually) on a known
// body, time and secret, computed independently with
// `openssl dgst -sha256 -hmac`: the Sender writes it and the Provider
// accepts it.
func TestStripeSignatureVector(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_test_webhook","object":"event"}`)
	const want = "t=1732960800,v1=c4b9495ce6b20e868b30425e67d89e0a70d7a51e5597f4cccacc445a859ace65"
	sender, err := stripe.NewSender(secret)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := sender.Sign(body, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("Stripe-Signature"); got != want {
		t.Fatalf("Stripe-Signature %s, want %s", got, want)
	}
	p, err := stripe.NewProvider(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(stripeSignature(want), body, now); err != nil {
		t.Fatalf("the vector is refused: %v", err)
	}
}

// Verify accepts a body signed with one of the endpoint secrets (several
// during a rotation, and Stripe then sends one v1 per secret) within
// Tolerance of the delivery's time, and refuses everything else.
func TestStripeVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`)
	t0 := now.Unix()
	ours := func(at time.Time) string { return signature(at, body, secret) }
	for _, tc := range []struct {
		name    string
		secrets string
		header  string // "" sends no Stripe-Signature at all
		body    string // the body delivered, when not the one signed
		ok      bool
		reason  string // a word of the refusal
	}{
		{name: "signed now", secrets: secret, header: fmt.Sprintf("t=%d,v1=%s", t0, ours(now)), ok: true},
		{name: "signed with the second secret of a rotation", secrets: other + "," + secret,
			header: fmt.Sprintf("t=%d,v1=%s", t0, ours(now)), ok: true},
		{name: "one v1 per secret, ours second", secrets: secret,
			header: fmt.Sprintf("t=%d,v1=%s,v1=%s", t0, signature(now, body, other), ours(now)), ok: true},
		{name: "a v0 beside ours is ignored", secrets: secret,
			header: fmt.Sprintf("t=%d,v1=%s,v0=%s", t0, ours(now), strings.Repeat("0", 64)), ok: true},
		{name: "exactly Tolerance old", secrets: secret,
			header: fmt.Sprintf("t=%d,v1=%s", t0-300, ours(now.Add(-stripe.Tolerance))), ok: true},
		{name: "a sender's clock a little ahead", secrets: secret,
			header: fmt.Sprintf("t=%d,v1=%s", t0+30, ours(now.Add(30*time.Second))), ok: true},

		{name: "a second past Tolerance", secrets: secret,
			header: fmt.Sprintf("t=%d,v1=%s", t0-301, ours(now.Add(-stripe.Tolerance-time.Second))), reason: "too old"},
		{name: "signed with another secret", secrets: secret,
			header: fmt.Sprintf("t=%d,v1=%s", t0, signature(now, body, other)), reason: "matches"},
		{name: "the body changed after signing", secrets: secret,
			header: fmt.Sprintf("t=%d,v1=%s", t0, ours(now)), body: `{"id":"evt_2"}`, reason: "matches"},
		{name: "the timestamp changed after signing", secrets: secret,
			header: fmt.Sprintf("t=%d,v1=%s", t0+1, ours(now)), reason: "matches"},
		{name: "a v0 signature only", secrets: secret,
			header: fmt.Sprintf("t=%d,v0=%s", t0, ours(now)), reason: "matches"},
		{name: "an empty v1", secrets: secret, header: fmt.Sprintf("t=%d,v1=", t0), reason: "matches"},
		{name: "no timestamp", secrets: secret, header: "v1=" + ours(now), reason: "timestamp"},
		{name: "a timestamp that is not a number", secrets: secret, header: "t=soon,v1=" + ours(now), reason: "timestamp"},
		// A replayed old signature with a fresh t= in front of its own.
		{name: "two timestamps", secrets: secret,
			header: fmt.Sprintf("t=%d,t=%d,v1=%s", t0, t0-3600, ours(now.Add(-time.Hour))), reason: "timestamp"},
		{name: "no header", secrets: secret, reason: "no Stripe-Signature"},
		{name: "a header that is not Stripe's", secrets: secret, header: "sha256=" + ours(now), reason: "timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := stripe.NewProvider(tc.secrets)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			if tc.header != "" {
				h = stripeSignature(tc.header)
			}
			delivered := body
			if tc.body != "" {
				delivered = []byte(tc.body)
			}
			err = p.Verify(h, delivered, now)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && err == nil:
				t.Fatal("accepted")
			case !tc.ok && !strings.Contains(err.Error(), tc.reason):
				t.Fatalf("refused with %q, want a refusal about %q", err, tc.reason)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Fatalf("the refusal %q repeats the secret", err)
			}
		})
	}
}

// STRIPE_WEBHOOK_SECRET is one or more "whsec_…" secrets, comma-separated.
func TestStripeParseSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string // nil: refused
	}{
		{secret, []string{secret}},
		{" " + other + " , " + secret + " ", []string{other, secret}},
		{"", nil},
		{"sk_test_0123456789", nil},     // an API key, not an endpoint secret
		{"whsec_", nil},                 // too short
		{secret + ",", nil},             // an empty second secret
		{secret + ",whsec_abc", nil},    // one good, one too short
		{"WHSEC_0123456789abcdef", nil}, // the prefix is lower case
		{"whsec_0123456789abcdef", []string{"whsec_0123456789abcdef"}},
	} {
		got, err := stripe.ParseSecrets(tc.in)
		if (err == nil) != (tc.want != nil) || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ParseSecrets(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if _, err := stripe.NewProvider(tc.in); (err == nil) != (tc.want != nil) {
			t.Errorf("NewProvider(%q): %v", tc.in, err)
		}
		if _, err := stripe.NewSender(tc.in); (err == nil) != (tc.want != nil) {
			t.Errorf("NewSender(%q): %v", tc.in, err)
		}
	}
}
