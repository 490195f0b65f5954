package sandboxgw

import (
	"net/http"
	"slices"
	"sync"

	"github.com/labstack/echo/v4"
)

// Faults are the switches a test flips to make the gateway's emulated
// APIs (Stripe's, Midtrans's, Xendit's: the calls Sekali makes to a gateway, not
// the callbacks it receives) fail as a real gateway's can. Each switch
// counts down over the API calls that follow, whichever API they ask. The
// zero value fails nothing; it is safe for concurrent use.
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
}

// FailRefundsLater makes the next n refunds the emulated Stripe and
// Xendit accept fail afterwards, as a bank can refuse a refund days
// later: the refund is answered pending (Stripe's pending, Xendit's
// PENDING), then fails — the charge gets its amount back, and the gateway
// sends its refund.failed notification (Stripe's event, Xendit's
// callback). Other calls do not count down.
func (f *Faults) FailRefundsLater(n int) {
	f.mu.Lock()
	f.later = n
	f.mu.Unlock()
}

// failLater says whether the refund accepted now fails later.
func (f *Faults) failLater() bool {
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

func (f *Faults) hold(n int) {
	f.mu.Lock()
	f.held += n
	f.mu.Unlock()
}

// take says what the call asking now gets: a failure before acting, or
// no answer after acting (at most one of them).
func (f *Faults) take() (fail, hang bool) {
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

// Faults returns the gateway's fault switches.
func (g *Gateway) Faults() *Faults { return &g.faults }

// apiAnswer is what an emulated API call answers: a JSON body.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

// apiHandler serves one emulated API call: it applies the fault switches
// around call, which acts and says what to answer. failed is the
// gateway's own 500 body.
func (g *Gateway) apiHandler(failed []byte, call func(c echo.Context) apiAnswer) echo.HandlerFunc {
	return func(c echo.Context) error {
		fail, hang := g.faults.take()
		if fail {
			return c.JSONBlob(http.StatusInternalServerError, failed)
		}
		a := call(c)
		if hang {
			g.faults.hold(1)
			<-c.Request().Context().Done() // the caller gave up (or the server's deadline came)
			g.faults.hold(-1)
			panic(http.ErrAbortHandler) // drop the connection: no answer at all
		}
		return writeAnswer(c, a)
	}
}

// writeAnswer sends an API answer.
func writeAnswer(c echo.Context, a apiAnswer) error {
	for k, vs := range a.header {
		c.Response().Header()[k] = vs
	}
	return c.JSONBlob(a.status, a.body)
}

// kept is a map that keeps at most max entries: putting one more evicts
// the oldest. Not safe for concurrent use (the gateway's API state holds
// its own lock).
type kept[V any] struct {
	max   int
	m     map[string]keptEntry[V]
	order []keptKey // oldest first; an entry deleted or replaced leaves a stale key, skipped by its seq
	seq   uint64
}

type keptEntry[V any] struct {
	v   V
	seq uint64
}

type keptKey struct {
	key string
	seq uint64
}

func newKept[V any](max int) *kept[V] {
	return &kept[V]{max: max, m: map[string]keptEntry[V]{}}
}

func (k *kept[V]) get(key string) (V, bool) {
	e, ok := k.m[key]
	return e.v, ok
}

func (k *kept[V]) put(key string, v V) {
	k.seq++
	k.m[key] = keptEntry[V]{v: v, seq: k.seq}
	k.order = append(k.order, keptKey{key, k.seq})
	for len(k.m) > k.max {
		old := k.order[0]
		k.order = k.order[1:]
		if e, ok := k.m[old.key]; ok && e.seq == old.seq {
			delete(k.m, old.key)
		}
	}
	if len(k.order) > 2*len(k.m)+64 { // mostly stale keys: drop them
		k.order = slices.DeleteFunc(k.order, func(o keptKey) bool { return k.m[o.key].seq != o.seq })
	}
}

func (k *kept[V]) delete(key string) { delete(k.m, key) }

// newest calls yield with the entries, newest first, until it returns
// false.
func (k *kept[V]) newest(yield func(key string, v V) bool) {
	for i := len(k.order) - 1; i >= 0; i-- {
		ok := k.order[i]
		if e, live := k.m[ok.key]; live && e.seq == ok.seq && !yield(ok.key, e.v) {
			return
		}
	}
}
