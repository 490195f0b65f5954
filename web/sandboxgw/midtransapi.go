package sandboxgw

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/outbound"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Beside its status API (midtrans.go), the gateway speaks the Midtrans
// calls Sekali makes, with the server key Speak gave it as the basic-auth
// user, in Midtrans's shapes, at midtrans.SandboxAPIPath — the base of
// both of Midtrans's hosts here (Snap's app.… and the Core API's api.…):
//
//   - POST /snap/v1/transactions creates a Snap transaction: 201 with a
//     token and a redirect_url, the sandbox pay page of the order. An
//     order_id is single-use, as at Midtrans: a second create of it is
//     Midtrans's 400 "has already been taken" (or, once the gateway has
//     reported it paid, "has been paid and utilized"), never the first
//     token again.
//   - POST /v2/:id/refund refunds a transaction (by transaction or order
//     id) the gateway reported settled: the refund is approved at once.
//     A refund_key is single-use: a second refund with it is 406
//     "Duplicate refund ID", whether the first was done or not. Refunds
//     add up to the settled gross_amount and no further (414). After a
//     new refund the gateway sends Midtrans's refund notification of it
//     to Sekali's /callbacks/midtrans, as Midtrans writes it: the
//     transaction's gross_amount, every refund so far in refunds (each
//     with its refund_key), their total as refund_amount, and
//     transaction_status partial_refund until they reach the gross
//     amount, then refund. The status API answers with it from then on,
//     as Sekali's confirmation of that notification asks.
//
// Not emulated: the Idempotency-Key header (Midtrans documents it for the
// Core API; whether Snap honours it is unverified), a Snap transaction's
// expiry (accepted, not enforced: the order's own deadline is), the
// second refund notification Midtrans sends once the bank confirms
// (bank_confirmed_at), and a refund retried with the same key after a
// failure (Midtrans allows it within 7 days; here nothing fails after the
// key is taken).

// keptMidtrans bounds the Snap orders and the refund keys the gateway
// remembers, each: the oldest go first.
const keptMidtrans = 10_000

// midtransAPI is the state of the Midtrans calls that act.
type midtransAPI struct {
	mu       sync.Mutex
	snaps    *kept[string]            // token by order id
	refunds  *kept[bool]              // the refund keys used
	refunded *kept[[]payments.Refund] // the refunds made, by transaction id
	// settled is each refunded transaction as it was settled: its
	// refund notifications replace it in the status API.
	settled *kept[midtrans.Notification]
	nextID  int64 // the next refund_chargeback_id
	once    sync.Once
}

func (m *midtransAPI) init() {
	m.once.Do(func() {
		m.snaps, m.refunds, m.refunded = newKept[string](keptMidtrans), newKept[bool](keptMidtrans), newKept[[]payments.Refund](keptMidtrans)
		m.settled = newKept[midtrans.Notification](keptMidtrans)
		m.nextID = 1
	})
}

// Midtrans's error answers: Snap's and the Core API's.
func snapError(status int, messages ...string) apiAnswer {
	return jsonAnswer(status, map[string]any{"error_messages": messages})
}

func coreError(status int, message string) apiAnswer {
	return jsonAnswer(status, map[string]string{"status_code": fmt.Sprint(status), "status_message": message})
}

const midtransFailed = "Sorry, we encountered internal server error. We will fix this soon."

func (g *Gateway) mountMidtrans(e *echo.Echo, mw ...echo.MiddlewareFunc) {
	g.midtransAPI.init()
	e.POST(midtrans.SandboxAPIPath+"/snap/v1/transactions",
		g.apiHandler(snapError(http.StatusInternalServerError, midtransFailed).body, g.createSnap), mw...)
	e.POST(midtrans.SandboxAPIPath+"/v2/:id/refund",
		g.apiHandler(coreError(http.StatusInternalServerError, midtransFailed).body, g.refundMidtrans), mw...)
}

// snapRequest is the part of a Snap request the gateway reads.
type snapRequest struct {
	TransactionDetails struct {
		OrderID     string `json:"order_id"`
		GrossAmount int64  `json:"gross_amount"`
	} `json:"transaction_details"`
	ItemDetails []struct {
		Price    int64 `json:"price"`
		Quantity int64 `json:"quantity"`
	} `json:"item_details"`
	Callbacks struct {
		Finish string `json:"finish"`
	} `json:"callbacks"`
}

// midtransOrderID is what Midtrans allows in an order_id.
var midtransOrderID = regexp.MustCompile(`^[A-Za-z0-9\-_~.]{1,50}$`)

// createSnap is POST /snap/v1/transactions.
func (g *Gateway) createSnap(c echo.Context) apiAnswer {
	sender, ok := g.midtransSender()
	if !ok || !sender.Authorizes(c.Request()) {
		return snapError(http.StatusUnauthorized, "Access denied due to unauthorized transaction, please check client or server key",
			"Visit https://snap-docs.midtrans.com/#request-headers for more details")
	}
	var req snapRequest
	if err := json.NewDecoder(c.Request().Body).Decode(&req); err != nil {
		return snapError(http.StatusBadRequest, "The request body is not valid JSON: "+err.Error())
	}
	order, gross := req.TransactionDetails.OrderID, req.TransactionDetails.GrossAmount
	switch {
	case order == "":
		return snapError(http.StatusBadRequest, "transaction_details.order_id is required")
	case !midtransOrderID.MatchString(order):
		return snapError(http.StatusBadRequest,
			"transaction_details.order_id may contain only letters, digits, dash, underscore, tilde and dot, at most 50")
	case gross < 1:
		return snapError(http.StatusBadRequest, "transaction_details.gross_amount must be at least 1")
	}
	if len(req.ItemDetails) > 0 {
		var sum int64
		for _, it := range req.ItemDetails {
			sum += it.Price * it.Quantity
		}
		if sum != gross {
			return snapError(http.StatusBadRequest, "transaction_details.gross_amount is not equal to the sum of item_details")
		}
	}
	m := &g.midtransAPI
	m.mu.Lock()
	_, taken := m.snaps.get(order)
	token := newUUID()
	if !taken {
		m.snaps.put(order, token)
	}
	m.mu.Unlock()
	if taken {
		if n, ok := g.midtransTransaction(order); ok && (n.TransactionStatus == "settlement" || n.TransactionStatus == "capture") {
			return snapError(http.StatusBadRequest, "transaction_details.order_id has been paid and utilized, please use another order ID")
		}
		return snapError(http.StatusBadRequest, "transaction_details.order_id has already been taken")
	}
	return jsonAnswer(http.StatusCreated, map[string]string{"token": token,
		"redirect_url": c.Scheme() + "://" + c.Request().Host + payPathVia(outbound.OrderOfKey(order), tokenOf(req.Callbacks.Finish), midtrans.Name)})
}

// midtransTransaction is the latest notification the gateway knows of a
// transaction or order id.
func (g *Gateway) midtransTransaction(id string) (midtrans.Notification, bool) {
	g.mu.Lock()
	body, ok := g.midtrans[id]
	g.mu.Unlock()
	var n midtrans.Notification
	if !ok || json.Unmarshal(body, &n) != nil {
		return n, false
	}
	return n, true
}

// refundRequest is Midtrans's refund request.
type refundRequest struct {
	RefundKey string `json:"refund_key"`
	Amount    *int64 `json:"amount"`
	Reason    string `json:"reason"`
}

// refundMidtrans is POST /v2/:id/refund.
func (g *Gateway) refundMidtrans(c echo.Context) apiAnswer {
	sender, ok := g.midtransSender()
	if !ok || !sender.Authorizes(c.Request()) {
		return coreError(http.StatusUnauthorized, "Access denied due to unauthorized transaction, please check client or server key")
	}
	var req refundRequest
	if err := json.NewDecoder(c.Request().Body).Decode(&req); err != nil {
		return coreError(http.StatusBadRequest, "The request body is not valid JSON: "+err.Error())
	}
	if req.RefundKey != "" && !midtrans.RefundKeyPattern.MatchString(req.RefundKey) {
		return coreError(http.StatusBadRequest, "refund_key may contain only letters, digits, dash and underscore")
	}
	latest, ok := g.midtransTransaction(c.Param("id"))
	if !ok {
		return coreError(http.StatusNotFound, "Transaction doesn't exist.")
	}
	m := &g.midtransAPI
	m.mu.Lock()
	defer m.mu.Unlock()
	n, refundedBefore := m.settled.get(latest.TransactionID)
	if !refundedBefore {
		if latest.TransactionStatus != "settlement" && latest.TransactionStatus != "capture" {
			return coreError(http.StatusPreconditionFailed, "Merchant cannot modify the status of the transaction")
		}
		n = latest
	}
	gross, err := payments.ParseAmount(n.GrossAmount, n.Currency)
	if err != nil {
		return coreError(http.StatusInternalServerError, midtransFailed)
	}
	key := req.RefundKey
	if key == "" {
		key = newID("refund-") // Midtrans makes one up
	}
	if _, used := m.refunds.get(key); used {
		return coreError(http.StatusNotAcceptable, "Duplicate refund ID")
	}
	before, _ := m.refunded.get(n.TransactionID)
	var done int64
	for _, r := range before {
		done += r.Amount
	}
	amount := gross - done
	if req.Amount != nil {
		amount = *req.Amount
	}
	if amount < 1 || done+amount > gross {
		return coreError(414, "Refund request is rejected due to invalid amount")
	}
	m.refunds.put(key, true)
	refunds := append(slices.Clone(before), payments.Refund{Key: key, Amount: amount})
	m.refunded.put(n.TransactionID, refunds)
	if !refundedBefore {
		m.settled.put(n.TransactionID, n)
	}
	id := m.nextID
	m.nextID++
	status := "partial_refund"
	if done+amount == gross {
		status = "refund"
	}
	ev := event{format: midtrans.Name, fact: payments.Fact{OrderID: n.OrderID, TransactionID: n.TransactionID,
		Status: models.EventRefunded, Amount: amount, Currency: n.Currency, RefundID: key, Gross: gross, Refunds: refunds}}
	g.rememberMidtransEvent(ev) // the status API lists the refund at once, as Midtrans's does
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.deliver(outbound.OrderOfKey(n.OrderID), ev, "refund asked through the Midtrans API")
	}()
	return jsonAnswer(http.StatusOK, map[string]any{
		"status_code": "200", "status_message": "Success, refund request is approved",
		"transaction_id": n.TransactionID, "order_id": n.OrderID, "payment_type": n.PaymentType,
		"transaction_time": time.Now().Format(time.DateTime), "transaction_status": status,
		"gross_amount": n.GrossAmount, "currency": n.Currency, "refund_chargeback_id": id, "refund_chargeback_uuid": newUUID(),
		"refund_amount": payments.MajorText(amount, n.Currency, 2), "refund_key": key,
	})
}

// newUUID is a random (version 4) UUID, as Snap's tokens are.
func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := fmt.Sprintf("%x", b)
	return strings.Join([]string{h[0:8], h[8:12], h[12:16], h[16:20], h[20:32]}, "-")
}
