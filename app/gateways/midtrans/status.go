package midtrans

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/payments"
)

// StatusClient asks Midtrans's GET /v2/{id}/status, where id is an order
// id or a transaction id. The answer has the notification's fields, so it
// parses to the notification's event and key
// (transaction_id:transaction_status[:fraud_status]).
type StatusClient struct {
	BaseURL   string // https://api.midtrans.com, https://api.sandbox.midtrans.com, or a test server
	serverKey string
	Client    *http.Client
}

// APIURL is Midtrans's API for the server key: the sandbox's for an "SB-"
// key.
func APIURL(serverKey string) string {
	if len(serverKey) > 3 && serverKey[:3] == "SB-" {
		return "https://api.sandbox.midtrans.com"
	}
	return "https://api.midtrans.com"
}

// NewStatusClient returns the status client for the server key; the API
// is APIURL(serverKey) unless baseURL says otherwise.
func NewStatusClient(serverKey, baseURL string) (*StatusClient, error) {
	if err := CheckServerKey(serverKey); err != nil {
		return nil, err
	}
	if baseURL == "" {
		baseURL = APIURL(serverKey)
	}
	return &StatusClient{BaseURL: baseURL, serverKey: serverKey, Client: httpjson.NewClient(httpjson.DefaultTimeout)}, nil
}

// Provider implements payments.StatusClient.
func (*StatusClient) Provider() string { return Name }

// Status implements payments.StatusClient: the latest transaction of
// ref, Midtrans's order_id — the order id, or the {order}~{n} key its
// Snap page was made under.
func (c *StatusClient) Status(ctx context.Context, ref string) (payments.Event, bool, error) {
	return c.get(ctx, ref)
}

// Transaction is what Midtrans says of one transaction: the Challenge
// Response of docs.midtrans.com/reference/handle-notifications, which the
// midtrans-php and midtrans-nodejs-client notification helpers make with
// the notification's transaction_id. found is false when Midtrans does
// not know it.
func (c *StatusClient) Transaction(ctx context.Context, transactionID string) (payments.Event, bool, error) {
	return c.get(ctx, transactionID)
}

func (c *StatusClient) get(ctx context.Context, id string) (payments.Event, bool, error) {
	code, body, err := httpjson.Get(ctx, c.Client, c.BaseURL+"/v2/"+url.PathEscape(id)+"/status", c.serverKey)
	if err != nil {
		return payments.Event{}, false, err
	}
	var head struct {
		StatusCode string `json:"status_code"`
	}
	json.Unmarshal(body, &head)
	// Midtrans answers an unknown id with HTTP 200 and status_code 404
	// (for a Snap order: no payment method chosen yet).
	if code == http.StatusNotFound || head.StatusCode == "404" {
		return payments.Event{}, false, nil
	}
	if code != http.StatusOK {
		return payments.Event{}, false, fmt.Errorf("midtrans status: HTTP %d", code)
	}
	return payments.Answer(parse(body))
}
