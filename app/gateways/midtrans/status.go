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
	return readStatus(code, body)
}

// readStatus reads an answer of the status API. Midtrans answers most
// errors with HTTP 200 and the error in the body's status_code (a "500"
// when it is in trouble, a "401" for a wrong key): only a body that is a
// transaction — a transaction_status, under a status_code Midtrans gives
// transactions — is one; a "404" (or an HTTP 404) is a transaction
// Midtrans does not know; anything else is an error, so that the caller
// asks again later instead of taking the error for "unknown".
func readStatus(code int, body []byte) (payments.Event, bool, error) {
	var head struct {
		StatusCode        string `json:"status_code"`
		StatusMessage     string `json:"status_message"`
		TransactionStatus string `json:"transaction_status"`
	}
	decodeErr := json.Unmarshal(body, &head)
	switch {
	case code == http.StatusNotFound || head.StatusCode == "404":
		// Unknown (for a Snap order: no payment method chosen yet).
		return payments.Event{}, false, nil
	case code != http.StatusOK:
		return payments.Event{}, false, fmt.Errorf("midtrans status: HTTP %d", code)
	case decodeErr != nil:
		return payments.Event{}, false, fmt.Errorf("midtrans status: the answer is not Midtrans's: %v", decodeErr)
	case !transactionCode(head.StatusCode) || head.TransactionStatus == "":
		return payments.Event{}, false, fmt.Errorf("midtrans status: status_code %q: %.200s", head.StatusCode, head.StatusMessage)
	}
	return payments.Answer(parse(body))
}

// transactionCode reports whether a status_code is one Midtrans gives a
// transaction: 200 (captured, settled, refunded), 201 (pending, in
// challenge), 202 (denied, cancelled) or 407 (expired)
// (docs.midtrans.com/reference/code-statuses). Every other code is an
// error of the request or of Midtrans.
func transactionCode(code string) bool {
	switch code {
	case "200", "201", "202", "407":
		return true
	}
	return false
}
