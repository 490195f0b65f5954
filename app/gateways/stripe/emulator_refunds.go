package stripe

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Stripe's refunds, as the Emulator speaks them (with the idempotency of
// emulator.go):
//
//   - POST /v1/refunds refunds a payment_intent (or a charge) for amount,
//     with reason and metadata (values of at most 500 characters): the
//     refund is succeeded at once, and its charge's amount_refunded grows
//     by it. expand[]=charge answers the charge itself instead of its
//     id: {id ch_…, object charge, amount, amount_refunded, currency,
//     payment_intent, refunded}.
//   - GET /v1/refunds lists the refunds, newest first, of payment_intent
//     or charge when given; limit (1 to 100, 10 by default),
//     starting_after, and expand[]=data.charge.
//   - GET /v1/refunds/{id} is one refund; expand[]=charge.
//
// After a new refund of a PaymentIntent that names its order
// (metadata[order_id]), the sandbox gateway sends Stripe's events of it
// — in Stripe's format, to Sekali's /callbacks/stripe, when it speaks
// that format: refund.updated (the refund, by its id, succeeded) and
// charge.refunded, stating, as Stripe's does, the charge's refunded
// total. A refund that Faults.FailRefundsLater fails is answered
// pending, told by refund.created, and then fails: its charge gets the
// amount back, and refund.failed follows (failure_reason
// expired_or_canceled_card).
//
// The emulation knows a PaymentIntent's amount only when the sandbox
// gateway reported the payment itself (a Stripe-format payment from its
// pay page: Reported): then a refund may leave out its amount (all that
// is left), and one above what is left is refused (400, as Stripe's
// "Refund amount … is greater than unrefunded amount on charge …"; code
// charge_already_refunded once nothing is left). Of any other
// PaymentIntent it accepts every refund that says its amount, and keeps
// the total refunded.

// stripeCharge is the charge of a PaymentIntent, in Stripe's shape: what
// the emulation knows of it.
type stripeCharge struct {
	ID             string  `json:"id"`
	Object         string  `json:"object"`
	Amount         int64   `json:"amount"`
	AmountRefunded int64   `json:"amount_refunded"`
	Currency       string  `json:"currency"`
	PaymentIntent  *string `json:"payment_intent"`
	Refunded       bool    `json:"refunded"`
	known          bool    // Amount is known: the sandbox gateway reported the payment
}

// stripeRefund is a Refund, in Stripe's shape.
type stripeRefund struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	BalanceTransaction *string           `json:"balance_transaction"`
	Charge             *string           `json:"charge"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Metadata           map[string]string `json:"metadata"`
	PaymentIntent      *string           `json:"payment_intent"`
	Reason             *string           `json:"reason"`
	ReceiptNumber      *string           `json:"receipt_number"`
	Status             string            `json:"status"`
	FailureReason      *string           `json:"failure_reason,omitempty"`
	chargeKey          string            // its charge, in Emulator.charges
}

// stripeReasons are the reasons a refund may be asked for.
var stripeReasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

// Stripe's bounds of metadata.
const (
	stripeMetadataKey   = 40
	stripeMetadataValue = 500
)

// paid makes the emulation know that PaymentIntent pi was paid amount
// (Stripe's units) of currency: what its refunds may take.
func (s *Emulator) paid(pi string, amount int64, currency string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.charges.Get(pi)
	if !ok {
		ch = newStripeCharge(pi, "")
		s.charges.Put(pi, ch)
	}
	ch.Amount, ch.Currency, ch.known = amount, strings.ToLower(currency), true
	ch.Refunded = ch.AmountRefunded >= ch.Amount
}

// newStripeCharge is the charge of PaymentIntent pi, or charge id when
// there is no PaymentIntent.
func newStripeCharge(pi, id string) *stripeCharge {
	ch := &stripeCharge{ID: id, Object: "charge"}
	if pi != "" {
		ch.ID, ch.PaymentIntent = "ch_"+pi, &pi // as the Sender names a PaymentIntent's charge
	}
	return ch
}

// createRefund is POST /v1/refunds.
func (s *Emulator) createRefund(form url.Values, sb payments.Sandbox) (emulation.Answer, bool) {
	pi, chargeID := form.Get("payment_intent"), form.Get("charge")
	if pi == "" && chargeID == "" {
		return stripeMissing("payment_intent"), false
	}
	reason := optional(form, "reason")
	if reason != nil && !slices.Contains(stripeReasons, *reason) {
		return stripeInvalid("reason", "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer"), false
	}
	metadata := stripeMetadata(form)
	for k, v := range metadata {
		if n := utf8.RuneCountInString(v); n > stripeMetadataValue || utf8.RuneCountInString(k) > stripeMetadataKey {
			return stripeInvalid("metadata["+k+"]", fmt.Sprintf("Metadata keys can have up to %d characters and values up to %d, "+
				"but you passed in a value that is %d characters.", stripeMetadataKey, stripeMetadataValue, n)), false
		}
	}
	var amount int64
	given := form.Get("amount") != ""
	if given {
		n, err := strconv.ParseInt(form.Get("amount"), 10, 64)
		if err != nil || n < 1 {
			return stripeInvalid("amount", "Invalid positive integer"), false
		}
		amount = n
	}
	key := pi
	if key == "" {
		key = chargeID
	}
	s.mu.Lock()
	ch, exists := s.charges.Get(key)
	known := exists && ch.known
	var refused emulation.Answer
	switch {
	case known && ch.AmountRefunded >= ch.Amount:
		refused = stripeError(http.StatusBadRequest, "invalid_request_error", "charge_already_refunded", "",
			fmt.Sprintf("Charge %s has already been refunded.", ch.ID))
	case known && !given:
		amount = ch.Amount - ch.AmountRefunded
	case known && ch.AmountRefunded+amount > ch.Amount:
		refused = stripeError(http.StatusBadRequest, "invalid_request_error", "", "amount", fmt.Sprintf(
			"Refund amount (%d) is greater than unrefunded amount on charge (%d)", amount, ch.Amount-ch.AmountRefunded))
	case !given:
		refused = stripeError(http.StatusBadRequest, "invalid_request_error", "parameter_missing", "amount",
			"The sandbox gateway knows the amount only of the payments it reported: say the amount to refund.")
	}
	if refused.Body != nil {
		s.mu.Unlock()
		return refused, false
	}
	if !exists {
		ch = newStripeCharge(pi, chargeID)
		s.charges.Put(key, ch)
	}
	if ch.Currency == "" {
		// A refund is in its charge's currency: the one its PaymentIntent
		// was told in, where an event told of it, before the shop's
		// default (Sekali checks the answer's currency).
		ch.Currency = strings.ToLower(form.Get("currency"))
		if intent, ok := s.intents.Get(pi); ch.Currency == "" && ok {
			ch.Currency = strings.ToLower(intent.Currency)
		}
		if ch.Currency == "" {
			ch.Currency = "idr" // the shop's currency: the emulation does not know the payment's
		}
	}
	later := sb.FailLater()
	ch.AmountRefunded += amount
	ch.Refunded = known && ch.AmountRefunded == ch.Amount
	re := &stripeRefund{
		ID: emulation.NewID("re_"), Object: "refund", Amount: amount, Charge: &ch.ID, Created: time.Now().Unix(),
		Currency: ch.Currency, Metadata: metadata, PaymentIntent: ch.PaymentIntent, Reason: reason, Status: "succeeded",
		chargeKey: key,
	}
	if later {
		re.Status = "pending" // accepted; it fails below, after the answer is written
	}
	s.refunds.Put(re.ID, re)
	answered := *re
	answered.Amount, answered.Currency = s.misstate(re.Amount, re.Currency)
	a := emulation.JSON(http.StatusOK, s.shown(&answered, slices.Contains(expands(form), "charge")))
	told := stripeRefundTold{orderID: metadata["order_id"], pi: pi, refund: re.ID, amount: amount, total: ch.AmountRefunded,
		currency: ch.Currency, status: models.RefundStatus(re.Status)}
	s.mu.Unlock()
	if pi == "" {
		return a, true
	}
	var failed *stripeRefundTold
	if later {
		failed = s.fail(re.ID, "expired_or_canceled_card")
	}
	notifyRefund(sb, told, failed)
	return a, true
}

// stripeRefundTold is what Stripe's events say of a refund of a
// PaymentIntent: the refund (Stripe's units), its state, and its
// charge's refunded total.
type stripeRefundTold struct {
	orderID, pi, refund string
	amount, total       int64
	currency            string
	status              models.RefundStatus
	reason              string
}

// fail fails refund id after it was accepted: its charge gets the amount
// back. It returns what Stripe's refund.failed then says.
func (s *Emulator) fail(id, reason string) *stripeRefundTold {
	s.mu.Lock()
	defer s.mu.Unlock()
	re, ok := s.refunds.Get(id)
	if !ok || re.Status != "pending" {
		return nil
	}
	re.Status, re.FailureReason = "failed", &reason
	told := &stripeRefundTold{orderID: re.Metadata["order_id"], refund: re.ID, amount: re.Amount, currency: re.Currency,
		status: models.RefundFailed, reason: reason}
	if re.PaymentIntent != nil {
		told.pi = *re.PaymentIntent
	}
	if ch, ok := s.charges.Get(re.chargeKey); ok {
		ch.AmountRefunded -= re.Amount
		ch.Refunded = false
		told.total = ch.AmountRefunded
	}
	return told
}

// notifyRefund has the sandbox gateway send, when the refund names its
// order, Stripe's events of a new refund — refund.created (or
// refund.updated once made), and charge.refunded with its charge's
// refunded total — then, for one that failed after it was accepted,
// refund.failed: in that order, each until answered.
func notifyRefund(sb payments.Sandbox, told stripeRefundTold, failed *stripeRefundTold) {
	if told.orderID == "" {
		return
	}
	currency := strings.ToUpper(told.currency)
	// refundFact is the event of t, the refund by its id, in its state.
	refundFact := func(t stripeRefundTold) (payments.Fact, bool) {
		amount, ok := MinorUnits(t.amount, currency)
		return payments.Fact{EventID: emulation.NewID("evt_"), OrderID: told.orderID, TransactionID: told.pi,
			Status: models.EventRefunded, Amount: amount, Currency: currency, RefundID: t.refund, RefundStatus: t.status, RefundReason: t.reason}, ok
	}
	made, ok1 := refundFact(told)
	total, ok2 := MinorUnits(told.total, currency)
	if !ok1 || !ok2 {
		return
	}
	facts := []payments.Fact{made, {EventID: emulation.NewID("evt_"), OrderID: told.orderID,
		TransactionID: told.pi, Status: models.EventRefunded, Amount: total, Currency: currency}}
	if failed != nil {
		f, ok := refundFact(*failed)
		if !ok {
			return
		}
		facts = append(facts, f)
	}
	sb.Notify("refund asked through the Stripe API", facts...)
}

// shown is a refund as an answer shows it: its charge as an id, or,
// expanded, the charge itself. Called with the lock held.
func (s *Emulator) shown(re *stripeRefund, expandCharge bool) any {
	ch, ok := s.charges.Get(re.chargeKey)
	if !expandCharge || !ok {
		return re
	}
	charge := *ch
	return struct {
		*stripeRefund
		Charge *stripeCharge `json:"charge"`
	}{re, &charge}
}

// expands are the fields a request asks to expand: expand[]=…, as curl
// writes it, or expand[0]=…, as stripe-go does.
func expands(v url.Values) []string {
	var out []string
	for k, vs := range v {
		if k == "expand" || (strings.HasPrefix(k, "expand[") && strings.HasSuffix(k, "]")) {
			out = append(out, vs...)
		}
	}
	return out
}

// listRefunds is GET /v1/refunds.
func (s *Emulator) listRefunds(r *http.Request) emulation.Answer {
	q := r.URL.Query()
	limit, refused := listLimit(q)
	if refused.Body != nil {
		return refused
	}
	pi, charge, after := q.Get("payment_intent"), q.Get("charge"), q.Get("starting_after")
	expandCharge := slices.Contains(expands(q), "data.charge")
	page := []any{}
	more := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, re := range s.refunds.Newest {
		if after != "" {
			if id == after {
				after = ""
			}
			continue
		}
		if (pi != "" && (re.PaymentIntent == nil || *re.PaymentIntent != pi)) || (charge != "" && *re.Charge != charge) {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, s.shown(re, expandCharge))
	}
	return emulation.JSON(http.StatusOK, map[string]any{"object": "list", "url": "/v1/refunds", "has_more": more, "data": page})
}

// retrieveRefund is GET /v1/refunds/{id}.
func (s *Emulator) retrieveRefund(r *http.Request) emulation.Answer {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	re, ok := s.refunds.Get(id)
	if !ok {
		return stripeError(http.StatusNotFound, "invalid_request_error", "resource_missing", "id",
			fmt.Sprintf("No such refund: '%s'", id))
	}
	return emulation.JSON(http.StatusOK, s.shown(re, slices.Contains(expands(r.URL.Query()), "charge")))
}
