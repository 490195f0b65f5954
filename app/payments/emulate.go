package payments

import "net/http"

// Emulator is a gateway's emulation of the part of its API Sekali calls
// (pages, status, refunds), which the sandbox gateway (web/sandboxgw:
// development and QA, never production) serves below Path, so that
// everything can be tried without the gateway. A gateway's constructor
// offers one when the key its emulation accepts is set.
type Emulator interface {
	Provider() string
	// Path is where it answers below the sandbox's address, e.g.
	// /sandbox/acmepay: its API URL variable points there.
	Path() string
	// Handler serves its API below Path (Path stripped), with what it
	// needs of the sandbox gateway.
	Handler(sb Sandbox) http.Handler
	// Reported tells it of a payment the sandbox gateway reported in its
	// format: the charge its refunds may take.
	Reported(f Fact)
	// Notified tells it of every notification the sandbox gateway sends
	// in its format — f, as signed in body — before it is sent: the
	// state its status API answers with from then on, where it has one
	// that answers with the notification.
	Notified(f Fact, body []byte)
}

// Sandbox is what an Emulator needs of the sandbox gateway: its fault
// switches, its notifications, its payment page.
type Sandbox interface {
	// Call answers one API call through the fault switches: failed (the
	// gateway's own 500 body) before act when a failure is due; else
	// act's answer, or, when a time-out is due, no answer at all once
	// act has acted and the caller has given up.
	Call(w http.ResponseWriter, r *http.Request, failed []byte, act func() (status int, header http.Header, body []byte))
	// FailLater says whether a refund accepted now fails later.
	FailLater() bool
	// Delivered says whether a notification of event id was answered
	// 2xx by Sekali: what the gateway's API says of its events'
	// delivery (a delivery_success).
	Delivered(eventID string) bool
	// Notify sends Sekali the gateway's notifications of fs, in that
	// order, each until it is answered (retried, listed on the sandbox
	// page of the order each names), as the sandbox gateway delivers its
	// own, when it speaks the gateway's format; note says why.
	Notify(note string, fs ...Fact)
	// PayURL is the sandbox gateway's payment page of order on the host
	// r asked, opened with the access token returnURL carries (?t=),
	// paying in the gateway's format.
	PayURL(r *http.Request, orderID, returnURL string) string
}

// Teller is a Sender whose gateway's API must know a fact before Sekali
// applies its notification (a Confirmer's gateway). A tool that sends
// such notifications of its own — the replayer, the k6 scripts — stands
// in for the gateway there too: before it sends the notification of f
// (body, as Body wrote it), it sends the sandbox gateway the request
// Tell returns, and the emulation of that API knows f from then on, as a
// real payment exists at the gateway before its notification. The
// request's URL is a path below the sandbox's address; nil when f's
// notification is not confirmed.
type Teller interface {
	Tell(f Fact, body []byte) (*http.Request, error)
}
