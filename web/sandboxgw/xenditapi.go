package sandboxgw

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/payments"
)

// The gateway speaks the part of Xendit's invoice API that Sekali calls
// (once SpeakXenditAPI has given it the secret key; its refunds are in
// xenditapi_refunds.go), at XenditAPIPath,
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
//
// Invoices have no idempotency: Xendit documents no idempotency header
// for them, and does not refuse a second invoice of one external_id (its
// list answers an array). So here each create makes a new invoice, also
// of an external_id already used, and an x-idempotency-key header is
// ignored; a caller that must not make two looks first. Fault switches
// apply to the creates; the list is never faulted.
//
// Deviations: the invoices stay PENDING (paying the order on the sandbox
// pay page sends callbacks, in whichever format the QA panel picks, but
// does not mark the invoice PAID), the 401 message is the gateway's own
// wording, and the invoice carries only the fields Sekali reads and
// those that say what was asked.

// XenditAPIPath is where the gateway answers as Xendit's API: the base URL
// (XENDIT_API_URL) is the sandbox's address followed by it.
const XenditAPIPath = "/sandbox/xendit"

// keptXendit bounds the invoices the Xendit emulation remembers: the
// oldest go first.
const keptXendit = 10_000

// xenditAPI is the Xendit emulation's state.
type xenditAPI struct {
	mu           sync.Mutex
	secretKey    string
	invoices     *kept[*xenditInvoice] // by id
	paidInvoices *kept[*xenditPaid]    // the invoices the gateway reported paid, by id
	refunds      *kept[*xenditRefund]  // by id
	refundKeys   *kept[string]         // the refund of each Idempotency-key
}

// SpeakXenditAPI makes the gateway answer as Xendit's invoice API at
// XenditAPIPath to callers that authenticate with secretKey (xnd_…), as
// Xendit answers Sekali with XENDIT_SECRET_KEY.
func (g *Gateway) SpeakXenditAPI(secretKey string) {
	x := &g.xendit
	x.mu.Lock()
	defer x.mu.Unlock()
	x.secretKey = secretKey
	if x.invoices == nil {
		x.invoices = newKept[*xenditInvoice](keptXendit)
		x.paidInvoices, x.refunds = newKept[*xenditPaid](keptXenditRefunds), newKept[*xenditRefund](keptXenditRefunds)
		x.refundKeys = newKept[string](keptXenditRefunds)
	}
}

func (g *Gateway) mountXendit(e *echo.Echo, mw ...echo.MiddlewareFunc) {
	failed := xenditError(http.StatusInternalServerError, "SERVER_ERROR",
		"The sandbox gateway failed this request on purpose (Faults.FailNext).").body
	create := g.apiHandler(failed, g.xendit.authorized(g.xendit.createInvoice))
	list := func(c echo.Context) error { return writeAnswer(c, g.xendit.authorized(g.xendit.listInvoices)(c)) }
	for _, path := range []string{XenditAPIPath + "/v2/invoices", XenditAPIPath + "/v2/invoices/"} {
		e.POST(path, create, mw...)
		e.GET(path, list, mw...)
	}
	e.POST(XenditAPIPath+"/refunds", g.apiHandler(failed, g.xendit.authorized(g.createXenditRefund)), mw...)
	e.GET(XenditAPIPath+"/refunds", func(c echo.Context) error {
		return writeAnswer(c, g.xendit.authorized(g.xendit.listRefunds)(c))
	}, mw...)
}

// xenditError is Xendit's error answer.
func xenditError(status int, code, message string) apiAnswer {
	return jsonAnswer(status, map[string]string{"error_code": code, "message": message})
}

func xenditInvalid(message string) apiAnswer {
	return xenditError(http.StatusBadRequest, "API_VALIDATION_ERROR", message)
}

// authorized serves call to callers with the secret key as the basic-auth
// user (any password: Xendit's is empty), and answers anyone else
// Xendit's 401.
func (x *xenditAPI) authorized(call func(c echo.Context) apiAnswer) func(c echo.Context) apiAnswer {
	return func(c echo.Context) apiAnswer {
		user, _, _ := c.Request().BasicAuth()
		x.mu.Lock()
		want := x.secretKey
		x.mu.Unlock()
		if want == "" || subtle.ConstantTimeCompare([]byte(user), []byte(want)) != 1 {
			return xenditError(http.StatusUnauthorized, "INVALID_API_KEY",
				"The API key is missing or not valid: give the secret API key as the basic-auth username, with an empty password.")
		}
		return call(c)
	}
}

// xenditInvoice is an invoice, in Xendit's shape.
type xenditInvoice struct {
	ID                 string       `json:"id"`
	ExternalID         string       `json:"external_id"`
	UserID             string       `json:"user_id"`
	Status             string       `json:"status"`
	MerchantName       string       `json:"merchant_name"`
	Amount             json.Number  `json:"amount"`
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

// xenditTime is how Xendit writes a time: UTC, milliseconds.
const xenditTime = "2006-01-02T15:04:05.000Z"

// createInvoice is POST /v2/invoices.
func (x *xenditAPI) createInvoice(c echo.Context) apiAnswer {
	var req xenditInvoiceRequest
	d := json.NewDecoder(c.Request().Body)
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
	duration := 24 * time.Hour
	if req.InvoiceDuration != nil {
		s, err := strconv.ParseInt(string(*req.InvoiceDuration), 10, 64)
		if err != nil || s < 1 {
			return xenditInvalid("invoice_duration must be a positive number of seconds")
		}
		duration = time.Duration(s) * time.Second
	}
	now := time.Now().UTC()
	inv := &xenditInvoice{
		ID: newID("inv_"), ExternalID: req.ExternalID, UserID: "sandbox", Status: "PENDING", MerchantName: "Sekali sandbox",
		Amount: req.Amount, PayerEmail: req.PayerEmail, Description: req.Description,
		ExpiryDate: now.Add(duration).Format(xenditTime), expires: now.Add(duration),
		InvoiceURL: c.Scheme() + "://" + c.Request().Host + payPathVia(req.ExternalID, tokenOf(req.SuccessRedirectURL), "xendit"),
		Created:    now.Format(xenditTime), Updated: now.Format(xenditTime), Currency: currency,
		SuccessRedirectURL: req.SuccessRedirectURL, FailureRedirectURL: req.FailureRedirectURL, Items: req.Items,
	}
	x.mu.Lock()
	x.invoices.put(inv.ID, inv)
	a := jsonAnswer(http.StatusOK, inv)
	x.mu.Unlock()
	return a
}

// listInvoices is GET /v2/invoices?external_id=&limit=.
func (x *xenditAPI) listInvoices(c echo.Context) apiAnswer {
	limit := 10
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return xenditInvalid("limit must be a number from 1 to 100")
		}
		limit = n
	}
	external := c.QueryParam("external_id")
	now := time.Now()
	list := []xenditInvoice{}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, inv := range x.invoices.newest {
		if len(list) == limit {
			break
		}
		if external != "" && inv.ExternalID != external {
			continue
		}
		shown := *inv
		if shown.Status == "PENDING" && !now.Before(inv.expires) {
			shown.Status = "EXPIRED"
		}
		list = append(list, shown)
	}
	return jsonAnswer(http.StatusOK, list)
}
