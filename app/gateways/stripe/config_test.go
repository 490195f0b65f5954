package stripe_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
)

// New builds the receiving side from STRIPE_WEBHOOK_SECRET and the
// calling side (status, pages, refunds) from STRIPE_SECRET_KEY, each only
// when it is set; PAYMENT_GATEWAY=stripe needs the key; a setting of the
// wrong form is named, never repeated, and no secret is logged.
func TestStripeNew(t *testing.T) {
	t.Parallel()
	gatewaytest.Configure(t, stripe.New, []gatewaytest.Setting{
		{Name: "nothing set"},
		{Name: "the endpoint secret", Vars: map[string]string{"STRIPE_WEBHOOK_SECRET": secret}, Receives: true},
		{Name: "the API key", Vars: map[string]string{"STRIPE_SECRET_KEY": apiKey}, Asks: true},
		{Name: "both", Vars: map[string]string{"STRIPE_WEBHOOK_SECRET": secret, "STRIPE_SECRET_KEY": apiKey}, Receives: true, Asks: true},
		{Name: "paying with its key", Vars: map[string]string{"STRIPE_SECRET_KEY": apiKey}, Pays: "stripe", Asks: true},
		{Name: "paying without its key", Vars: map[string]string{"STRIPE_WEBHOOK_SECRET": secret}, Pays: "stripe", WrongVariable: "PAYMENT_GATEWAY: stripe needs STRIPE_SECRET_KEY"},
		{Name: "an API key given as the endpoint secret", Vars: map[string]string{"STRIPE_WEBHOOK_SECRET": apiKey}, WrongVariable: "STRIPE_WEBHOOK_SECRET"},
		{Name: "an endpoint secret given as the API key", Vars: map[string]string{"STRIPE_SECRET_KEY": secret}, WrongVariable: "STRIPE_SECRET_KEY"},
		{Name: "an API URL that is not one", Vars: map[string]string{"STRIPE_SECRET_KEY": apiKey, "STRIPE_API_URL": "ftp://api"}, WrongVariable: "STRIPE_API_URL"},
	}, secret, apiKey)
}
