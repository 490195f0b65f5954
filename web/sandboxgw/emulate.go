package sandboxgw

import (
	"net/http"
	"strings"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/payments"
)

// sandboxFor is what the gateway gives the emulation of provider's API
// (payments.Sandbox): its fault switches, its deliveries in provider's
// format, its pay page.
type sandboxFor struct {
	g        *Sandbox
	provider string
}

// Call implements payments.Sandbox: the gateway's fault switches around
// act.
func (s sandboxFor) Call(w http.ResponseWriter, r *http.Request, failed []byte, act func() (int, http.Header, []byte)) {
	s.g.faults.Call(w, r, failed, act)
}

// FailLater implements payments.Sandbox (Faults.FailRefundsLater).
func (s sandboxFor) FailLater() bool { return s.g.faults.FailLater() }

// Delivered implements payments.Sandbox.
func (s sandboxFor) Delivered(eventID string) bool { return s.g.Delivered(eventID) }

// Notify implements payments.Sandbox: the notifications of fs, delivered
// one after another as the gateway's own are, when the gateway speaks
// provider's format.
func (s sandboxFor) Notify(note string, fs ...payments.Fact) {
	if _, speaks := s.g.senders[s.provider]; !speaks || len(fs) == 0 {
		return
	}
	evs := make([]event, len(fs))
	for i, f := range fs {
		evs[i] = event{format: s.provider, fact: f}
	}
	s.g.notify(note, evs...)
}

// PayURL implements payments.Sandbox. order may be a request key of the
// order (ORD-…~2): the page is the order's.
func (s sandboxFor) PayURL(r *http.Request, order, returnURL string) string {
	return origin(r) + s.g.returns.page(gatewaycalls.OrderOfKey(order), returnURL, s.provider)
}

// origin is the scheme and host r asked: https when it came over TLS or
// through a proxy that says so (X-Forwarded-Proto).
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// notify delivers evs in the background, one after another, each to the
// deliveries of the order it names: as a gateway tells Sekali what
// became of something Sekali asked of it.
func (g *Sandbox) notify(note string, evs ...event) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for _, ev := range evs {
			g.deliver(gatewaycalls.OrderOfKey(ev.fact.OrderID), ev, note)
		}
	}()
}
