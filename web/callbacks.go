package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// callbackJSON is the body of a 200 answer to a callback.
type callbackJSON struct {
	Result         string `json:"result"`
	Provider       string `json:"provider"`
	IdempotencyKey string `json:"idempotency_key"`
	OrderID        string `json:"order_id"`
	OrderStatus    string `json:"order_status,omitempty"`
	// Detail says, for an unconfirmed notification, what it and the
	// gateway's API said.
	Detail string `json:"detail,omitempty"`
}

// appendJSON appends a as encoding/json writes it (a test holds the two
// together), without its reflection: every delivery, a gateway's retries
// most of all, is answered with one.
func (a callbackJSON) appendJSON(b []byte) []byte {
	b = canonjson.AppendString(append(b, `{"result":`...), a.Result)
	b = canonjson.AppendString(append(b, `,"provider":`...), a.Provider)
	b = canonjson.AppendString(append(b, `,"idempotency_key":`...), a.IdempotencyKey)
	b = canonjson.AppendString(append(b, `,"order_id":`...), a.OrderID)
	if a.OrderStatus != "" {
		b = canonjson.AppendString(append(b, `,"order_status":`...), a.OrderStatus)
	}
	if a.Detail != "" {
		b = canonjson.AppendString(append(b, `,"detail":`...), a.Detail)
	}
	return append(b, '}')
}

// receiveCallback is POST /callbacks/:provider. Everything from the size
// limit to the audit row happens in the payments pipeline; this handler
// only translates HTTP in and out.
func (s *Server) receiveCallback(c echo.Context) error {
	r := c.Request()
	out := s.deps.Payments.Receive(r.Context(), payments.Delivery{
		Provider:    c.Param("provider"),
		Header:      r.Header,
		Body:        r.Body,
		ContentType: r.Header.Get(echo.HeaderContentType),
		RemoteAddr:  c.RealIP(),
		Client:      s.client(c),
		RequestID:   requestID(c),
	})
	return answerCallback(c, out)
}

// answerCallback answers with what the pipeline decided: the callback
// endpoint's answer, and the admin API's for a delivery applied again.
func answerCallback(c echo.Context, out payments.Outcome) error {
	if out.Code() == "" {
		answer := callbackJSON{
			Result: out.Word(), Provider: out.Provider, IdempotencyKey: out.Key,
			OrderID: out.OrderID, OrderStatus: string(out.OrderStatus),
		}
		if out.Result == models.ResultUnconfirmed {
			answer.Detail = out.Detail
		}
		return c.JSONBlob(http.StatusOK, append(answer.appendJSON(make([]byte, 0, 256)), '\n'))
	}
	p := newProblem(out.Code(), out.Detail)
	p.Result, p.Reason = out.Word(), out.Reason
	if out.Code() == models.EUnavailable {
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
	}
	return writeProblem(c, p)
}
