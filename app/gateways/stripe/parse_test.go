package stripe_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/models"
)

// A body that is not JSON is invalid_payload, as the Provider contract
// says; JSON that is not a Stripe event is missing_field.
func TestStripeParseRefusesWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	p, _ := stripe.NewProvider(secret)
	for body, want := range map[string]string{
		`{"id":"evt_1","object":"event",`: models.EInvalidPayload,
		`evt_1`:                           models.EInvalidPayload,
		`[]`:                              models.EMissingField,
		`{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`: models.EMissingField,
	} {
		if _, err := p.Parse(nil, []byte(body)); models.ErrorCode(err) != want {
			t.Errorf("Parse(%s): %v, want %s", body, err, want)
		}
	}
}
