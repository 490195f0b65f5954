package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/payments"
)

// StatusClient asks the sandbox gateway's GET /sandbox/status/{order_id}:
// the last event it sent for the order, with its event id, so the answer
// has the notification's key. It sends the webhook secret as the
// basic-auth user, as a merchant sends a real gateway its secret key.
type StatusClient struct {
	BaseURL    string
	credential string
	Client     *http.Client
}

// NewStatusClient returns the status client of the sandbox gateway that
// answers at baseURL, signing with key (the first SANDBOX_WEBHOOK_SECRET).
func NewStatusClient(baseURL string, key []byte) *StatusClient {
	return &StatusClient{BaseURL: baseURL, credential: NewSender(key).Credential(), Client: httpjson.NewClient(httpjson.DefaultTimeout)}
}

// Provider implements payments.StatusClient.
func (*StatusClient) Provider() string { return Name }

// Status implements payments.StatusClient.
func (s *StatusClient) Status(ctx context.Context, orderID string) (payments.Event, bool, error) {
	code, body, err := httpjson.Get(ctx, s.Client, s.BaseURL+"/sandbox/status/"+url.PathEscape(orderID), s.credential)
	if err != nil {
		return payments.Event{}, false, err
	}
	if code == http.StatusNotFound {
		return payments.Event{}, false, nil
	}
	if code != http.StatusOK {
		return payments.Event{}, false, fmt.Errorf("sandbox status: HTTP %d", code)
	}
	var answer struct {
		EventID string          `json:"event_id"`
		Body    json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return payments.Event{}, false, fmt.Errorf("sandbox status: %w", err)
	}
	return payments.Answer(parse(answer.EventID, answer.Body))
}
