package emulation

import (
	"context"
	"net/http"
	"sync"
)

// Faults are the switches a test flips to make an emulated gateway API
// (the calls Sekali makes to a gateway, not the callbacks it receives)
// fail as a real gateway's can. Each switch counts down over the API
// calls that follow, whichever API they ask. The sandbox gateway holds
// one for all the APIs it emulates and its own refunds; the gateways'
// conformance checks (app/gateways/gatewaytest) hold one per emulation.
// The zero value fails nothing; it is safe for concurrent use.
//
// Without an idempotency key every call acts anew: a call retried after
// a fault creates a second object, which is what these switches let a
// test prove the key prevents.
type Faults struct {
	mu    sync.Mutex
	fail  int
	hang  int
	held  int // calls that acted and wait for their caller to give up
	later int // refunds to accept, then fail
	// failedLater counts the refunds accepted, then failed.
	failedLater int
	losing      bool // notifications are not sent (LoseNotifications)
}

// LoseNotifications makes the sandbox gateway stop (on) or resume
// sending its notifications: the one switch that faults the other
// direction, Sekali's callbacks. While on, every notification it would
// send is lost — as in an outage longer than a gateway's retries — but
// the emulated APIs learn what it says (their status answers it, and
// a list of events not delivered has it): what catching up
// finds.
func (f *Faults) LoseNotifications(on bool) {
	f.mu.Lock()
	f.losing = on
	f.mu.Unlock()
}

// Losing says whether notifications are lost now (LoseNotifications).
func (f *Faults) Losing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.losing
}

// FailNext makes the next n API calls answer 500, in the gateway's error
// shape, before they act: nothing is created and nothing is remembered
// under their idempotency key (the failure comes before the gateway
// begins the request, so a retry with the same key acts).
func (f *Faults) FailNext(n int) {
	f.mu.Lock()
	f.fail = n
	f.mu.Unlock()
}

// TimeOutAfterActing makes the next n API calls act — the object is
// created and remembered under the call's idempotency key — and then not
// answer until the caller gives up (its request ends); the connection is
// then dropped. The caller cannot tell whether the gateway acted.
func (f *Faults) TimeOutAfterActing(n int) {
	f.mu.Lock()
	f.hang = n
	f.mu.Unlock()
}

// Held is the number of calls that acted and are waiting, unanswered,
// for their caller to give up: a test waits for it before it gives up.
func (f *Faults) Held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

// FailRefundsLater makes the next n refunds the emulated APIs accept
// fail afterwards, as a bank can refuse a refund days later, where an
// emulation asks (FailLater): the refund is
// answered pending, then fails — the charge gets its amount back, and
// the gateway sends its refund.failed notification. Other calls do not
// count down.
func (f *Faults) FailRefundsLater(n int) {
	f.mu.Lock()
	f.later = n
	f.mu.Unlock()
}

// FailLater says whether the refund accepted now fails later
// (FailRefundsLater).
func (f *Faults) FailLater() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.later > 0 {
		f.later--
		f.failedLater++
		return true
	}
	return false
}

// FailedLater is how many refunds the gateway has accepted and then
// failed (FailRefundsLater), since it started.
func (f *Faults) FailedLater() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failedLater
}

// Take says what the call asking now gets: a failure before acting, or
// no answer after acting (at most one of them).
func (f *Faults) Take() (fail, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.fail > 0:
		f.fail--
		return true, false
	case f.hang > 0:
		f.hang--
		return false, true
	}
	return false, false
}

// Hold waits, counted in Held, until ctx — the caller's request — ends:
// what a call that Take said hangs does after it acted.
func (f *Faults) Hold(ctx context.Context) {
	f.mu.Lock()
	f.held++
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	f.held--
	f.mu.Unlock()
}

// Call runs act, the emulated API's handling of r, inside the switches:
// it answers 500 with failed (the gateway's error body) without calling
// act, or calls act and then drops the connection once the caller gives
// up, or writes act's answer as JSON. It is payments.Sandbox's Call.
func (f *Faults) Call(w http.ResponseWriter, r *http.Request, failed []byte, act func() (int, http.Header, []byte)) {
	fail, hang := f.Take()
	if fail {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write(failed)
		return
	}
	status, header, body := act()
	if hang {
		f.Hold(r.Context())         // the caller gave up (or the server's deadline came)
		panic(http.ErrAbortHandler) // drop the connection: no answer at all
	}
	for k, vs := range header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
