package gatewaytest

import (
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// ParseCase is a gateway's Parse under FuzzParse.
type ParseCase struct {
	Provider payments.Provider
	// KeyIsWebhookID says an event's key is the webhook-id header when
	// one comes (the sandbox's and others'); other gateways name the
	// event in the body.
	KeyIsWebhookID bool
	// Check, when set, checks what only this gateway promises of an
	// event it accepted from body under header h.
	Check func(t *testing.T, h http.Header, body []byte, ev payments.Event)
	// Refused, when set, checks what only this gateway promises of how
	// it refuses body (err is not payments.ErrIgnored).
	Refused func(t *testing.T, body []byte, err error)
}

// FuzzParse fuzzes c.Provider's Parse from seeds (bodies, each tried
// with and without a webhook-id header). Whatever comes, Parse must not
// panic, and must
//   - refuse it with invalid_payload, missing_field or (a malformed
//     amount) invalid_request, or ignore it
//     (payments.ErrIgnored), or
//   - return an event the pipeline can apply: a key and a charge of clean text, a
//     status it knows, a currency it knows, no negative amount, at most
//     payments.MaxRefunds refunds each with a key and a positive amount,
//     and no fingerprint (the pipeline computes it, once, for every
//     gateway);
//
// and a body canonjson accepts must parse as its canonical spelling does:
// two bodies of one fingerprint are one event, or one refusal.
func FuzzParse(f *testing.F, c ParseCase, seeds ...string) {
	for i, s := range seeds {
		f.Add("", []byte(s))
		f.Add("msg_seed_"+string(rune('a'+i%26)), []byte(s))
	}
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		var h http.Header // a nil header must work too
		if id != "" {
			h = http.Header{}
			h.Set(stdwebhooks.HeaderID, id)
		}
		ev, err := c.Provider.Parse(h, body)
		if err != nil {
			if code := models.ErrorCode(err); !errors.Is(err, payments.ErrIgnored) &&
				code != models.EInvalidPayload && code != models.EMissingField && code != models.EInvalid {
				t.Fatalf("Parse error %v has code %q, want invalid_payload, missing_field or invalid_request, or ignored", err, code)
			}
			if c.Refused != nil && !errors.Is(err, payments.ErrIgnored) {
				c.Refused(t, body, err)
			}
		} else {
			acceptable(t, c, h, body, ev)
		}

		canonical, canonErr := canonjson.Canonicalize(body)
		if canonErr != nil {
			return
		}
		ev2, err2 := c.Provider.Parse(h, canonical)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("Parse(body) error %v, Parse(canonical) error %v\nbody:      %q\ncanonical: %q", err, err2, body, canonical)
		}
		if err == nil && !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("Parse(body) = %+v\nParse(canonical) = %+v\nbody:      %q\ncanonical: %q", ev, ev2, body, canonical)
		}
	})
}

// acceptable fails t unless ev is an event the pipeline can apply.
func acceptable(t *testing.T, c ParseCase, h http.Header, body []byte, ev payments.Event) {
	t.Helper()
	switch {
	case ev.Key == "" || len(ev.Key) > payments.MaxFieldLength || !models.CleanText(ev.Key):
		t.Fatalf("Parse accepted the key %q", ev.Key)
	case c.KeyIsWebhookID && h.Get(stdwebhooks.HeaderID) != "" && ev.Key != h.Get(stdwebhooks.HeaderID):
		t.Fatalf("Key = %q, want the webhook-id %q", ev.Key, h.Get(stdwebhooks.HeaderID))
	case ev.TransactionID == "" || !models.CleanText(ev.TransactionID) || !models.CleanText(ev.OrderID):
		t.Fatalf("Parse accepted the charge %q of order %q", ev.TransactionID, ev.OrderID)
	case !ev.Status.Valid():
		t.Fatalf("Parse accepted the status %q", ev.Status)
	case ev.Amount < 0:
		t.Fatalf("Parse accepted the amount %d", ev.Amount)
	case !models.ValidCurrency(ev.Currency):
		t.Fatalf("Parse accepted the currency %q", ev.Currency)
	case len(ev.Refunds) > payments.MaxRefunds:
		t.Fatalf("Parse accepted %d refunds, more than %d", len(ev.Refunds), payments.MaxRefunds)
	case ev.Fingerprint != "":
		t.Fatalf("Parse set Fingerprint %q: the pipeline computes it, once, for every gateway", ev.Fingerprint)
	}
	for _, r := range ev.Refunds {
		if r.Key == "" || !models.CleanText(r.Key) || r.Amount < 1 {
			t.Fatalf("Parse accepted the refund %+v", r)
		}
	}
	if c.Check != nil {
		c.Check(t, h, body, ev)
	}
}
