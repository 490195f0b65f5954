package sandboxgw

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/payments"
)

// Sekali confirms every Midtrans notification with Midtrans's status API
// (its signature covers three fields only). So that the QA panel's
// Midtrans format works where the sandbox gateway runs, the gateway
// answers as that API for the transactions it sent in that format, at
// midtrans.SandboxAPIPath — where MIDTRANS_API_URL points by default while
// the sandbox gateway is on. The replayer and the k6 scripts, which send
// Midtrans notifications of their own, first tell it the transaction's
// state with a PUT of the signed notification.

// keptTransactions bounds the Midtrans transactions the gateway remembers.
const keptTransactions = 100_000

// midtransStatus is GET {midtrans.SandboxAPIPath}/v2/:id/status, with
// the server key as the basic-auth user: the latest notification of the
// transaction (or of the order's latest transaction) in the status API's
// shape; Midtrans's 404 body (with HTTP 200, as Midtrans answers) when it
// has none.
func (g *Gateway) midtransStatus(c echo.Context) error {
	sender, ok := g.midtransSender()
	if !ok || !sender.Authorizes(c.Request()) {
		return c.JSON(http.StatusUnauthorized, map[string]string{"status_code": "401",
			"status_message": "Access denied due to unauthorized transaction, please check client or server key"})
	}
	g.mu.Lock()
	body, found := g.midtrans[c.Param("id")]
	g.mu.Unlock()
	if !found {
		return c.JSON(http.StatusOK, map[string]string{"status_code": "404", "status_message": "Transaction doesn't exist."})
	}
	answer, err := midtrans.StatusAnswer(body)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, answer)
}

// midtransSetStatus is PUT {midtrans.SandboxAPIPath}/v2/:id/status with
// a signed Midtrans notification of transaction :id as its body and the
// server key as the basic-auth user: from now on the status API answers
// with it. (Not Midtrans's API: how a QA tool that sends Midtrans
// notifications itself makes their transactions exist.)
func (g *Gateway) midtransSetStatus(c echo.Context) error {
	sender, ok := g.midtransSender()
	if !ok || !sender.Authorizes(c.Request()) {
		return c.JSON(http.StatusUnauthorized, map[string]string{"error": "the server key is the basic-auth user"})
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, payments.MaxBodyBytes+1))
	if err != nil || len(body) > payments.MaxBodyBytes {
		return c.JSON(http.StatusRequestEntityTooLarge, map[string]string{"error": "the notification is too large"})
	}
	var n midtrans.Notification
	if json.Unmarshal(body, &n) != nil || n.TransactionID != c.Param("id") || n.OrderID == "" {
		return c.JSON(http.StatusUnprocessableEntity, map[string]string{"error": "the body must be a Midtrans notification of this transaction"})
	}
	g.rememberMidtrans(n, body)
	return c.NoContent(http.StatusNoContent)
}

func (g *Gateway) sandboxSender() sandbox.Sender {
	s, _ := g.senders[sandbox.Name].(sandbox.Sender)
	return s
}

func (g *Gateway) midtransSender() (midtrans.Sender, bool) {
	s, ok := g.senders[midtrans.Name].(midtrans.Sender)
	return s, ok
}

// rememberMidtrans keeps the notification as the state of its
// transaction and its order, bounded: the oldest transaction leaves
// first.
func (g *Gateway) rememberMidtrans(n midtrans.Notification, body []byte) {
	body = bytes.Clone(body)
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.midtrans[n.TransactionID]; !ok {
		g.midtransOrder = append(g.midtransOrder, n.TransactionID, n.OrderID)
		if len(g.midtransOrder) > 2*keptTransactions {
			delete(g.midtrans, g.midtransOrder[0])
			delete(g.midtrans, g.midtransOrder[1])
			g.midtransOrder = g.midtransOrder[2:]
		}
	}
	g.midtrans[n.TransactionID] = body
	g.midtrans[n.OrderID] = body
}
