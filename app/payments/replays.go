package payments

import (
	"context"
	"sync"
	"time"

	"github.com/sekali/sekali/models"
)

// Whoever holds one genuine notification can send it again, signed as it
// was: a signature may have no timestamp. Were each copy evaluated as
// the first was — for a notification its gateway's API does not confirm,
// a call to that API under the merchant's key, and a row keeping the
// whole body — one notification sent 200 times would make 200 calls and
// megabytes of kept bodies, none of it refused, so none of it under the
// refused-row budget.
//
// So a signed notification — one event key and fingerprint, or for one
// the shop ignores its body — is evaluated at most replaysPerClient times from one client, and
// replaysPerKey times from all, within replayWindow. Past that, a copy is
// answered from what was recorded: the answer its earlier copies had (a
// processed or stale one's copies are duplicates), without asking the gateway's
// API and without a transaction; its row keeps no body and notes that it
// was a repeat. Every answer but a 5xx is recorded; a 5xx gives its
// copy's place in the budget back, so a gateway's retry after an outage
// is evaluated. A copy past the budget while no answer is recorded — the
// earlier copies still running — waits for theirs, until its request's
// deadline (then 503, which a gateway retries). A delivery applied again
// from the console is never counted.
const (
	replaysPerClient = 3
	replaysPerKey    = 10
	replayWindow     = 10 * time.Minute
	// replayCapacity bounds the notifications remembered (a few hundred
	// bytes each); the oldest leaves first. Only notifications whose
	// signature passed reach it.
	replayCapacity = 10_000
)

// replayNote starts the note of a copy answered from memory.
const replayNote = "a repeat answered as before (replay bound): nothing asked, body not kept"

// replays counts the copies of recent signed notifications.
type replays struct {
	mu      sync.Mutex
	entries *recent[string, *replayEntry]
}

// replayEntry is one notification's copies within its window.
type replayEntry struct {
	since   time.Time
	total   int
	clients map[string]int // at most replaysPerKey: counted only while the total is within it
	answer  *Outcome       // the latest answer but a 5xx, when there was one
	changed chan struct{}  // closed when an answer is recorded or a place given back
}

func newReplays(capacity int) *replays {
	return &replays{entries: newRecent[string, *replayEntry](capacity)}
}

func replayKey(provider string, ev Event) string {
	return provider + "\x00" + ev.Key + "\x00" + ev.Fingerprint
}

// admit counts a copy of notification k from client at now. It says
// whether the copy is to be evaluated; when not, answer is what the
// copies before it were answered. A copy past the budget while none is
// recorded — the earlier copies still running — waits for their answer,
// until ctx ends (then answer is nil).
func (r *replays) admit(ctx context.Context, k, client string, now time.Time) (evaluate bool, answer *Outcome) {
	for {
		r.mu.Lock()
		e, ok := r.entries.get(k)
		switch {
		case !ok:
			e = &replayEntry{since: now, clients: map[string]int{}, changed: make(chan struct{})}
			r.entries.add(k, e)
		case now.Sub(e.since) > replayWindow: // a new window: evaluated afresh
			close(e.changed)
			*e = replayEntry{since: now, clients: map[string]int{}, changed: make(chan struct{})}
		}
		if e.total < replaysPerKey && e.clients[client] < replaysPerClient {
			e.total++
			e.clients[client]++
			r.mu.Unlock()
			return true, nil
		}
		answer, changed := e.answer, e.changed
		r.mu.Unlock()
		if answer != nil {
			return false, answer
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false, nil
		}
	}
}

// record remembers out as the answer to notification k's copies: the
// copies past the budget are answered with it (a processed or stale
// one's as its duplicate). An answer of 5xx — nothing was recorded, the
// gateway is to come back — is not remembered, and gives client's copy
// back to the budget, so that the gateway's retry is evaluated.
func (r *replays) record(k, client string, out Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries.get(k)
	if !ok {
		return
	}
	defer func() {
		close(e.changed)
		e.changed = make(chan struct{})
	}()
	if out.Status() >= 500 {
		if e.clients[client] > 0 {
			e.clients[client]--
			e.total--
		}
		return
	}
	answer := out
	answer.recorded, answer.queued, answer.refundsFailed = false, false, 0
	if answer.Result == models.ResultProcessed || answer.Result == models.ResultStale {
		// One delivery applies an event (audit check 4): its copies are
		// its duplicates.
		answer.Result, answer.Detail = models.ResultDuplicate, ""
	}
	e.answer = &answer
}

// fromMemory is the answer to a copy of ev past the budget: answer, the
// one recorded, with its row keeping no body; or, while none is
// recorded, a 503.
func fromMemory(answer *Outcome, ev Event) Outcome {
	if answer == nil {
		return Outcome{Result: models.ResultError, Key: ev.Key, OrderID: ev.OrderID, unkept: true, note: replayNote,
			Detail: "this notification was sent again while its earlier copies were being evaluated; retry later"}
	}
	out := *answer
	out.Key, out.OrderID, out.unkept = ev.Key, ev.OrderID, true
	out.note = replayNote
	if answer.note != "" {
		out.note = models.Truncate(replayNote+"; "+answer.note, maxNoteLength)
	}
	return out
}
