package xendit_test

import (
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/xendit"
)

// New builds the calling side (status, invoices, refunds) from
// XENDIT_SECRET_KEY, and the receiving side from XENDIT_CALLBACK_TOKEN
// with it: the token alone is refused, since its paid callbacks are
// confirmed with the API; PAYMENT_GATEWAY=xendit needs the key; a setting
// of the wrong form is named, never repeated, and no secret is logged.
func TestXenditNew(t *testing.T) {
	t.Parallel()
	gatewaytest.Configure(t, xendit.New, []gatewaytest.Setting{
		{Name: "nothing set"},
		{Name: "the callback token alone", Vars: map[string]string{"XENDIT_CALLBACK_TOKEN": token}, WrongVariable: "XENDIT_CALLBACK_TOKEN: needs XENDIT_SECRET_KEY"},
		{Name: "the API key", Vars: map[string]string{"XENDIT_SECRET_KEY": apiKey}, Asks: true},
		{Name: "both", Vars: map[string]string{"XENDIT_CALLBACK_TOKEN": token, "XENDIT_SECRET_KEY": apiKey}, Receives: true, Asks: true},
		{Name: "paying with its key", Vars: map[string]string{"XENDIT_SECRET_KEY": apiKey, "XENDIT_API_URL": "http://127.0.0.1:8080/sandbox/xendit"}, Pays: "xendit", Asks: true},
		{Name: "paying without its key", Vars: map[string]string{"XENDIT_CALLBACK_TOKEN": token}, Pays: "xendit", WrongVariable: "PAYMENT_GATEWAY: xendit needs XENDIT_SECRET_KEY"},
		{Name: "a short callback token", Vars: map[string]string{"XENDIT_CALLBACK_TOKEN": "xnd-short"}, WrongVariable: "XENDIT_CALLBACK_TOKEN"},
		{Name: "the callback token given as the API key", Vars: map[string]string{"XENDIT_SECRET_KEY": token}, WrongVariable: "XENDIT_SECRET_KEY"},
		{Name: "an API URL that is not one", Vars: map[string]string{"XENDIT_SECRET_KEY": apiKey, "XENDIT_API_URL": "xendit.co"}, WrongVariable: "XENDIT_API_URL"},
	}, token, apiKey, "xnd-short")
}
