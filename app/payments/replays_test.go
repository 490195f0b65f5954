package payments

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sekali/sekali/models"
)

// The replay budget: 3 copies per client and 10 from all are evaluated
// within the window, the rest answered with the recorded answer (a
// processed one's as a duplicate); a 5xx gives its place back; a new
// window evaluates afresh; a copy past the budget with no answer yet
// waits for one, until its context ends.
func TestReplayBudget(t *testing.T) {
	t.Parallel()
	r := newReplays(10)
	now := time.Now()
	ctx := context.Background()
	const k = "acmepay\x00tx:settlement\x00fp"
	for i := range 3 {
		if ok, _ := r.admit(ctx, k, "a", now); !ok {
			t.Fatalf("copy %d from a not evaluated", i+1)
		}
	}
	r.record(k, "a", Outcome{Result: models.ResultError}) // a 503: its place is given back
	if ok, _ := r.admit(ctx, k, "a", now); !ok {
		t.Fatal("the copy after a 503 not evaluated")
	}
	r.record(k, "a", Outcome{Result: models.ResultProcessed, recorded: true})
	ok, answer := r.admit(ctx, k, "a", now)
	if ok || answer == nil || answer.Result != models.ResultDuplicate || answer.recorded {
		t.Fatalf("a 4th copy from a: evaluated %v, answer %+v; want the recorded answer as a duplicate", ok, answer)
	}
	evaluated := 3 // a's
	for c := range 20 {
		if ok, _ := r.admit(ctx, k, fmt.Sprint("c", c), now); ok {
			evaluated++
		}
	}
	if evaluated != replaysPerKey {
		t.Errorf("%d copies evaluated from 21 clients, want %d", evaluated, replaysPerKey)
	}
	if ok, _ := r.admit(ctx, k, "a", now.Add(replayWindow+time.Second)); !ok {
		t.Error("a copy in a new window not evaluated")
	}

	// Past the budget with no answer: it waits, and has the answer once
	// one is recorded; or nothing when its context ends.
	const w = "sandbox\x00evt\x00fp"
	for range 3 {
		r.admit(ctx, w, "b", now)
	}
	got := make(chan *Outcome)
	go func() {
		_, a := r.admit(ctx, w, "b", now)
		got <- a
	}()
	r.record(w, "b", Outcome{Result: models.ResultUnconfirmed, note: "unconfirmed: …"})
	if a := <-got; a == nil || a.Result != models.ResultUnconfirmed {
		t.Errorf("the waiting copy's answer: %+v, want unconfirmed", a)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	const x = "sandbox\x00evt2\x00fp"
	for range 3 {
		r.admit(ctx, x, "b", now)
	}
	if ok, a := r.admit(done, x, "b", now); ok || a != nil {
		t.Errorf("a copy past the budget whose context ended: %v %+v, want neither evaluated nor answered", ok, a)
	}
	if out := fromMemory(nil, Event{Key: "evt2"}); out.Status() != 503 || !out.unkept {
		t.Errorf("no answer: %d, unkept %v; want 503 keeping no body", out.Status(), out.unkept)
	}
}
