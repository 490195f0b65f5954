package xendit

import (
	"cmp"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// The Emulator speaks the part of Xendit's invoice API that Sekali calls
// (its refunds are below), at EmulatorPath of the sandbox gateway,
// with the secret key as the basic-auth user, in Xendit's shapes
// (xendit-go v7's invoice package; errors {"error_code", "message"}):
//
//   - POST /v2/invoices (and /v2/invoices/, as xendit-go sends it) creates
//     an invoice: external_id, amount (a JSON number in the currency's
//     major unit), currency (IDR by default), payer_email, description,
//     invoice_duration (seconds; 24 hours by default),
//     success_redirect_url, failure_redirect_url and items. It answers the
//     invoice, PENDING, whose invoice_url is the sandbox pay page of the
//     order named by external_id, opened with the order's access token
//     that success_redirect_url carries (?t=).
//   - GET /v2/invoices lists the invoices, newest first, of external_id
//     when it is given, at most limit (10 by default, up to 100): an
//     array, empty when there are none — what Sekali's status client and
//     page opener read. A PENDING invoice past its expiry_date is listed
//     EXPIRED.
//   - GET /v2/invoices/{id} answers one invoice, shown as the list shows
//     it, or 404 INVOICE_NOT_FOUND_ERROR — what Sekali's provider asks
//     before it applies a paid callback (Provider.Confirm).
//
// The invoices it knows are those it made, and those the sandbox gateway
// told Sekali of in Xendit's format — from its pay page and its QA panel
// (Notified, Reported) — as the callback states them: a payment Xendit
// calls back about exists at Xendit. A tool that sends Xendit callbacks
// of its own (the replayer, the k6 scripts) tells it first, with PUT
// /v2/invoices/{id} of the callback as sent — its X-Callback-Token (the
// emulation's callback token) and its body — answered 204; not Xendit's
// API, and the one call authenticated by the token (Sender.Tell).
//
// Invoices have no idempotency: Xendit documents no idempotency header
// for them, and does not refuse a second invoice of one external_id (its
// list answers an array). So here each create makes a new invoice, also
// of an external_id already used, and an x-idempotency-key header is
// ignored; a caller that must not make two looks first. Fault switches
// apply to the creates; the reads are never faulted.
//
// Deviations: the invoices it makes stay PENDING (the sandbox pay page
// pays the order under a transaction of its own, whose invoice it then
// knows PAID, in whichever format the QA panel picks), the 401 and 404
// messages are the gateway's own wording, and the invoice carries only
// the fields Sekali reads and those that say what was asked.

// EmulatorPath is where the sandbox gateway answers as Xendit's API: the
// base URL (XENDIT_API_URL) is the sandbox's address followed by it.
const EmulatorPath = "/sandbox/xendit"

// keptXendit bounds the invoices the Xendit emulation remembers: the
// oldest go first.
const keptXendit = 10_000

// Emulator is the Xendit emulation's state (payments.Emulator).
type Emulator struct {
	mu            sync.Mutex
	secretKey     string
	callbackToken string                          // authenticates a tool's PUT of an invoice; "" refuses every one
	invoices      *emulation.Kept[*xenditInvoice] // by id
	paidInvoices  *emulation.Kept[*xenditPaid]    // the invoices the sandbox reported paid, by id
	refunds       *emulation.Kept[*xenditRefund]  // by id
	refundKeys    *emulation.Kept[string]         // the refund of each Idempotency-key
	// Misstate makes the answers of invoice and refund creates state
	// another amount or currency than they were made with
	// (MisstateNext).
	emulation.Misstate
}

// NewEmulator answers as Xendit's API to callers that authenticate with
// secretKey (xnd_…), as Xendit answers Sekali with XENDIT_SECRET_KEY, and
// learns an invoice from a callback signed with callbackToken
// (XENDIT_CALLBACK_TOKEN; "" for none).
func NewEmulator(secretKey, callbackToken string) *Emulator {
	return &Emulator{secretKey: secretKey, callbackToken: callbackToken,
		invoices:     emulation.NewKept[*xenditInvoice](keptXendit),
		paidInvoices: emulation.NewKept[*xenditPaid](keptXenditRefunds),
		refunds:      emulation.NewKept[*xenditRefund](keptXenditRefunds),
		refundKeys:   emulation.NewKept[string](keptXenditRefunds),
	}
}

// Provider implements payments.Emulator.
func (*Emulator) Provider() string { return Name }

// Path implements payments.Emulator.
func (*Emulator) Path() string { return EmulatorPath }

// Handler implements payments.Emulator.
func (x *Emulator) Handler(sb payments.Sandbox) http.Handler {
	failed := xenditError(http.StatusInternalServerError, "SERVER_ERROR",
		"The sandbox gateway failed this request on purpose (Faults.FailNext).").Body
	faulted := func(call func(r *http.Request) emulation.Answer) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			sb.Call(w, r, failed, func() (int, http.Header, []byte) {
				a := x.authorized(r, call)
				return a.Status, a.Header, a.Body
			})
		}
	}
	plain := func(call func(r *http.Request) emulation.Answer) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { x.authorized(r, call).Write(w) }
	}
	mux := http.NewServeMux()
	create := faulted(func(r *http.Request) emulation.Answer { return x.createInvoice(r, sb) })
	for _, path := range []string{"/v2/invoices", "/v2/invoices/{$}"} { // with and without the slash, as xendit-go sends it
		mux.Handle("POST "+path, create)
		mux.Handle("GET "+path, plain(x.listInvoices))
	}
	mux.Handle("GET /v2/invoices/{id}", plain(x.getInvoice))
	mux.HandleFunc("PUT /v2/invoices/{id}", func(w http.ResponseWriter, r *http.Request) { x.tell(r).Write(w) })
	mux.Handle("POST /refunds", faulted(func(r *http.Request) emulation.Answer { return x.createRefund(r, sb) }))
	mux.Handle("GET /refunds", plain(x.listRefunds))
	return mux
}

// xenditError is Xendit's error answer.
func xenditError(status int, code, message string) emulation.Answer {
	return emulation.JSON(status, map[string]string{"error_code": code, "message": message})
}

func xenditInvalid(message string) emulation.Answer {
	return xenditError(http.StatusBadRequest, "API_VALIDATION_ERROR", message)
}

// authorized answers call to callers with the secret key as the
// basic-auth user (any password: Xendit's is empty), and anyone else
// Xendit's 401.
func (x *Emulator) authorized(r *http.Request, call func(r *http.Request) emulation.Answer) emulation.Answer {
	user, _, _ := r.BasicAuth()
	if subtle.ConstantTimeCompare([]byte(user), []byte(x.secretKey)) != 1 {
		return xenditError(http.StatusUnauthorized, "INVALID_API_KEY",
			"The API key is missing or not valid: give the secret API key as the basic-auth username, with an empty password.")
	}
	return call(r)
}

// xenditInvoice is an invoice, in Xendit's shape.
type xenditInvoice struct {
	ID                 string       `json:"id"`
	ExternalID         string       `json:"external_id"`
	UserID             string       `json:"user_id"`
	Status             string       `json:"status"`
	MerchantName       string       `json:"merchant_name"`
	Amount             json.Number  `json:"amount"`
	PaidAmount         json.Number  `json:"paid_amount,omitempty"`
	PayerEmail         string       `json:"payer_email,omitempty"`
	Description        string       `json:"description,omitempty"`
	ExpiryDate         string       `json:"expiry_date"`
	InvoiceURL         string       `json:"invoice_url"`
	ShouldSendEmail    bool         `json:"should_send_email"`
	Created            string       `json:"created"`
	Updated            string       `json:"updated"`
	Currency           string       `json:"currency"`
	SuccessRedirectURL string       `json:"success_redirect_url,omitempty"`
	FailureRedirectURL string       `json:"failure_redirect_url,omitempty"`
	Items              []xenditItem `json:"items,omitempty"`
	expires            time.Time    // ExpiryDate
}

type xenditItem struct {
	Name        string      `json:"name"`
	Quantity    int64       `json:"quantity"`
	Price       json.Number `json:"price"`
	Category    string      `json:"category,omitempty"`
	ReferenceID string      `json:"reference_id,omitempty"`
}

// xenditInvoiceRequest is the part of Xendit's create-invoice request the
// gateway reads.
type xenditInvoiceRequest struct {
	ExternalID         string       `json:"external_id"`
	Amount             json.Number  `json:"amount"`
	Currency           string       `json:"currency"`
	PayerEmail         string       `json:"payer_email"`
	Description        string       `json:"description"`
	InvoiceDuration    *json.Number `json:"invoice_duration"`
	SuccessRedirectURL string       `json:"success_redirect_url"`
	FailureRedirectURL string       `json:"failure_redirect_url"`
	Items              []xenditItem `json:"items"`
}

// invoiceDuration is how long an invoice is payable when its creator
// does not say: Xendit's default.
const invoiceDuration = 24 * time.Hour

// xenditTime is how Xendit writes a time: UTC, milliseconds.
const xenditTime = "2006-01-02T15:04:05.000Z"

// createInvoice is POST /v2/invoices.
func (x *Emulator) createInvoice(r *http.Request, sb payments.Sandbox) emulation.Answer {
	var req xenditInvoiceRequest
	d := json.NewDecoder(r.Body)
	d.UseNumber()
	if err := d.Decode(&req); err != nil {
		return xenditInvalid("The request body is not valid JSON: " + err.Error())
	}
	currency := strings.ToUpper(req.Currency)
	if currency == "" {
		currency = "IDR"
	}
	switch {
	case req.ExternalID == "":
		return xenditInvalid("external_id is required")
	case req.Amount == "":
		return xenditInvalid("amount is required")
	}
	if amount, err := payments.ParseAmount(string(req.Amount), currency); err != nil || amount < 1 {
		return xenditInvalid("amount must be a positive number that " + currency + " can hold")
	}
	for _, it := range req.Items {
		if _, err := payments.ParseAmount(string(it.Price), currency); err != nil || it.Name == "" || it.Quantity < 1 {
			return xenditInvalid("each item needs a name, a positive quantity and a price")
		}
	}
	duration := invoiceDuration
	if req.InvoiceDuration != nil {
		s, err := strconv.ParseInt(string(*req.InvoiceDuration), 10, 64)
		if err != nil || s < 1 {
			return xenditInvalid("invoice_duration must be a positive number of seconds")
		}
		duration = time.Duration(s) * time.Second
	}
	now := time.Now().UTC()
	inv := &xenditInvoice{
		ID: emulation.NewID("inv_"), ExternalID: req.ExternalID, UserID: "sandbox", Status: "PENDING", MerchantName: "Sekali sandbox",
		Amount: req.Amount, PayerEmail: req.PayerEmail, Description: req.Description,
		ExpiryDate: now.Add(duration).Format(xenditTime), expires: now.Add(duration),
		InvoiceURL: sb.PayURL(r, req.ExternalID, req.SuccessRedirectURL),
		Created:    now.Format(xenditTime), Updated: now.Format(xenditTime), Currency: currency,
		SuccessRedirectURL: req.SuccessRedirectURL, FailureRedirectURL: req.FailureRedirectURL, Items: req.Items,
	}
	x.mu.Lock()
	x.invoices.Put(inv.ID, inv)
	answered := *inv
	answered.Amount, answered.Currency = x.misstate(inv.Amount, inv.Currency)
	a := emulation.JSON(http.StatusOK, &answered)
	x.mu.Unlock()
	return a
}

// misstate is amount (major units) of currency as the answer being
// written states it: as it is, unless the Misstate switch says
// otherwise.
func (x *Emulator) misstate(amount json.Number, currency string) (json.Number, string) {
	by, other, ok := x.Misstated()
	if !ok {
		return amount, currency
	}
	minor, err := payments.ParseAmount(string(amount), currency)
	if err != nil {
		return amount, currency
	}
	if other != "" {
		currency = strings.ToUpper(other)
	}
	return json.Number(payments.MajorText(minor+by, currency, 0)), currency
}

// shown is an invoice as the API shows it at now: a PENDING one past its
// expiry_date is EXPIRED. Called with the lock held.
func shown(inv *xenditInvoice, now time.Time) xenditInvoice {
	s := *inv
	if s.Status == "PENDING" && !now.Before(inv.expires) {
		s.Status = "EXPIRED"
	}
	return s
}

// getInvoice is GET /v2/invoices/{id}.
func (x *Emulator) getInvoice(r *http.Request) emulation.Answer {
	x.mu.Lock()
	defer x.mu.Unlock()
	inv, ok := x.invoices.Get(r.PathValue("id"))
	if !ok {
		return xenditError(http.StatusNotFound, "INVOICE_NOT_FOUND_ERROR", "The invoice was not found.")
	}
	return emulation.JSON(http.StatusOK, shown(inv, time.Now()))
}

// tell is PUT /v2/invoices/{id} of a Xendit invoice callback of invoice
// {id}, with the callback's X-Callback-Token: from now on the invoice is
// as the callback states it. (Not Xendit's API: how a tool that sends
// Xendit callbacks itself makes their invoices exist.)
func (x *Emulator) tell(r *http.Request) emulation.Answer {
	got := r.Header.Values(TokenHeader)
	if x.callbackToken == "" || len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), []byte(x.callbackToken)) != 1 {
		return xenditError(http.StatusUnauthorized, "INVALID_CALLBACK_TOKEN",
			"The X-Callback-Token header must be the callback verification token the gateway was given.")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, payments.MaxBodyBytes+1))
	if err != nil || len(body) > payments.MaxBodyBytes {
		return xenditInvalid("The callback is too large.")
	}
	inv, err := calledBack(body)
	if err != nil || inv.ID != r.PathValue("id") {
		return xenditInvalid("The body must be a Xendit invoice callback of this invoice: " + fmt.Sprint(err))
	}
	x.mu.Lock()
	x.remember(inv)
	x.mu.Unlock()
	return emulation.Answer{Status: http.StatusNoContent}
}

// calledBack is the invoice an invoice callback states: its id,
// external_id, status, amount, paid_amount and currency.
func calledBack(body []byte) (xenditInvoice, error) {
	var inv xenditInvoice
	if err := json.Unmarshal(body, &inv); err != nil {
		return inv, err
	}
	inv.Currency = strings.ToUpper(inv.Currency)
	switch {
	case inv.ID == "" || inv.ExternalID == "":
		return inv, errors.New("id and external_id are required")
	case !slices.Contains([]string{"PENDING", "PAID", "SETTLED", "EXPIRED"}, inv.Status):
		return inv, errors.New("status must be PENDING, PAID, SETTLED or EXPIRED")
	}
	for _, n := range []json.Number{inv.Amount, inv.PaidAmount} {
		if _, err := payments.ParseAmount(cmp.Or(string(n), "0"), inv.Currency); err != nil {
			return inv, fmt.Errorf("amount and paid_amount must be amounts of %s", inv.Currency)
		}
	}
	return inv, nil
}

// remember makes an invoice as a callback states it: the invoice of its
// id — made now, with the default duration, unless it exists — with the
// callback's order, status and amounts. Called with the lock held.
func (x *Emulator) remember(said xenditInvoice) {
	now := time.Now().UTC()
	inv, ok := x.invoices.Get(said.ID)
	if !ok {
		inv = &xenditInvoice{ID: said.ID, UserID: "sandbox", MerchantName: "Sekali sandbox",
			ExpiryDate: now.Add(invoiceDuration).Format(xenditTime), expires: now.Add(invoiceDuration), Created: now.Format(xenditTime)}
		x.invoices.Put(said.ID, inv)
	}
	inv.ExternalID, inv.Status, inv.Currency = said.ExternalID, said.Status, said.Currency
	inv.Amount, inv.PaidAmount, inv.Updated = said.Amount, said.PaidAmount, now.Format(xenditTime)
}

// listLimit is a list's ?limit=: 10 by default, at most 100.
func listLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 10, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		return 0, errors.New("limit must be a number from 1 to 100")
	}
	return n, nil
}

// listInvoices is GET /v2/invoices?external_id=&limit=.
func (x *Emulator) listInvoices(r *http.Request) emulation.Answer {
	limit, err := listLimit(r)
	if err != nil {
		return xenditInvalid(err.Error())
	}
	external := r.URL.Query().Get("external_id")
	now := time.Now()
	list := []xenditInvoice{}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, inv := range x.invoices.Newest {
		if len(list) == limit {
			break
		}
		if external != "" && inv.ExternalID != external {
			continue
		}
		list = append(list, shown(inv, now))
	}
	return emulation.JSON(http.StatusOK, list)
}

// Xendit's Refunds API, as the gateway speaks it at EmulatorPath (the
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

// Reported implements payments.Emulator: the sandbox gateway reported
// invoice f.TransactionID paid f.Amount (minor units) of f.Currency,
// what its refunds may take; and from now on the API shows the invoice
// PAID for its order, as Xendit's does once it is paid.
func (x *Emulator) Reported(f payments.Fact) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p, ok := x.paidInvoices.Get(f.TransactionID)
	if !ok {
		p = &xenditPaid{}
		x.paidInvoices.Put(f.TransactionID, p)
	}
	p.amount, p.currency = f.Amount, strings.ToUpper(f.Currency)
	if f.OrderID != "" {
		amount := json.Number(payments.MajorText(f.Amount, p.currency, 0))
		x.remember(xenditInvoice{ID: f.TransactionID, ExternalID: f.OrderID, Status: "PAID", Amount: amount, PaidAmount: amount, Currency: p.currency})
	}
}

// Notified implements payments.Emulator: the invoice of each invoice
// callback the sandbox gateway sends in Xendit's format is, from now on,
// as the callback states it — Xendit calls back about its own invoices.
// (Its refund callbacks tell of refunds the emulation made.)
func (x *Emulator) Notified(_ payments.Fact, body []byte) {
	inv, err := calledBack(body)
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remember(inv)
}

// notify sends Xendit's refund callback of re — refund.succeeded or
// refund.failed — when the refund names its order (metadata.order_id).
func notify(sb payments.Sandbox, re xenditRefund) {
	orderID := re.Metadata["order_id"]
	if orderID == "" {
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
	sb.Notify("refund asked through the Xendit API", payments.Fact{EventID: emulation.NewID("evt_"), OrderID: orderID,
		TransactionID: re.InvoiceID, Status: models.EventRefunded, Amount: amount, Currency: re.Currency, RefundID: re.ID,
		RefundStatus: status, RefundReason: reason})
}

// createRefund is POST /refunds: answered PENDING, and settled at once —
// SUCCEEDED, or FAILED when the sandbox says it fails later (the invoice
// gets the amount back) — and then told by Xendit's callback.
func (x *Emulator) createRefund(r *http.Request, sb payments.Sandbox) emulation.Answer {
	a, settled := x.refund(r, sb.FailLater)
	if settled != nil {
		notify(sb, *settled)
	}
	return a
}

// refund makes the refund of POST /refunds. It returns the answer and,
// for a refund made, the refund as settled.
func (x *Emulator) refund(r *http.Request, failLater func() bool) (emulation.Answer, *xenditRefund) {
	var req xenditRefundRequest
	d := json.NewDecoder(r.Body)
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
	key := r.Header.Get(IdempotencyHeader)
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, used := x.refundKeys.Get(key); key != "" && used {
		return xenditError(http.StatusConflict, "DUPLICATE_ERROR", "duplicate value on idempotency_key, try again with a new key"), nil
	}
	p, ok := x.paidInvoices.Get(req.InvoiceID)
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
		ID: "rfd-" + emulation.NewUUID(), InvoiceID: req.InvoiceID, Amount: json.Number(payments.MajorText(amount, p.currency, 0)),
		ChannelCode: "SANDBOX", Country: "ID", Currency: p.currency, ReferenceID: req.ReferenceID, Reason: req.Reason,
		Status: "PENDING", Created: now, Updated: now, Metadata: req.Metadata,
	}
	if key != "" {
		x.refundKeys.Put(key, re.ID)
	}
	answered := *re
	answered.Amount, answered.Currency = x.misstate(re.Amount, re.Currency)
	a := emulation.JSON(http.StatusOK, &answered)
	settled := *re // the channel refunds at once
	settled.Status = "SUCCEEDED"
	if failLater() {
		failure := "REFUND_FAILED"
		settled.Status, settled.FailureCode = "FAILED", &failure
		p.refunded -= amount
	}
	x.refunds.Put(re.ID, &settled)
	return a, &settled
}

// listRefunds is GET /refunds.
func (x *Emulator) listRefunds(r *http.Request) emulation.Answer {
	limit, err := listLimit(r)
	if err != nil {
		return xenditInvalid(err.Error())
	}
	invoice, request, after := r.URL.Query().Get("invoice_id"), r.URL.Query().Get("payment_request_id"), r.URL.Query().Get("after_id")
	list := []xenditRefund{}
	more := false
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, re := range x.refunds.Newest {
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
	return emulation.JSON(http.StatusOK, map[string]any{"data": list, "has_more": more})
}
