package payments

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/models"
)

// testProvider is the internal tests' gateway (the gateway packages
// import this one, so these tests cannot import them): the sandbox's
// body and key rule — the webhook-id header — without its signature.
// payment_status "void" is a notification the shop does not handle.
type testProvider struct{}

func (testProvider) Name() string { return "sandbox" }

func (testProvider) EventHeaders() []string { return []string{stdwebhooks.HeaderID} }

func (testProvider) Verify(http.Header, []byte, time.Time) error { return nil }

func (testProvider) Parse(h http.Header, body []byte) (Event, error) {
	v, err := canonjson.Decode(body)
	if err != nil {
		return Event{}, models.Errorf(models.EInvalidPayload, "the body is refused: %s", canonjson.Reason(err))
	}
	obj, _ := v.(map[string]any)
	f := Fields{Object: obj}
	ev := Event{Key: h.Get(stdwebhooks.HeaderID), Status: models.PaymentEvent(f.String("payment_status"))}
	if ev.Status == "void" {
		return Event{}, fmt.Errorf("%w: payment_status void", ErrIgnored)
	}
	ev.OrderID, ev.TransactionID = f.String("order_id"), f.String("transaction_id")
	ev.Amount, ev.Currency = f.MinorUnits("paid_amount"), f.String("currency")
	return ev, f.Err
}
