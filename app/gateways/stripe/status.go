package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sekali/sekali/app/gateways/httpjson"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	stripego "github.com/stripe/stripe-go/v82"
)

// StatusClient asks Stripe's API. Stripe has no lookup by order: the
// order's PaymentIntent is found by searching its metadata.order_id
// (GET /v1/payment_intents/search), and a succeeded one's event — the
// payment_intent.succeeded that the notification carried, with its event
// id, so with the notification's key — in the events since the
// PaymentIntent was created (GET /v1/events, at most MaxPages pages of
// 100). If the event is not among them, the PaymentIntent itself is the
// answer, keyed {pi}:succeeded: a key of its own, so a notification of the
// same payment afterwards finds the order paid by the same charge and is
// stale — still one effect. Without a succeeded PaymentIntent of the
// order, a paid Checkout Session of it is looked for (paidSession): a
// Checkout payment whose PaymentIntent carries no metadata.order_id.
type StatusClient struct {
	BaseURL   string // https://api.stripe.com, or a test server
	MaxPages  int
	secretKey string
	Client    *http.Client
}

// CheckSecretKey checks the form of a secret or restricted API key
// (STRIPE_SECRET_KEY: "sk_…" or "rk_…").
func CheckSecretKey(secretKey string) error {
	if !strings.HasPrefix(secretKey, "sk_") && !strings.HasPrefix(secretKey, "rk_") {
		return errors.New(`a Stripe API key starts with "sk_" or "rk_"`)
	}
	return nil
}

// NewStatusClient returns the status client for a Stripe secret or
// restricted API key, with read access to PaymentIntents and events.
func NewStatusClient(secretKey, baseURL string) (*StatusClient, error) {
	if err := CheckSecretKey(secretKey); err != nil {
		return nil, err
	}
	if baseURL == "" {
		baseURL = "https://api.stripe.com"
	}
	return &StatusClient{BaseURL: baseURL, MaxPages: 5, secretKey: secretKey, Client: httpjson.NewClient(httpjson.DefaultTimeout)}, nil
}

// Provider implements payments.StatusClient.
func (*StatusClient) Provider() string { return Name }

// list is a page of a Stripe list or search.
type list struct {
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

func (c *StatusClient) list(ctx context.Context, path string, q url.Values) (list, error) {
	var page list
	code, body, err := httpjson.Get(ctx, c.Client, c.BaseURL+path+"?"+q.Encode(), c.secretKey)
	if err != nil {
		return page, err
	}
	if code != http.StatusOK {
		return page, fmt.Errorf("stripe %s: HTTP %d", path, code)
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return page, fmt.Errorf("stripe %s: %w", path, err)
	}
	return page, nil
}

// Status implements payments.StatusClient.
func (c *StatusClient) Status(ctx context.Context, orderID string) (payments.Event, bool, error) {
	query := fmt.Sprintf("metadata['order_id']:'%s'", strings.ReplaceAll(orderID, "'", `\'`))
	intents, err := c.list(ctx, "/v1/payment_intents/search", url.Values{"query": {query}, "limit": {"10"}})
	if err != nil {
		return payments.Event{}, false, err
	}
	var pi struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Created int64  `json:"created"`
	}
	var succeeded json.RawMessage
	for _, raw := range intents.Data {
		if json.Unmarshal(raw, &pi) == nil && pi.Status == "succeeded" {
			succeeded = raw
			break
		}
	}
	if succeeded == nil {
		return c.paidSession(ctx, orderID)
	}
	q := url.Values{"type": {"payment_intent.succeeded"}, "created[gte]": {fmt.Sprint(pi.Created)}, "limit": {"100"}}
	for range max(c.MaxPages, 1) {
		page, err := c.list(ctx, "/v1/events", q)
		if err != nil {
			return payments.Event{}, false, err
		}
		for _, raw := range page.Data {
			var e struct {
				ID   string `json:"id"`
				Data struct {
					Object struct {
						ID string `json:"id"`
					} `json:"object"`
				} `json:"data"`
			}
			if json.Unmarshal(raw, &e) == nil && e.Data.Object.ID == pi.ID {
				return payments.Answer(parse(raw))
			}
			q.Set("starting_after", e.ID)
		}
		if !page.HasMore {
			break
		}
	}
	event, _ := json.Marshal(map[string]any{"id": pi.ID + ":succeeded", "type": "payment_intent.succeeded",
		"data": map[string]any{"object": succeeded}})
	return payments.Answer(parse(event))
}

// paidSession looks for a paid Checkout Session of the order. Checkout
// Sessions cannot be searched, nor listed by client_reference_id or
// metadata, so the sessions created since the order was (its id says
// when) are read, newest first, at most MaxPages pages of 100 (GET
// /v1/checkout/sessions). A paid one answers as its
// checkout.session.completed would, keyed {session}:paid — a key of its
// own, as the PaymentIntent's fallback: a notification of the same
// payment afterwards names the same charge and is stale.
func (c *StatusClient) paidSession(ctx context.Context, orderID string) (payments.Event, bool, error) {
	q := url.Values{"limit": {"100"}}
	if t, ok := models.OrderIDTime(orderID); ok {
		q.Set("created[gte]", fmt.Sprint(t.Add(-time.Minute).Unix())) // a minute for clocks that differ
	}
	for range max(c.MaxPages, 1) {
		page, err := c.list(ctx, "/v1/checkout/sessions", q)
		if err != nil {
			return payments.Event{}, false, err
		}
		for _, raw := range page.Data {
			var cs stripego.CheckoutSession
			if json.Unmarshal(raw, &cs) != nil {
				continue
			}
			if sessionOrder(&cs) == orderID && cs.PaymentStatus == stripego.CheckoutSessionPaymentStatusPaid {
				event, _ := json.Marshal(map[string]any{"id": cs.ID + ":paid", "type": "checkout.session.completed",
					"data": map[string]any{"object": raw}})
				return payments.Answer(parse(event))
			}
			q.Set("starting_after", cs.ID)
		}
		if !page.HasMore {
			break
		}
	}
	return payments.Event{}, false, nil // nothing paid: nothing to make up for
}
