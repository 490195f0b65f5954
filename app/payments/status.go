package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// Gateways drop notifications too. A StatusClient asks a gateway what
// became of an order's payment, for the orders whose notification has
// not come. Its answer is the Event the gateway's notification of the
// same fact gives — the same idempotency key where the gateway's rule
// allows it — and it goes through the same reserve-and-apply
// transaction, so a poll and a push of one fact converge on one effect,
// whichever comes first (see sameFact).
type StatusClient interface {
	// Provider is the provider the answers are recorded under.
	Provider() string
	// Status returns the latest fact the gateway has about orderID's
	// payment; found is false when it has none.
	Status(ctx context.Context, orderID string) (ev Event, found bool, err error)
}

// maxStatusBody bounds a status answer read.
const maxStatusBody = 1 << 20

// Poll asks clients about the pending orders that expire within the next
// `within` (their stock is about to be released, and a payment whose
// notification was lost would then need a refund) and applies what they
// answer. It returns how many answers changed something.
func (s *Service) Poll(ctx context.Context, clients []StatusClient, within time.Duration) (applied int, err error) {
	if len(clients) == 0 {
		return 0, nil
	}
	now := s.now().UTC()
	var ids []string
	err = s.db.WithContext(ctx).Model(&models.Order{}).
		Where("status = ? AND expires_at < ?", models.OrderPending, now.Add(within)).
		Order("expires_at").Limit(200).Pluck("id", &ids).Error
	if err != nil {
		return 0, fmt.Errorf("payments.Poll: %w", store.Classify(err))
	}
	var errs []error
	for _, id := range ids {
		for _, c := range clients {
			ev, found, err := c.Status(ctx, id)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", c.Provider(), id, err))
				continue
			}
			if !found {
				continue
			}
			out := s.ApplyPolled(ctx, c.Provider(), ev)
			if out.Result == models.ResultProcessed {
				applied++
			}
		}
	}
	if len(errs) > 0 {
		return applied, fmt.Errorf("payments.Poll: %d status requests failed; first: %w", len(errs), errs[0])
	}
	return applied, nil
}

// ApplyPolled applies a fact learnt by a status poll as a delivery of its
// notification would be applied. Its fingerprint marks it as polled.
func (s *Service) ApplyPolled(ctx context.Context, provider string, ev Event) Outcome {
	b, _ := json.Marshal([]any{ev.OrderID, ev.TransactionID, ev.Status, ev.Amount, ev.Currency})
	ev.Fingerprint = polledPrefix + canonjson.Hash(b)
	out, err := s.apply(ctx, provider, ev, Delivery{Provider: provider, RemoteAddr: "status poll", RequestID: "poll"})
	out.Provider, out.Key, out.OrderID = provider, ev.Key, ev.OrderID
	if err != nil {
		s.log.ErrorContext(ctx, "status poll could not be applied", "provider", provider, "idempotency_key", ev.Key,
			"order_id", ev.OrderID, "error", err)
		return Outcome{Result: models.ResultError}
	}
	s.observe(ctx, out, ev, "poll", 0)
	return out
}

// getJSON GETs url with basic auth and reads the answer.
func getJSON(ctx context.Context, client *http.Client, u, user string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(user, "")
	req.Header.Set("Accept", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxStatusBody))
	return res.StatusCode, b, err
}

// MidtransStatus asks Midtrans's GET /v2/{order_id}/status: the answer has
// the notification's fields, so it parses to the notification's event and
// key (transaction_id:transaction_status[:fraud_status]).
type MidtransStatus struct {
	BaseURL string // https://api.midtrans.com, https://api.sandbox.midtrans.com, or a test server
	adapter *Midtrans
	Client  *http.Client
}

// NewMidtransStatus returns the status client for the server key; the API
// is the sandbox's for an "SB-" key unless baseURL says otherwise.
func NewMidtransStatus(serverKey, baseURL string) (*MidtransStatus, error) {
	m, err := NewMidtrans(serverKey)
	if err != nil {
		return nil, err
	}
	if baseURL == "" {
		baseURL = "https://api.midtrans.com"
		if serverKey[:3] == "SB-" {
			baseURL = "https://api.sandbox.midtrans.com"
		}
	}
	return &MidtransStatus{BaseURL: baseURL, adapter: m, Client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// Provider implements StatusClient.
func (*MidtransStatus) Provider() string { return MidtransName }

// Status implements StatusClient.
func (m *MidtransStatus) Status(ctx context.Context, orderID string) (Event, bool, error) {
	code, body, err := getJSON(ctx, m.Client, m.BaseURL+"/v2/"+url.PathEscape(orderID)+"/status", m.adapter.serverKey)
	if err != nil {
		return Event{}, false, err
	}
	var head struct {
		StatusCode string `json:"status_code"`
	}
	json.Unmarshal(body, &head)
	// Midtrans answers an unknown order with HTTP 200 and status_code 404.
	if code == http.StatusNotFound || head.StatusCode == "404" {
		return Event{}, false, nil
	}
	if code != http.StatusOK {
		return Event{}, false, fmt.Errorf("midtrans status: HTTP %d", code)
	}
	ev, err := m.adapter.Parse(nil, body)
	if errors.Is(err, ErrIgnored) {
		return Event{}, false, nil // a state the shop does not act on
	}
	if err != nil {
		return Event{}, false, err
	}
	return ev, true, nil
}

// XenditStatus asks Xendit's GET /v2/invoices?external_id=: the order's
// invoice parses to the callback's event, keyed id:status (Xendit's
// callbacks without a webhook-id header have the same key).
type XenditStatus struct {
	BaseURL   string // https://api.xendit.co, or a test server
	secretKey string
	Client    *http.Client
}

// NewXenditStatus returns the status client for a Xendit secret API key
// (XENDIT_SECRET_KEY, "xnd_…").
func NewXenditStatus(secretKey, baseURL string) (*XenditStatus, error) {
	if len(secretKey) < 8 || secretKey[:4] != "xnd_" {
		return nil, fmt.Errorf(`a Xendit secret key starts with "xnd_"`)
	}
	if baseURL == "" {
		baseURL = "https://api.xendit.co"
	}
	return &XenditStatus{BaseURL: baseURL, secretKey: secretKey, Client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// Provider implements StatusClient.
func (*XenditStatus) Provider() string { return XenditName }

// Status implements StatusClient: of the order's invoices, a paid one if
// any, else the first one Xendit lists.
func (x *XenditStatus) Status(ctx context.Context, orderID string) (Event, bool, error) {
	code, body, err := getJSON(ctx, x.Client, x.BaseURL+"/v2/invoices?external_id="+url.QueryEscape(orderID), x.secretKey)
	if err != nil {
		return Event{}, false, err
	}
	if code == http.StatusNotFound {
		return Event{}, false, nil
	}
	if code != http.StatusOK {
		return Event{}, false, fmt.Errorf("xendit status: HTTP %d", code)
	}
	var invoices []json.RawMessage
	if err := json.Unmarshal(body, &invoices); err != nil {
		return Event{}, false, fmt.Errorf("xendit status: %w", err)
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
		return Event{}, false, nil
	}
	ev, err := (&Xendit{}).Parse(http.Header{}, chosen)
	if errors.Is(err, ErrIgnored) {
		return Event{}, false, nil // a state the shop does not act on
	}
	if err != nil {
		return Event{}, false, err
	}
	return ev, true, nil
}

// SandboxStatus asks the sandbox gateway's GET /sandbox/status/{order_id}:
// the last event it sent for the order, with its event id, so the answer
// has the notification's key.
type SandboxStatus struct {
	BaseURL string
	Client  *http.Client
}

// Provider implements StatusClient.
func (*SandboxStatus) Provider() string { return SandboxName }

// Status implements StatusClient.
func (s *SandboxStatus) Status(ctx context.Context, orderID string) (Event, bool, error) {
	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	code, body, err := getJSON(ctx, client, s.BaseURL+"/sandbox/status/"+url.PathEscape(orderID), "")
	if err != nil {
		return Event{}, false, err
	}
	if code == http.StatusNotFound {
		return Event{}, false, nil
	}
	if code != http.StatusOK {
		return Event{}, false, fmt.Errorf("sandbox status: HTTP %d", code)
	}
	var answer struct {
		EventID string          `json:"event_id"`
		Body    json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return Event{}, false, fmt.Errorf("sandbox status: %w", err)
	}
	ev, err := (&Sandbox{}).Parse(http.Header{"Webhook-Id": {answer.EventID}}, answer.Body)
	if errors.Is(err, ErrIgnored) {
		return Event{}, false, nil // a state the shop does not act on
	}
	if err != nil {
		return Event{}, false, err
	}
	return ev, true, nil
}

// StripeStatus asks Stripe's API. Stripe has no lookup by order: the
// order's PaymentIntent is found by searching its metadata.order_id
// (GET /v1/payment_intents/search), and a succeeded one's event — the
// payment_intent.succeeded that the notification carried, with its event
// id, so with the notification's key — in the events since the
// PaymentIntent was created (GET /v1/events, at most MaxPages pages of
// 100). If the event is not among them, the PaymentIntent itself is the
// answer, keyed {pi}:succeeded: a key of its own, so a notification of the
// same payment afterwards finds the order paid by the same charge and is
// stale — still one effect. Orders paid through Checkout without
// metadata.order_id on the PaymentIntent are not found.
type StripeStatus struct {
	BaseURL   string // https://api.stripe.com, or a test server
	MaxPages  int
	secretKey string
	Client    *http.Client
}

// NewStripeStatus returns the status client for a Stripe secret or
// restricted API key (STRIPE_SECRET_KEY: "sk_…" or "rk_…", with read
// access to PaymentIntents and events).
func NewStripeStatus(secretKey, baseURL string) (*StripeStatus, error) {
	if !strings.HasPrefix(secretKey, "sk_") && !strings.HasPrefix(secretKey, "rk_") {
		return nil, errors.New(`a Stripe API key starts with "sk_" or "rk_"`)
	}
	if baseURL == "" {
		baseURL = "https://api.stripe.com"
	}
	return &StripeStatus{BaseURL: baseURL, MaxPages: 5, secretKey: secretKey, Client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// Provider implements StatusClient.
func (*StripeStatus) Provider() string { return StripeName }

// stripeList is a page of a Stripe list or search.
type stripeList struct {
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

func (s *StripeStatus) list(ctx context.Context, path string, q url.Values) (stripeList, error) {
	var page stripeList
	code, body, err := getJSON(ctx, s.Client, s.BaseURL+path+"?"+q.Encode(), s.secretKey)
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

// Status implements StatusClient.
func (s *StripeStatus) Status(ctx context.Context, orderID string) (Event, bool, error) {
	query := fmt.Sprintf("metadata['order_id']:'%s'", strings.ReplaceAll(orderID, "'", `\'`))
	intents, err := s.list(ctx, "/v1/payment_intents/search", url.Values{"query": {query}, "limit": {"10"}})
	if err != nil {
		return Event{}, false, err
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
		return Event{}, false, nil // nothing paid: nothing to make up for
	}
	q := url.Values{"type": {"payment_intent.succeeded"}, "created[gte]": {fmt.Sprint(pi.Created)}, "limit": {"100"}}
	for range max(s.MaxPages, 1) {
		page, err := s.list(ctx, "/v1/events", q)
		if err != nil {
			return Event{}, false, err
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
				return s.parse(raw)
			}
			q.Set("starting_after", e.ID)
		}
		if !page.HasMore {
			break
		}
	}
	event, _ := json.Marshal(map[string]any{"id": pi.ID + ":succeeded", "type": "payment_intent.succeeded",
		"data": map[string]any{"object": succeeded}})
	return s.parse(event)
}

func (*StripeStatus) parse(event []byte) (Event, bool, error) {
	ev, err := (&Stripe{}).Parse(nil, event)
	if errors.Is(err, ErrIgnored) {
		return Event{}, false, nil
	}
	if err != nil {
		return Event{}, false, err
	}
	return ev, true, nil
}
