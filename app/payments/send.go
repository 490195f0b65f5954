package payments

import (
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/models"
)

// Gateway is what one gateway package offers, as configured by its one
// constructor (app/gateways): each part is nil when its settings are
// unset.
type Gateway struct {
	Name     string
	Provider Provider                // receives its notifications at /callbacks/{Name}
	Status   StatusClient            // asks its API about an order, for the status poll
	Sender   Sender                  // writes its notifications: the sandbox page speaks its format
	Pages    gatewaycalls.PageOpener // opens its hosted payment pages (PAYMENT_GATEWAY)
	Refunder gatewaycalls.Refunder   // asks it to refund a payment
	Emulator Emulator                // its API's emulation, for the sandbox gateway
	Missed   MissedLister            // lists its notifications that were not delivered, for catching up
	// Settings are its settings for the start-up log, set or unset
	// even when it is not configured; secrets only as "set" or "unset".
	Settings []slog.Attr
}

// CallsWith builds g's calling side — its status client, page opener and
// refunder — from one API key at one API URL, or none of them and the
// error of the first that refuses the key.
func CallsWith[S StatusClient, P gatewaycalls.PageOpener, R gatewaycalls.Refunder](g *Gateway, key, apiURL string,
	status func(key, apiURL string) (S, error), pages func(key, apiURL string) (P, error), refunds func(key, apiURL string) (R, error)) error {
	s, errStatus := status(key, apiURL)
	p, errPages := pages(key, apiURL)
	r, errRefunds := refunds(key, apiURL)
	if err := cmp.Or(errStatus, errPages, errRefunds); err != nil {
		return err
	}
	g.Status, g.Pages, g.Refunder = s, p, r
	return nil
}

// The gateway's side: a Sender writes a notification as its gateway sends
// it — the body in the gateway's format, signed the gateway's way. The
// sign command, the replayer, the sandbox payment page and the tests use
// it to speak each gateway's format; the receiving adapters never do.

// Fact is what one notification says about a payment.
type Fact struct {
	// EventID is the gateway's event id: the key for the sandbox and the
	// gateways that send one. A gateway that sends none has its key
	// derived from the transaction and its status.
	EventID       string
	OrderID       string
	TransactionID string
	Status        models.PaymentEvent
	// Amount is in Sekali's minor units of Currency; for a refund, the
	// refund's amount (for a gateway that states totals only, the
	// charge's refunded total).
	Amount   int64
	Currency string // ISO 4217, upper case
	// RefundID names a refund at the gateway (the sandbox's refund_id, or
	// the gateway's key or id of it); empty: the event id does. For a
	// gateway with refund events it makes the notification one of those
	// instead of the charge's refunded total.
	RefundID string
	// RefundStatus is the refund's state, where the gateway tells it
	// (its refund events or callbacks): "" is
	// succeeded. RefundReason is a failed refund's reason.
	RefundStatus models.RefundStatus
	RefundReason string
	// Gross and Refunds restate the charge around a refund, as some
	// gateways' notifications do: the charge's amount, and every refund of it so
	// far, this one last. Empty: the refund alone stands for both.
	Gross   int64
	Refunds []Refund
}

// ErrNotExpressible is returned for a fact a gateway has no notification
// for (one has no failed invoice, another no expired payment).
var ErrNotExpressible = errors.New("the gateway sends no notification of this status")

// Sender writes one gateway's notifications.
type Sender interface {
	// Provider is the {provider} of POST /callbacks/{provider}.
	Provider() string
	// Body is the notification of f, unsigned: equal facts give equal
	// bytes, so copies of one notification are duplicates, not conflicts.
	Body(f Fact) ([]byte, error)
	// Sign returns the headers and body to send for body at time at. The
	// body changes only for a gateway whose signature is inside it.
	Sign(body []byte, eventID string, at time.Time) (http.Header, []byte, error)
}

// Notification is s's signed notification of f at time at.
func Notification(s Sender, f Fact, at time.Time) (http.Header, []byte, error) {
	body, err := s.Body(f)
	if err != nil {
		return nil, nil, err
	}
	return s.Sign(body, f.EventID, at)
}
