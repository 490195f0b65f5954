// Package payments is the callback pipeline: a provider's HTTP delivery is
// size-limited, type-checked, authenticated and parsed by its Provider,
// then reserved and applied in one database transaction, so that an event
// delivered once or a thousand times changes the order, the stock and the
// payments exactly once.
package payments

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/orders"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/models"
)

// MaxBodyBytes is the largest callback body accepted (413 above it).
const MaxBodyBytes = 64 << 10

// MaxBodyDepth is the deepest nesting of arrays and objects a callback
// body may have (400 invalid_payload above it). No gateway nests a
// notification more than a few levels; a body of thousands of levels
// costs every JSON decoder about a millisecond of CPU per KiB, before
// its signature is known (some gateways' is inside the body). It is counted
// by one pass over the bytes (canonjson.Depth), before anything decodes
// the body.
const MaxBodyDepth = 32

// Provider is one payment gateway's side of the callback contract: how its
// deliveries are authenticated, and how a body becomes an Event with a
// stable idempotency key and a payload fingerprint.
type Provider interface {
	// Name is the {provider} path segment and the provider column.
	Name() string
	// Verify authenticates a delivery. Its error must not contain a
	// signature or a secret.
	Verify(h http.Header, body []byte, now time.Time) error
	// Parse turns an authenticated body into an Event (the pipeline sets
	// its Fingerprint). An event may leave OrderID empty when it names
	// its charge only (a dispute, at some gateways): the pipeline takes the order of
	// the charge's payment, and ignores the event when there is none. It returns an EInvalidPayload error for malformed
	// JSON, an EMissingField error for a missing or mistyped field, and
	// an error wrapping ErrIgnored for a notification the shop does not
	// handle. The pipeline gives it only the headers EventHeaders names.
	Parse(h http.Header, body []byte) (Event, error)
	// EventHeaders names the headers Parse reads (a gateway that sends
	// its event id as a header), or none. With the body, they decide the
	// event: a repeated delivery with the same body and the same values
	// is not parsed again (parsedBodies).
	EventHeaders() []string
}

// Confirmer is implemented by a provider whose notifications do not
// prove themselves: not wholly signed (a signature over a few fields only: the other
// fields can be changed
// without breaking the signature), or authenticated by a static token
// that whoever learns it can send. What such a notification says is
// confirmed with the gateway's API before anything is written, and only
// what the API says is applied.
type Confirmer interface {
	// Confirm asks the gateway's API about ev's transaction and returns
	// its answer as the Event the gateway's notification of it would
	// give; found is false when the gateway does not know it. An error
	// means the API could not answer now: the delivery is answered 503,
	// and the gateway retries it. A provider that asks only about some
	// events (payments, say) answers ev itself, found, for the others.
	Confirm(ctx context.Context, ev Event) (answer Event, found bool, err error)
}

// deliveryFields is implemented by a provider whose deliveries of one
// event differ in top-level members that describe the delivery, not the
// event (a count of the endpoints still waiting):
// they are left out of the fingerprint, so a retry is a duplicate, not a
// conflict.
type deliveryFields interface {
	DeliveryFields() []string
}

// fingerprintOf is the hex SHA-256 of the canonical body, without the
// provider's delivery fields. A body two parsers could read differently
// is refused (canonjson.Decode).
func fingerprintOf(p Provider, body []byte) (string, error) {
	v, err := canonjson.Decode(body)
	if err != nil {
		return "", err
	}
	if df, ok := p.(deliveryFields); ok {
		if members, ok := v.(map[string]any); ok {
			for _, name := range df.DeliveryFields() {
				delete(members, name)
			}
		}
	}
	canonical, err := canonjson.Encode(v)
	if err != nil {
		return "", err
	}
	return canonjson.Hash(canonical), nil
}

// ErrIgnored is what Parse returns (wrapped, with the reason) for a
// notification the shop does not handle: an event type it has no use
// for, an event of another application on the same account. The delivery
// is answered 200 "ignored" — a 4xx would make the gateway retry it for
// days — and recorded as an ignored delivery; nothing else happens.
var ErrIgnored = errors.New("ignored")

// Event is a provider's callback in Sekali's terms.
type Event struct {
	Key           string // idempotency key: the provider's event id, or derived from the event
	Fingerprint   string // hex SHA-256 of the canonical payload, set by the pipeline
	OrderID       string
	TransactionID string // the provider's reference of the charge
	Status        models.PaymentEvent
	// Amount, in minor units: what was paid, for a paid event; for a
	// refunded one, the charge's refunded total as the gateway states it
	// (a refund_amount or amount_refunded), or the sum of
	// Refunds where it states none.
	Amount   int64
	Currency string
	// Refunds are the refunds a refunded event names, by the gateway's
	// id of each (none where the gateway tells only the total); at most
	// MaxRefunds.
	Refunds []Refund
}

// MaxRefunds bounds the refunds one refunded event may name; a gateway's
// Parse refuses more (422 missing_field) before reading any of them.
// Each is an admin's decision, so a charge refunded in more than 100
// parts is not a shop's; and each new one is a row written in the
// callback's transaction, so the bound also bounds that transaction.
const MaxRefunds = 100

// Refund is one refund at the gateway: its id there, its amount in minor
// units of the event's currency, its state there ("" is succeeded: a
// gateway that tells a refund only once it is made) and, for one that
// failed, the gateway's reason.
type Refund struct {
	Key    string
	Amount int64
	Status models.RefundStatus
	Reason string
}

// Delivery is one HTTP delivery of a callback.
type Delivery struct {
	Provider    string
	Header      http.Header
	Body        io.Reader
	ContentType string
	RemoteAddr  string // the sender's address, as its row and log show it
	// Client is who the budget of refused rows counts the sender as (an
	// IPv6 /64 is one client, see web.ClientIdentity); RemoteAddr when "".
	Client    string
	RequestID string
	// TraceID is the trace the delivery was received in, kept on its row;
	// Receive reads it from its context.
	TraceID string

	body  []byte // Body as read, for a row that keeps it (kept.go)
	again bool   // applied again from the console: not counted as a copy (replays.go)
	// verified: the body's signature passed (or, applied again, passed
	// when it arrived). Only such a body is searchable (kept.go).
	verified bool
	// searchable is body's searchable form (SearchableBody) when searched:
	// remembered with its parsed event, so that a retry's row need not
	// decode and encode its body again (parsedBodies).
	searchable json.RawMessage
	searched   bool
}

// Result is what became of a delivery: processed, stale, duplicate,
// ignored or unconfirmed (answered 200); conflict, rejected or error; or
// Refused. The untyped models.Result… constants are its values.
type Result string

// Refused: the delivery was turned away before its event was known (a bad
// signature, body or size, an unknown provider); Outcome.Refusal says why.
const Refused Result = "refused"

// RefusalUnknownProvider is the refusal of a delivery to a provider that
// is not configured: answered 404, and no row is written.
const RefusalUnknownProvider = "unknown_provider"

// Outcome is the answer to a delivery. Word is the one word that says
// what became of it — the `result` member of the answer, the outcome of
// its callback_deliveries row, the label of its metrics — and Code
// decides its HTTP status.
type Outcome struct {
	Result Result
	// Refusal is the error code of a Refused delivery
	// (invalid_signature, too_large, …, or RefusalUnknownProvider).
	Refusal       string
	Detail        string
	Reason        string // why a callback was rejected
	Provider      string
	Key           string
	OrderID       string
	OrderStatus   models.OrderStatus // after the event, when known
	note          string             // why an unconfirmed delivery changed nothing, for its row
	unkept        bool               // a repeat answered from memory: its row keeps no body (replays.go)
	recorded      bool               // the delivery row was written in the applying transaction
	queued        bool               // the applying transaction wrote tasks to the outbox
	refundsFailed int                // refunds the event reported failed or canceled, for their metric
	callbackID    *int64
	statusBefore  models.OrderStatus
}

// Code is the error code of the answer: empty for a 200, else the code
// that decides the HTTP status (answerStatus) and names the problem.
func (o Outcome) Code() string {
	switch o.Result {
	case models.ResultProcessed, models.ResultStale, models.ResultDuplicate, models.ResultIgnored, models.ResultUnconfirmed:
		return ""
	case models.ResultConflict:
		return models.EConflict
	case models.ResultRejected:
		return models.ERejected
	case Refused:
		if o.Refusal == RefusalUnknownProvider {
			return models.ENotFound
		}
		return o.Refusal
	}
	return models.EUnavailable // models.ResultError
}

// StatusBefore is the order's status before the event (its status after
// is OrderStatus).
func (o Outcome) StatusBefore() models.OrderStatus { return o.statusBefore }

// Word is the one word for what became of the delivery: its Result, or
// for a refusal the refusal's code.
func (o Outcome) Word() string {
	if o.Result == Refused {
		return o.Refusal
	}
	return string(o.Result)
}

// Status is the HTTP status of the outcome: what the gateway hears, and
// the delivery row's response_code.
func (o Outcome) Status() int {
	if s, ok := answerStatus[o.Code()]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// answerStatus is the HTTP status of each code a callback can be answered
// with (docs/callbacks.md#results). A gateway retries anything but a 2xx;
// web's own table of every code agrees with this one (a test in web holds
// them together).
var answerStatus = map[string]int{
	"":                           http.StatusOK,
	models.EConflict:             http.StatusConflict,
	models.ERejected:             http.StatusUnprocessableEntity,
	models.EUnavailable:          http.StatusServiceUnavailable,
	models.ENotFound:             http.StatusNotFound,
	models.EInvalidSignature:     http.StatusUnauthorized,
	models.EInvalidPayload:       http.StatusBadRequest,
	models.EMissingField:         http.StatusUnprocessableEntity,
	models.EInvalid:              http.StatusUnprocessableEntity, // a malformed amount (Fields.Invalid)
	models.ETooLarge:             http.StatusRequestEntityTooLarge,
	models.EUnsupportedMediaType: http.StatusUnsupportedMediaType,
}

// AnswerStatuses lists the codes a callback can be answered with and
// their HTTP statuses.
func AnswerStatuses() map[string]int { return maps.Clone(answerStatus) }

// Service receives callbacks for a set of providers.
type Service struct {
	db        *gorm.DB
	log       *slog.Logger
	now       func() time.Time
	providers map[string]Provider
	tasks     Tasks
	// deliveries writes the audit rows of deliveries that applied nothing.
	deliveries *deliveryLog
	// seen answers repeated deliveries of processed events from memory.
	seen *seenEvents
	// relays wakes the outbox relays after a commit that wrote tasks.
	relays *outbox.Notifier
	// parsed remembers the events of recent bodies.
	parsed *parsedBodies
	// replays counts the copies of recent signed notifications.
	replays *replays
	// refusals rations the rows of refused deliveries per client.
	refusals *refusalBudget
	metrics  *metrics.Set

	// KeepBodies keeps each delivery's body and redacted headers on its
	// row (kept.go; DELIVERY_BODY_RETENTION above 0, which maintenance
	// prunes by). Set it before the first Receive.
	KeepBodies bool
	// KeptBodyKey is the key of a kept body's hash (KeptBodyKey of the
	// order token secret): a body that no longer matches its hash was
	// changed in the database, and is not applied again. Set it before
	// the first Receive.
	KeptBodyKey []byte
}

// Tasks makes the outbox rows of what a payment causes (the invoice and
// the email), of the emails a refund that succeeded, or failed after
// that, sends, and of what an order a payment event ends causes;
// jobs.Tasks in the app (this package does not know the queue).
type Tasks interface {
	Paid(orderID, requestID string, now time.Time) []models.OutboxMessage
	RefundSucceeded(orderID string, refundID int64, requestID string, now time.Time) models.OutboxMessage
	RefundFailed(orderID string, refundID int64, requestID string, now time.Time) models.OutboxMessage
	orders.EndTasks // an expired event's email
	alerts.Tasks    // refund.failed, when a refund fails after the gateway accepted it
}

// NewService returns the callback pipeline for the given providers,
// writing what a payment causes with tasks and counting into m. It starts
// the writer of the delivery log and the relays' notifier: call Close
// when done.
func NewService(db *gorm.DB, log *slog.Logger, now func() time.Time, m *metrics.Set, tasks Tasks, providers ...Provider) *Service {
	s := &Service{db: db, log: log, now: now, providers: map[string]Provider{}, tasks: tasks, deliveries: newDeliveryLog(db, log, m.DeliveryRowsDropped, deliveryQueue),
		seen: newSeenEvents(seenCapacity), relays: outbox.NewNotifier(db, log), parsed: newParsedBodies(parsedCapacity),
		replays: newReplays(replayCapacity), refusals: newRefusalBudget(), metrics: m}
	for _, p := range providers {
		s.providers[p.Name()] = p
	}
	return s
}

// DroppedDeliveryRows is how many deliveries this process answered since
// it started but could not write the audit row of (deliveryLog): the
// console's delivery counts miss them.
func (s *Service) DroppedDeliveryRows() int64 { return s.deliveries.lost.Load() }

// Close writes the queued delivery rows and stops their writer and the
// notifier. Call it after the HTTP server has stopped taking requests.
func (s *Service) Close() {
	s.deliveries.close()
	s.relays.Close()
}

// Receive runs one delivery through the pipeline and returns the answer.
// It never fails: a failure is an Outcome with a 5xx status. Every
// delivery of a known provider leaves one callback_deliveries row, but
// refused ones over their address's budget (refusals.go).
func (s *Service) Receive(ctx context.Context, d Delivery) Outcome {
	start := time.Now()
	d.TraceID = tracing.TraceID(ctx)
	p, ok := s.providers[d.Provider]
	if !ok {
		return Outcome{Result: Refused, Refusal: RefusalUnknownProvider, Detail: fmt.Sprintf("no provider %q", d.Provider)}
	}
	out, ev := s.receive(ctx, p, &d)
	return s.finish(ctx, p, d, out, ev, start)
}

// finish writes delivery d's row, unless the applying transaction did,
// and logs and counts its outcome.
func (s *Service) finish(ctx context.Context, p Provider, d Delivery, out Outcome, ev Event, start time.Time) Outcome {
	out.Provider = p.Name()
	switch {
	case out.recorded: // written inside the applying transaction
	case out.Result == Refused && !s.refusals.allow(cmp.Or(d.Client, d.RemoteAddr), s.now()):
		s.metrics.RefusedRowsSkipped.Inc() // over the budget: counted, not written (refusals.go)
	default:
		if out.unkept {
			d.body, d.searchable, d.searched = nil, nil, true
		}
		s.deliveries.add(ctx, s.keep(d, models.CallbackDelivery{
			CallbackID:   out.callbackID,
			Provider:     p.Name(),
			ReceivedAt:   s.now().UTC(),
			Outcome:      out.Word(),
			ResponseCode: out.Status(),
			DurationMS:   int(time.Since(start).Milliseconds()),
			RemoteAddr:   d.RemoteAddr,
			RequestID:    d.RequestID,
			TraceID:      d.TraceID,
			Note:         out.note,
		}), out.Result == models.ResultConflict)
	}
	s.observe(ctx, out, ev, d.RequestID, time.Since(start))
	return out
}

// receive runs delivery d through the pipeline; d.body is the body it
// read, once it is known to be within MaxBodyBytes.
func (s *Service) receive(ctx context.Context, p Provider, d *Delivery) (Outcome, Event) {
	body, err := io.ReadAll(io.LimitReader(d.Body, MaxBodyBytes+1))
	if err != nil {
		return refusal(models.EInvalidPayload, "could not read the body"), Event{}
	}
	if len(body) > MaxBodyBytes {
		return refusal(models.ETooLarge, fmt.Sprintf("the body is larger than %d bytes", MaxBodyBytes)), Event{}
	}
	d.body = body
	if !isJSON(d.ContentType) {
		return refusal(models.EUnsupportedMediaType, "Content-Type must be application/json"), Event{}
	}
	if canonjson.Depth(body, MaxBodyDepth) > MaxBodyDepth {
		return refusal(models.EInvalidPayload, fmt.Sprintf("the body nests arrays and objects more than %d deep", MaxBodyDepth)), Event{}
	}
	if err := p.Verify(d.Header, body, s.now()); err != nil {
		return refusal(models.EInvalidSignature, err.Error()), Event{}
	}
	d.verified = true
	return s.evaluate(ctx, p, d)
}

// event parses d's body and finds the order of an event that names only
// its charge. done is the delivery's outcome when it ends there (ignored,
// or refused); err when the order could not be looked up.
func (s *Service) event(ctx context.Context, p Provider, d *Delivery) (ev Event, done *Outcome, err error) {
	pb, err := s.parsed.parse(p, d.Header, d.body, s.KeepBodies)
	ev, d.searchable, d.searched = pb.event, pb.searchable, pb.searched
	if errors.Is(err, ErrIgnored) {
		return ev, &Outcome{Result: models.ResultIgnored, Detail: err.Error()}, nil
	}
	if err != nil {
		out := refusal(models.ErrorCode(err), models.ErrorMessage(err))
		return Event{}, &out, nil
	}
	if ev.OrderID == "" { // an event that names its charge only (a dispute)
		switch err := s.orderOfCharge(ctx, p.Name(), &ev); {
		case errors.Is(err, errUnknownCharge):
			return ev, &Outcome{Result: models.ResultIgnored, Detail: fmt.Sprintf("%s %s %s", ev.Status, ev.TransactionID, err)}, nil
		case err != nil:
			return ev, nil, err
		}
	}
	return ev, nil, nil
}

// evaluate is the pipeline after a delivery's signature: parse, find the
// order of a charge, confirm with the gateway where its notifications
// need it, apply. ApplyAgain runs it on a kept delivery.
func (s *Service) evaluate(ctx context.Context, p Provider, d *Delivery) (Outcome, Event) {
	ev, done, err := s.event(ctx, p, d)
	switch {
	case err != nil:
		s.log.ErrorContext(ctx, "callback failed", "provider", p.Name(), "idempotency_key", ev.Key,
			"request_id", d.RequestID, "error", err)
		return Outcome{Result: models.ResultError, Detail: "the callback could not be recorded now; retry later"}, ev
	case done != nil && (done.Result != models.ResultIgnored || d.again):
		return *done, ev
	case d.again:
		return s.decide(ctx, p, d, ev), ev
	}
	k, client := replayKey(p.Name(), ev), cmp.Or(d.Client, d.RemoteAddr)
	if done != nil { // ignored: no fingerprint, the body is the notification
		k = replayKey(p.Name(), Event{Fingerprint: "ignored:" + canonjson.Hash(d.body)})
	}
	if evaluate, answer := s.replays.admit(ctx, k, client, s.now()); !evaluate {
		return fromMemory(answer, ev), ev
	}
	var out Outcome
	if done != nil {
		out = *done
	} else {
		out = s.decide(ctx, p, d, ev)
	}
	s.replays.record(k, client, out)
	return out, ev
}

// decide is the pipeline after the event is known: confirm it with the
// gateway where its notifications need it, then apply it.
func (s *Service) decide(ctx context.Context, p Provider, d *Delivery, ev Event) Outcome {
	if c, ok := p.(Confirmer); ok && s.needsConfirming(p.Name(), ev) {
		answer, found, err := c.Confirm(ctx, ev)
		switch {
		case err != nil:
			s.log.ErrorContext(ctx, "callback could not be confirmed", "provider", p.Name(), "idempotency_key", ev.Key,
				"order_id", ev.OrderID, "request_id", d.RequestID, "error", err)
			return Outcome{Result: models.ResultError, Detail: "the gateway's status API could not be asked to confirm this notification; retry later"}
		case !found || !SameEvent(ev, answer):
			out := s.unconfirmed(ctx, p.Name(), ev, answer, found, *d)
			out.Key, out.OrderID = ev.Key, ev.OrderID
			return out
		}
		// Confirmed: the notification says what the API says, so
		// applying it applies the API's answer, under the notification's
		// key and fingerprint.
	}
	out, err := s.apply(ctx, p.Name(), ev, *d)
	if err != nil {
		s.log.ErrorContext(ctx, "callback failed", "provider", p.Name(), "idempotency_key", ev.Key,
			"order_id", ev.OrderID, "request_id", d.RequestID, "error", err)
		out = Outcome{Result: models.ResultError, Detail: "the callback could not be recorded now; retry later"}
	}
	out.Key, out.OrderID = ev.Key, ev.OrderID
	return out
}

func refusal(code, detail string) Outcome {
	if status, ok := answerStatus[code]; code == "" || !ok || status >= 500 {
		code = models.EInvalidPayload // a refusal is the sender's doing: a 4xx
	}
	return Outcome{Result: Refused, Refusal: code, Detail: detail}
}

func isJSON(contentType string) bool {
	if contentType == "application/json" { // the usual one, without ParseMediaType's allocations
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// observe logs the outcome with the fields of the callback log line
// (docs/callbacks.md#what-is-stored) and counts it in the callback series
// (docs/api.md#get-metrics).
func (s *Service) observe(ctx context.Context, out Outcome, ev Event, requestID string, took time.Duration) {
	s.metrics.Callbacks.WithLabelValues(out.Provider, out.Word()).Inc()
	s.metrics.CallbackDuration.WithLabelValues(out.Provider, out.Word()).Observe(took.Seconds())
	switch out.Result {
	case models.ResultDuplicate: // the event's unique key found it recorded
		s.metrics.CallbackDuplicates.WithLabelValues(out.Provider).Inc()
		s.metrics.UniqueViolationSaves.WithLabelValues("payment_callbacks").Inc()
	case models.ResultConflict:
		s.metrics.CallbackConflicts.WithLabelValues(out.Provider).Inc()
	}
	if out.refundsFailed > 0 {
		s.metrics.RefundsFailed.WithLabelValues(out.Provider).Add(float64(out.refundsFailed))
	}
	level := slog.LevelInfo
	switch {
	case out.Status() >= 500:
		level = slog.LevelError
	case out.Status() >= 400: // a conflict too: the gateway's doing, answered and counted, nothing for us to fix
		level = slog.LevelWarn
	case out.Result == models.ResultDuplicate:
		level = slog.LevelDebug
	}
	if !s.log.Enabled(ctx, level) {
		return // duplicates log at debug: do not build their attributes for nothing
	}
	s.log.Log(ctx, level, "callback "+out.Word(), "request_id", requestID,
		"provider", out.Provider, "idempotency_key", ev.Key, "order_id", ev.OrderID,
		"transaction_id", ev.TransactionID, "payment_status", ev.Status,
		"status_before", out.statusBefore, "status_after", out.OrderStatus, "result", out.Word(), "reason", out.Reason,
		"detail", out.Detail, "duration_ms", took.Milliseconds())
}
