package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// notification would be applied.
func (s *Service) ApplyPolled(ctx context.Context, provider string, ev Event) Outcome {
	return s.applyFact(ctx, provider, ev, Delivery{Provider: provider, RemoteAddr: "status poll", RequestID: "poll"})
}

// applyFact applies a fact learnt from the gateway's API — a status poll's
// answer, or the answer that an unconfirmed notification was checked
// against — as a delivery of its notification would be applied. Its
// fingerprint marks it as polled: it is compared with a notification of
// the same key by what they say (sameFact).
func (s *Service) applyFact(ctx context.Context, provider string, ev Event, d Delivery) Outcome {
	b, _ := json.Marshal([]any{ev.OrderID, ev.TransactionID, ev.Status, ev.Amount, ev.Currency})
	ev.Fingerprint = polledPrefix + canonjson.Hash(b)
	out, err := s.apply(ctx, provider, ev, d)
	out.Provider, out.Key, out.OrderID = provider, ev.Key, ev.OrderID
	if err != nil {
		s.log.ErrorContext(ctx, "a fact from the gateway's API could not be applied", "provider", provider, "idempotency_key", ev.Key,
			"order_id", ev.OrderID, "request_id", d.RequestID, "error", err)
		return Outcome{Result: models.ResultError}
	}
	s.observe(ctx, out, ev, d.RequestID, 0)
	return out
}

// Answer is a StatusClient's answer from what parsing the gateway's
// answer gave: a state the adapter ignores is nothing found.
func Answer(ev Event, err error) (Event, bool, error) {
	if errors.Is(err, ErrIgnored) {
		return Event{}, false, nil // a state the shop does not act on
	}
	if err != nil {
		return Event{}, false, err
	}
	return ev, true, nil
}

// ApplyAnswer applies what a gateway answered to a call Sekali made to
// it — a refund — as a delivery of its notification of the same fact
// would be applied: the answer and the notification converge on one
// effect, whichever comes first. An error means nothing was applied.
func (s *Service) ApplyAnswer(ctx context.Context, provider string, ev Event) (Outcome, error) {
	out := s.applyFact(ctx, provider, ev, Delivery{Provider: provider, RemoteAddr: "gateway answer", RequestID: "answer"})
	if out.Result == models.ResultError {
		return out, fmt.Errorf("payments.ApplyAnswer: %s %s could not be applied", provider, ev.Key)
	}
	return out, nil
}
