package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// EventTypes are the event types Parse acts on: the ones catching up
// asks Stripe for (types[] takes at most 20).
var EventTypes = []string{
	"payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled",
	"checkout.session.completed", "checkout.session.async_payment_succeeded",
	"checkout.session.async_payment_failed", "checkout.session.expired",
	"charge.refunded", "charge.refund.updated", "refund.created", "refund.updated", "refund.failed",
	"charge.dispute.created", "charge.dispute.updated", "charge.dispute.closed",
}

// MaxMissedPages bounds one catch-up's reading of Stripe's events: 100
// pages of 100. A longer backlog is read by the next run, which starts
// where this one did (the events it applied are then duplicates).
const MaxMissedPages = 100

// Missed implements payments.MissedLister, as Stripe documents catching
// up after an outage: GET /v1/events with delivery_success=false (events
// whose delivery to an endpoint failed, or is still being retried),
// created[gte]=since, and the types Sekali acts on, paged with
// starting_after. Stripe lists newest first and keeps events 30 days;
// the bodies are returned oldest first, so that a payment comes before
// its refund.
func (c *StatusClient) Missed(ctx context.Context, since time.Time) ([][]byte, int, error) {
	q := url.Values{"delivery_success": {"false"}, "created[gte]": {fmt.Sprint(since.Unix())}, "limit": {"100"},
		"types[]": EventTypes}
	var bodies [][]byte
	pages := 0
	for pages < MaxMissedPages {
		page, err := c.list(ctx, "/v1/events", q)
		pages++
		if err != nil {
			slices.Reverse(bodies)
			return bodies, pages, err
		}
		for _, raw := range page.Data {
			var e struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &e) != nil || e.ID == "" {
				continue
			}
			bodies = append(bodies, raw)
			q.Set("starting_after", e.ID)
		}
		if !page.HasMore || len(page.Data) == 0 {
			break
		}
	}
	slices.Reverse(bodies)
	return bodies, pages, nil
}
