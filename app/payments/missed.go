package payments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// MissedLister is implemented by a gateway whose API lists the
// notifications it could not deliver (events with their
// delivery failed). Catching up after an outage longer than the
// gateway's retries (app/catchup) feeds each through ApplyListed: the
// same pipeline and key as its delivery, so a notification both listed
// and delivered is applied once.
type MissedLister interface {
	// Provider is the provider the notifications are applied under.
	Provider() string
	// Missed returns the bodies of the notifications created at or
	// after since whose delivery failed or is still being retried, as
	// the gateway would have delivered them, and how many API calls it
	// made (pages). An error means the list is incomplete: the bodies
	// returned are still good.
	Missed(ctx context.Context, since time.Time) (bodies [][]byte, pages int, err error)
}

// ApplyListed runs a notification the gateway's API listed (MissedLister)
// through the pipeline as a delivery of it, after the signature — the
// API call that listed it was authenticated with Sekali's key — with a
// row of its own under requestID.
func (s *Service) ApplyListed(ctx context.Context, provider string, body []byte, requestID string) Outcome {
	p, ok := s.providers[provider]
	if !ok {
		return Outcome{Result: Refused, Refusal: RefusalUnknownProvider, Provider: provider}
	}
	d := Delivery{Provider: provider, Header: http.Header{}, ContentType: "application/json", RemoteAddr: "catch-up",
		RequestID: requestID, body: body}
	start := time.Now()
	out, ev := s.evaluate(ctx, p, &d)
	return s.finish(ctx, p, d, out, ev, start)
}

// openBatch is how many open orders one query of AskOpen reads.
const openBatch = 500

// AskOpen asks clients about every open order — pending, or with a
// refund the gateway has not settled — and applies what they answer
// under requestID, as the status poll does (Poll asks only about the
// orders near their expiry): what catching up does for a gateway whose
// API cannot list its undelivered notifications.
func (s *Service) AskOpen(ctx context.Context, clients []StatusClient, requestID string) (map[string]*Asked, error) {
	total := map[string]*Asked{}
	for _, c := range clients {
		total[c.Provider()] = &Asked{}
	}
	if len(clients) == 0 {
		return total, nil
	}
	var errs []error
	for after := ""; ; {
		var ids []string
		err := s.db.WithContext(ctx).Model(&models.Order{}).
			Where("id > ? AND (status = ? OR id IN (SELECT order_id FROM refunds WHERE status = ?))",
				after, models.OrderPending, models.RefundPending).
			Order("id").Limit(openBatch).Pluck("id", &ids).Error
		if err != nil {
			return total, fmt.Errorf("payments.AskOpen: %w", store.Classify(err))
		}
		if len(ids) == 0 {
			break
		}
		asked, err := s.ask(ctx, clients, ids, Delivery{RemoteAddr: "catch-up", RequestID: requestID})
		for _, c := range clients {
			a, t := asked[c.Provider()], total[c.Provider()]
			t.Asked, t.Found, t.Applied, t.Failed = t.Asked+a.Asked, t.Found+a.Found, t.Applied+a.Applied, t.Failed+a.Failed
			t.NotAsked += a.NotAsked
			t.FirstError = cmp.Or(t.FirstError, a.FirstError)
			if err := a.Err(); err != nil { // the run is not complete: the next one starts where this one did
				errs = append(errs, err)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			return total, ctx.Err()
		}
		after = ids[len(ids)-1]
	}
	return total, errors.Join(errs...)
}
