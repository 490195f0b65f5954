package payments

import (
	"cmp"
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
	// Status returns the latest fact the gateway has about the payment
	// of an order, asked by ref: the order id, or the key the order's
	// hosted page was asked under at this gateway when that is another
	// ({order}~{n}). found is false when it has none.
	Status(ctx context.Context, ref string) (ev Event, found bool, err error)
}

// Poll asks clients about the pending orders that expire within the next
// `within` (their stock is about to be released, and a payment whose
// notification was lost would then need a refund) and applies what they
// answer. It returns how many answers changed something.
//
// A gateway that cannot be asked — its API answers an error (a 404 for
// a route it lacks, a 401 for a wrong key, a 5xx), a broken answer, or
// nothing — is not an error of the run: the run is a look at the
// gateways, repeated every minute, and the next one asks again; a run
// that failed for it would be retried at once, then archived, and raise
// an alert that names a task instead of the gateway. Each gateway's
// requests are counted (sekali_status_requests_total), and one that
// could not be asked is logged with its first error. A run whose ctx
// ends stops asking and returns what it applied. The error is only
// Sekali's own: the pending orders could not be read.
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
	asked, err := s.ask(ctx, clients, ids, Delivery{RemoteAddr: "status poll", RequestID: "poll"})
	notAsked := 0
	for _, c := range clients {
		a := asked[c.Provider()]
		applied, notAsked = applied+a.Applied, notAsked+a.NotAsked
		if a.Failed > 0 {
			s.log.WarnContext(ctx, "status poll could not ask the gateway", "provider", c.Provider(), "asked", a.Asked,
				"failed", a.Failed, "not_asked", a.NotAsked, "error", a.FirstError)
		}
	}
	if err != nil {
		return applied, fmt.Errorf("payments.Poll: %w", err)
	}
	if ctx.Err() != nil && notAsked > 0 {
		s.log.WarnContext(ctx, "status poll stopped before it asked about every order", "orders", len(ids), "not_asked", notAsked, "error", ctx.Err())
	}
	return applied, nil
}

// Asked is what one gateway's status API answered to a round of
// questions: how many were asked, how many answers named a fact (found)
// and changed something (applied), how many could not be asked
// (failed), and about how many orders it was not asked at all
// (NotAsked: it had failed unaskableAfter times in a row, or the round's
// ctx ended).
type Asked struct {
	Asked, Found, Applied, Failed, NotAsked int
	FirstError                              error
}

// Err says how many of the round's requests failed, with the first
// error; nil when none did.
func (a *Asked) Err() error {
	if a.Failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d status requests failed; first: %w", a.Failed, a.Asked, a.FirstError)
}

// unaskableAfter is how many failures in a row make a gateway one that
// cannot be asked for the rest of a round: its API is down, or answers
// every request with an error (a route it lacks, a wrong key). Asking it
// about every order would only take the round's time — up to a
// request's time-out each — from the gateways that answer.
const unaskableAfter = 3

// Status request results, the result label of
// sekali_status_requests_total.
const (
	statusAnswered = "answered" // found or not: the gateway said
	statusFailed   = "failed"   // an error status, a broken answer, no answer
)

// ask asks every client about each of orders ids and applies what they
// answer as deliveries like d, by provider. A request that fails is
// counted in its gateway's Asked, not returned; the error is the
// database's. The answers that came are applied all the same.
func (s *Service) ask(ctx context.Context, clients []StatusClient, ids []string, d Delivery) (map[string]*Asked, error) {
	asked := map[string]*Asked{}
	for _, c := range clients {
		asked[c.Provider()] = &Asked{}
	}
	pageKeys, err := s.pageKeys(ctx, ids)
	if err != nil {
		return asked, err
	}
	inARow := map[string]int{} // failures, by provider
	for _, id := range ids {
		for _, c := range clients {
			a := asked[c.Provider()]
			if inARow[c.Provider()] >= unaskableAfter || ctx.Err() != nil {
				a.NotAsked++
				continue
			}
			a.Asked++
			ev, found, err := c.Status(ctx, cmp.Or(pageKeys[[2]string{c.Provider(), id}], id))
			if err != nil {
				s.metrics.StatusRequests.WithLabelValues(c.Provider(), statusFailed).Inc()
				inARow[c.Provider()]++
				a.Failed++
				a.FirstError = cmp.Or(a.FirstError, fmt.Errorf("%s %s: %w", c.Provider(), id, err))
				continue
			}
			s.metrics.StatusRequests.WithLabelValues(c.Provider(), statusAnswered).Inc()
			inARow[c.Provider()] = 0
			if !found {
				continue
			}
			a.Found++
			d.Provider = c.Provider()
			if out := s.applyFact(ctx, c.Provider(), ev, d); out.Result == models.ResultProcessed {
				a.Applied++
			}
		}
	}
	return asked, nil
}

// pageKeys are the keys, other than the order id, that the hosted pages
// of orders ids were asked under, by provider and order. A page asked
// under another key ({order}~{n}, after the order id was
// spent by a call whose answer was lost) is the one the customer got,
// and the gateway files its payment under that key.
func (s *Service) pageKeys(ctx context.Context, ids []string) (map[[2]string]string, error) {
	keys := map[[2]string]string{}
	if len(ids) == 0 {
		return keys, nil
	}
	var rows []models.GatewayRequest
	err := s.db.WithContext(ctx).Select("order_id", "provider", "idempotency_key").
		Where("kind = ? AND order_id IN ? AND idempotency_key <> order_id", models.GatewayCreatePayment, ids).Find(&rows).Error
	if err != nil {
		return nil, store.Classify(err)
	}
	for _, r := range rows {
		keys[[2]string{r.Provider, r.OrderID}] = r.IdempotencyKey
	}
	return keys, nil
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
// effect, whichever comes first. requestID is the request the call was
// made for (the admin's that asked for the refund): its delivery row,
// its log line and the tasks it writes (a refund's email) carry it; ""
// is "answer". An error means nothing was applied.
func (s *Service) ApplyAnswer(ctx context.Context, provider, requestID string, ev Event) (Outcome, error) {
	out := s.applyFact(ctx, provider, ev, Delivery{Provider: provider, RemoteAddr: "gateway answer", RequestID: cmp.Or(requestID, "answer")})
	if out.Result == models.ResultError {
		return out, fmt.Errorf("payments.ApplyAnswer: %s %s could not be applied", provider, ev.Key)
	}
	return out, nil
}
