package sandboxgw

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gateways/xendit"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Xendit's Refunds API, as the gateway speaks it at XenditAPIPath (the
// subset Sekali calls; shapes of docs.xendit.co/apidocs/refund-payment-
// request and xendit-go's refund package):
//
//   - POST /refunds refunds an invoice (invoice_id; a payment_request_id
//     is refused as unknown): amount (a JSON number in the currency's
//     major unit; all that is left when absent), currency (the
//     invoice's, when given), reason (FRAUDULENT, DUPLICATE,
//     REQUESTED_BY_CUSTOMER, CANCELLATION or OTHERS; required),
//     reference_id (at most 255 characters) and metadata (at most 50
//     keys of 40 characters, values of 500). It answers the refund,
//     PENDING, as Xendit does; the gateway settles it at once, so the
//     list shows it SUCCEEDED. The Idempotency-key header is single-use,
//     as at Xendit: a second create with a key is 409 DUPLICATE_ERROR
//     ("duplicate value on idempotency_key, try again with a new key"),
//     never the first refund again. An invoice the gateway does not know
//     is 404 DATA_NOT_FOUND; an amount above what is left, 400
//     MAXIMUM_REFUND_AMOUNT_REACHED. A request refused (or failed by
//     Faults.FailNext) keeps no key.
//   - GET /refunds lists the refunds, newest first, of invoice_id (or
//     payment_request_id) when given: {"data": […], "has_more"}, limit
//     (1 to 100, 10 by default) and after_id.
//
// The fault switches apply to the create; the list is never faulted.
//
// The invoices it refunds are those it reported paid in Xendit's format
// (from its pay page): their id (the callback's id, which Sekali keeps as
// the payment's reference), amount and currency. The invoices its
// invoice API makes stay PENDING, so are not refundable. Once it settled
// a refund of an invoice whose order the refund names
// (metadata.order_id), it sends Xendit's refund callback of it
// (refund.succeeded) to Sekali's /callbacks/xendit, when it speaks
// Xendit's format; a refund that Faults.FailRefundsLater fails is FAILED
// (failure_code REFUND_FAILED), gives the invoice its amount back, and is
// told by refund.failed.

// keptXenditRefunds bounds the refunds, keys and paid invoices the
// emulation remembers, each.
const keptXenditRefunds = 10_000

// xenditPaid is an invoice the gateway reported paid.
type xenditPaid struct {
	amount, refunded int64 // minor units
	currency         string
}

// xenditRefund is a refund, in Xendit's shape.
type xenditRefund struct {
	ID               string            `json:"id"`
	PaymentRequestID *string           `json:"payment_request_id"`
	InvoiceID        string            `json:"invoice_id"`
	Amount           json.Number       `json:"amount"`
	ChannelCode      string            `json:"channel_code"`
	Country          string            `json:"country"`
	Currency         string            `json:"currency"`
	ReferenceID      *string           `json:"reference_id"`
	Reason           string            `json:"reason"`
	Status           string            `json:"status"`
	FailureCode      *string           `json:"failure_code"`
	RefundFeeAmount  *json.Number      `json:"refund_fee_amount"`
	Created          string            `json:"created"`
	Updated          string            `json:"updated"`
	Metadata         map[string]string `json:"metadata"`
}

// xenditRefundRequest is Xendit's create-refund request.
type xenditRefundRequest struct {
	InvoiceID        string            `json:"invoice_id"`
	PaymentRequestID string            `json:"payment_request_id"`
	ReferenceID      *string           `json:"reference_id"`
	Amount           *json.Number      `json:"amount"`
	Currency         string            `json:"currency"`
	Reason           string            `json:"reason"`
	Metadata         map[string]string `json:"metadata"`
}

// xenditReasons are the reasons a refund may give.
var xenditReasons = []string{"FRAUDULENT", "DUPLICATE", "REQUESTED_BY_CUSTOMER", "CANCELLATION", "OTHERS"}

// paid makes the gateway know that invoice id was paid amount (minor
// units) of currency: what its refunds may take. Nothing when the
// gateway does not speak Xendit's API.
func (x *xenditAPI) paid(id string, amount int64, currency string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.paidInvoices == nil {
		return
	}
	p, ok := x.paidInvoices.get(id)
	if !ok {
		p = &xenditPaid{}
		x.paidInvoices.put(id, p)
	}
	p.amount, p.currency = amount, strings.ToUpper(currency)
}

// createXenditRefund is POST /refunds: the refund, and then Xendit's
// callback of what became of it.
func (g *Gateway) createXenditRefund(c echo.Context) apiAnswer {
	a, settled := g.xendit.createRefund(c, g.faults.failLater)
	if settled != nil {
		g.notifyXenditRefund(*settled)
	}
	return a
}

// notifyXenditRefund sends Xendit's refund callback of re — refund.succeeded
// or refund.failed — when the gateway speaks Xendit's format and the
// refund names its order (metadata.order_id).
func (g *Gateway) notifyXenditRefund(re xenditRefund) {
	orderID := re.Metadata["order_id"]
	if _, speaks := g.senders[xendit.Name]; !speaks || orderID == "" {
		return
	}
	amount, err := payments.ParseAmount(string(re.Amount), re.Currency)
	if err != nil {
		return
	}
	status, reason := models.RefundSucceeded, ""
	if re.Status == "FAILED" {
		status, reason = models.RefundFailed, *re.FailureCode
	}
	ev := event{format: xendit.Name, fact: payments.Fact{EventID: newID("evt_"), OrderID: orderID, TransactionID: re.InvoiceID,
		Status: models.EventRefunded, Amount: amount, Currency: re.Currency, RefundID: re.ID, RefundStatus: status, RefundReason: reason}}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.deliver(orderID, ev, "refund asked through the Xendit API")
	}()
}

// createRefund makes the refund of POST /refunds: answered PENDING, and
// settled at once — SUCCEEDED, or FAILED when failLater says so (the
// invoice gets the amount back). It returns the answer and, for a refund
// made, the refund as settled.
func (x *xenditAPI) createRefund(c echo.Context, failLater func() bool) (apiAnswer, *xenditRefund) {
	var req xenditRefundRequest
	d := json.NewDecoder(c.Request().Body)
	d.UseNumber()
	if err := d.Decode(&req); err != nil {
		return xenditInvalid("The request body is not valid JSON: " + err.Error()), nil
	}
	switch {
	case req.InvoiceID == "" && req.PaymentRequestID == "":
		return xenditInvalid("payment_request_id or invoice_id is required"), nil
	case !slices.Contains(xenditReasons, req.Reason):
		return xenditInvalid("reason must be one of " + strings.Join(xenditReasons, ", ")), nil
	case req.ReferenceID != nil && (*req.ReferenceID == "" || utf8.RuneCountInString(*req.ReferenceID) > 255):
		return xenditInvalid("reference_id must be 1 to 255 characters"), nil
	case len(req.Metadata) > 50:
		return xenditInvalid("metadata may have at most 50 keys"), nil
	}
	for k, v := range req.Metadata {
		if utf8.RuneCountInString(k) > 40 || utf8.RuneCountInString(v) > 500 {
			return xenditInvalid("metadata keys may have at most 40 characters, values at most 500"), nil
		}
	}
	key := c.Request().Header.Get(xendit.IdempotencyHeader)
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, used := x.refundKeys.get(key); key != "" && used {
		return xenditError(http.StatusConflict, "DUPLICATE_ERROR", "duplicate value on idempotency_key, try again with a new key"), nil
	}
	p, ok := x.paidInvoices.get(req.InvoiceID)
	if !ok || req.InvoiceID == "" {
		return xenditError(http.StatusNotFound, "DATA_NOT_FOUND", "Data not found"), nil
	}
	if req.Currency != "" && strings.ToUpper(req.Currency) != p.currency {
		return xenditInvalid("currency must be the payment's, " + p.currency), nil
	}
	amount := p.amount - p.refunded
	if req.Amount != nil {
		n, err := payments.ParseAmount(string(*req.Amount), p.currency)
		if err != nil {
			return xenditInvalid("amount must be a positive number that " + p.currency + " can hold"), nil
		}
		amount = n
	}
	if amount < 1 || p.refunded+amount > p.amount {
		return xenditError(http.StatusBadRequest, "MAXIMUM_REFUND_AMOUNT_REACHED",
			"Error because the provided amount is greater than the allowed refund amount."), nil
	}
	p.refunded += amount
	now := time.Now().UTC().Format(xenditTime)
	re := &xenditRefund{
		ID: "rfd-" + newUUID(), InvoiceID: req.InvoiceID, Amount: json.Number(payments.MajorText(amount, p.currency, 0)),
		ChannelCode: "SANDBOX", Country: "ID", Currency: p.currency, ReferenceID: req.ReferenceID, Reason: req.Reason,
		Status: "PENDING", Created: now, Updated: now, Metadata: req.Metadata,
	}
	if key != "" {
		x.refundKeys.put(key, re.ID)
	}
	a := jsonAnswer(http.StatusOK, re)
	settled := *re // the channel refunds at once
	settled.Status = "SUCCEEDED"
	if failLater() {
		failure := "REFUND_FAILED"
		settled.Status, settled.FailureCode = "FAILED", &failure
		p.refunded -= amount
	}
	x.refunds.put(re.ID, &settled)
	return a, &settled
}

// listRefunds is GET /refunds.
func (x *xenditAPI) listRefunds(c echo.Context) apiAnswer {
	limit := 10
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return xenditInvalid("limit must be a number from 1 to 100")
		}
		limit = n
	}
	invoice, request, after := c.QueryParam("invoice_id"), c.QueryParam("payment_request_id"), c.QueryParam("after_id")
	list := []xenditRefund{}
	more := false
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, re := range x.refunds.newest {
		if after != "" {
			if id == after {
				after = ""
			}
			continue
		}
		if (invoice != "" && re.InvoiceID != invoice) || (request != "" && (re.PaymentRequestID == nil || *re.PaymentRequestID != request)) {
			continue
		}
		if len(list) == limit {
			more = true
			break
		}
		list = append(list, *re)
	}
	return jsonAnswer(http.StatusOK, map[string]any{"data": list, "has_more": more})
}
