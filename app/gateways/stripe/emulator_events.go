package stripe

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/payments"
)

// stripeEvent is an event the sandbox gateway sent in Stripe's format:
// its body as sent, listed as it is (Stripe's API and its webhooks carry
// the same event object), with when it was made.
type stripeEvent struct {
	id, typ string
	created int64
	body    []byte
}

// sent keeps the event body as one GET /v1/events lists.
func (s *Emulator) sent(body []byte) {
	var e struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &e) != nil || e.ID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.events.Get(e.ID); seen { // a retry of the same event: made once
		return
	}
	s.events.Put(e.ID, stripeEvent{id: e.ID, typ: e.Type, created: time.Now().Unix(), body: bytes.Clone(body)})
}

// listEvents is GET /v1/events: newest first, limit (1 to 100, 10 by
// default), starting_after, created[gte] and created[lte], type or
// types[] (not both), and delivery_success — false lists the events the
// sandbox gateway has not delivered (sb.Delivered: lost, or still being
// retried), true those it has, as Stripe's filter does.
func (s *Emulator) listEvents(r *http.Request, sb payments.Sandbox) emulation.Answer {
	q := r.URL.Query()
	limit, refused := listLimit(q)
	if refused.Body != nil {
		return refused
	}
	types := q["types[]"]
	if q.Get("type") != "" {
		if len(types) > 0 {
			return stripeInvalid("types", "You may pass either type or types, but not both.")
		}
		types = []string{q.Get("type")}
	}
	if len(types) > 20 {
		return stripeInvalid("types", "types may name at most 20 event types.")
	}
	var delivered *bool
	switch v := q.Get("delivery_success"); v {
	case "":
	case "true", "false":
		b := v == "true"
		delivered = &b
	default:
		return stripeInvalid("delivery_success", "Invalid boolean: "+v)
	}
	gte, lte := createdBounds(q)
	after := q.Get("starting_after")
	page := []json.RawMessage{}
	more := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.events.Newest {
		if after != "" {
			if id == after {
				after = ""
			}
			continue
		}
		if e.created < gte || e.created > lte || (len(types) > 0 && !slices.Contains(types, e.typ)) ||
			(delivered != nil && sb.Delivered(id) != *delivered) {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, e.body)
	}
	return emulation.JSON(http.StatusOK, map[string]any{"object": "list", "url": "/v1/events", "has_more": more, "data": page})
}
