package midtrans

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// Beside its status API (emulator.go), the Emulator speaks the Midtrans
// calls Sekali makes, at SandboxAPIPath — the base of both of Midtrans's
// hosts here (Snap's app.… and the Core API's api.…):
//
//   - POST /snap/v1/transactions creates a Snap transaction: 201 with a
//     token and a redirect_url, the sandbox pay page of the order. An
//     order_id is single-use, as at Midtrans: a second create of it is
//     Midtrans's 400 "has already been taken" (or, once the sandbox
//     gateway has reported it paid, "has been paid and utilized"), never
//     the first token again.
//   - POST /v2/{id}/refund refunds a transaction (by transaction or order
//     id) the sandbox gateway reported settled: the refund is approved at
//     once. A refund_key is single-use: a second refund with it is 406
//     "Duplicate refund ID", whether the first was done or not. Refunds
//     add up to the settled gross_amount and no further (414). After a
//     new refund the sandbox gateway sends Midtrans's refund
//     notification of it to Sekali's /callbacks/midtrans, as Midtrans
//     writes it: the transaction's gross_amount, every refund so far in
//     refunds (each with its refund_key), their total as refund_amount,
//     and transaction_status partial_refund until they reach the gross
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

// keptMidtrans bounds the Snap orders, the refund keys and the refunded
// transactions the emulation remembers, each: the oldest go first.
const keptMidtrans = 10_000

// Midtrans's error answers: Snap's and the Core API's.
func snapError(status int, messages ...string) emulation.Answer {
	return emulation.JSON(status, map[string]any{"error_messages": messages})
}

func coreError(status int, message string) emulation.Answer {
	return emulation.JSON(status, map[string]string{"status_code": fmt.Sprint(status), "status_message": message})
}

const midtransFailed = "Sorry, we encountered internal server error. We will fix this soon."

// snapRequest is the part of a Snap request the emulation reads.
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
func (m *Emulator) createSnap(r *http.Request, sb payments.Sandbox) emulation.Answer {
	if !m.sender.Authorizes(r) {
		return snapError(http.StatusUnauthorized, "Access denied due to unauthorized transaction, please check client or server key",
			"Visit https://snap-docs.midtrans.com/#request-headers for more details")
	}
	var req snapRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
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
	m.mu.Lock()
	_, taken := m.snaps.Get(order)
	token := emulation.NewUUID()
	if !taken {
		m.snaps.Put(order, token)
	}
	n, known := m.latest(order)
	m.mu.Unlock()
	if taken {
		if known && (n.TransactionStatus == "settlement" || n.TransactionStatus == "capture") {
			return snapError(http.StatusBadRequest, "transaction_details.order_id has been paid and utilized, please use another order ID")
		}
		return snapError(http.StatusBadRequest, "transaction_details.order_id has already been taken")
	}
	return emulation.JSON(http.StatusCreated, map[string]string{"token": token,
		"redirect_url": sb.PayURL(r, order, req.Callbacks.Finish)})
}

// emulatedRefund is Midtrans's refund request, as the emulation reads it.
type emulatedRefund struct {
	RefundKey string `json:"refund_key"`
	Amount    *int64 `json:"amount"`
	Reason    string `json:"reason"`
}

// refund is POST /v2/{id}/refund.
func (m *Emulator) refund(r *http.Request, sb payments.Sandbox) emulation.Answer {
	if !m.sender.Authorizes(r) {
		return coreError(http.StatusUnauthorized, "Access denied due to unauthorized transaction, please check client or server key")
	}
	var req emulatedRefund
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return coreError(http.StatusBadRequest, "The request body is not valid JSON: "+err.Error())
	}
	if req.RefundKey != "" && !RefundKeyPattern.MatchString(req.RefundKey) {
		return coreError(http.StatusBadRequest, "refund_key may contain only letters, digits, dash and underscore")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	latest, ok := m.latest(r.PathValue("id"))
	if !ok {
		return coreError(http.StatusNotFound, "Transaction doesn't exist.")
	}
	n, refundedBefore := m.settled.Get(latest.TransactionID)
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
		key = emulation.NewID("refund-") // Midtrans makes one up
	}
	if _, used := m.refundKeys.Get(key); used {
		return coreError(http.StatusNotAcceptable, "Duplicate refund ID")
	}
	before, _ := m.refunded.Get(n.TransactionID)
	var done int64
	for _, rf := range before {
		done += rf.Amount
	}
	amount := gross - done
	if req.Amount != nil {
		amount = *req.Amount
	}
	if amount < 1 || done+amount > gross {
		return coreError(414, "Refund request is rejected due to invalid amount")
	}
	m.refundKeys.Put(key, true)
	refunds := append(slices.Clone(before), payments.Refund{Key: key, Amount: amount})
	m.refunded.Put(n.TransactionID, refunds)
	if !refundedBefore {
		m.settled.Put(n.TransactionID, n)
	}
	id := m.nextID
	m.nextID++
	status := "partial_refund"
	if done+amount == gross {
		status = "refund"
	}
	f := payments.Fact{OrderID: n.OrderID, TransactionID: n.TransactionID, Status: models.EventRefunded, Amount: amount,
		Currency: n.Currency, RefundID: key, Gross: gross, Refunds: refunds}
	if _, body, err := payments.Notification(m.sender, f, time.Now()); err == nil {
		var told Notification
		if json.Unmarshal(body, &told) == nil {
			m.remember(told, body) // the status API lists the refund at once, as Midtrans's does
		}
	}
	sb.Notify("refund asked through the Midtrans API", f)
	answered, currency := amount, n.Currency
	if by, other, ok := m.Misstated(); ok {
		answered, currency = amount+by, cmp.Or(other, currency)
	}
	return emulation.JSON(http.StatusOK, map[string]any{
		"status_code": "200", "status_message": "Success, refund request is approved",
		"transaction_id": n.TransactionID, "order_id": n.OrderID, "payment_type": n.PaymentType,
		"transaction_time": time.Now().Format(time.DateTime), "transaction_status": status,
		"gross_amount": n.GrossAmount, "currency": currency, "refund_chargeback_id": id, "refund_chargeback_uuid": emulation.NewUUID(),
		"refund_amount": payments.MajorText(answered, currency, 2), "refund_key": key,
	})
}
