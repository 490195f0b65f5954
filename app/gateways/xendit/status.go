package xendit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/payments"
)

// StatusClient asks Xendit's invoice API: GET /v2/invoices?external_id=
// for the status poll (Status), GET /v2/invoices/{id} for the provider's
// confirmations (Invoice). An invoice parses to the callback's event,
// keyed id:status (Xendit's callbacks without a webhook-id header have
// the same key).
type StatusClient struct {
	BaseURL   string // https://api.xendit.co, or a test server
	secretKey string
	Client    *http.Client
}

// CheckSecretKey checks the form of a secret API key (XENDIT_SECRET_KEY).
func CheckSecretKey(secretKey string) error {
	if len(secretKey) < 8 || secretKey[:4] != "xnd_" {
		return errors.New(`a Xendit secret key starts with "xnd_"`)
	}
	return nil
}

// NewStatusClient returns the status client for a Xendit secret API key
// ("xnd_…").
func NewStatusClient(secretKey, baseURL string) (*StatusClient, error) {
	if err := CheckSecretKey(secretKey); err != nil {
		return nil, err
	}
	if baseURL == "" {
		baseURL = DefaultAPIURL
	}
	return &StatusClient{BaseURL: baseURL, secretKey: secretKey, Client: httpjson.NewClient(httpjson.DefaultTimeout)}, nil
}

// Provider implements payments.StatusClient.
func (*StatusClient) Provider() string { return Name }

// Status implements payments.StatusClient: of the order's invoices, a
// paid one if any, else the first one Xendit lists.
func (c *StatusClient) Status(ctx context.Context, orderID string) (payments.Event, bool, error) {
	code, body, err := httpjson.Get(ctx, c.Client, c.BaseURL+"/v2/invoices?external_id="+url.QueryEscape(orderID), c.secretKey)
	if err != nil {
		return payments.Event{}, false, err
	}
	if code == http.StatusNotFound {
		return payments.Event{}, false, nil
	}
	if code != http.StatusOK {
		return payments.Event{}, false, fmt.Errorf("xendit status: HTTP %d", code)
	}
	var invoices []json.RawMessage
	if err := json.Unmarshal(body, &invoices); err != nil {
		return payments.Event{}, false, fmt.Errorf("xendit status: %w", err)
	}
	var chosen json.RawMessage
	for _, raw := range invoices {
		var inv struct{ Status string }
		json.Unmarshal(raw, &inv)
		if chosen == nil || inv.Status == "PAID" || inv.Status == "SETTLED" {
			chosen = raw
		}
		if inv.Status == "PAID" || inv.Status == "SETTLED" {
			break
		}
	}
	if chosen == nil {
		return payments.Event{}, false, nil
	}
	return readInvoice(chosen)
}

// Invoice asks GET /v2/invoices/{id}: the invoice as its callback would
// state it; found is false when Xendit answers that it has no such
// invoice (404 INVOICE_NOT_FOUND_ERROR, xendit-go's invoice API). Any
// other answer that is not an invoice — another 404 included, as from a
// wrong XENDIT_API_URL — is an error, so that the caller asks again
// later instead of taking it for "unknown".
func (c *StatusClient) Invoice(ctx context.Context, id string) (payments.Event, bool, error) {
	code, body, err := httpjson.Get(ctx, c.Client, c.BaseURL+"/v2/invoices/"+url.PathEscape(id), c.secretKey)
	if err != nil {
		return payments.Event{}, false, err
	}
	var problem struct {
		ErrorCode string `json:"error_code"`
	}
	switch {
	case code == http.StatusNotFound && json.Unmarshal(body, &problem) == nil && problem.ErrorCode == "INVOICE_NOT_FOUND_ERROR":
		return payments.Event{}, false, nil
	case code != http.StatusOK:
		return payments.Event{}, false, fmt.Errorf("xendit invoice: HTTP %d", code)
	}
	return readInvoice(body)
}

// readInvoice reads one invoice of the invoice API. A status Sekali does
// not act on is nothing found.
func readInvoice(raw []byte) (payments.Event, bool, error) {
	v, err := canonjson.Decode(raw)
	if err != nil {
		return payments.Event{}, false, fmt.Errorf("xendit invoice: %w", err)
	}
	return payments.Answer(parse("", v))
}
