package web

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/models"
)

// problem is an RFC 9457 problem details body with Sekali's `code`
// extension. Callback answers add `result` (and `reason` for a rejection).
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	Result string `json:"result,omitempty"`
	Reason string `json:"reason,omitempty"`
}

const problemContentType = "application/problem+json"

// retryAfterSeconds is the Retry-After of every 503: the database or the
// pool is busy, not gone.
const retryAfterSeconds = "5"

// titles gives each code its short, fixed title.
var titles = map[string]string{
	models.EInvalid:              "Invalid request",
	models.ENotFound:             "Not found",
	models.EInsufficientStock:    "Insufficient stock",
	models.EInvalidTransition:    "Invalid transition",
	models.EIdempotencyMissing:   "Idempotency-Key missing",
	models.EIdempotencyInvalid:   "Idempotency-Key invalid",
	models.EIdempotencyReused:    "Idempotency-Key reused",
	models.ERequestInProgress:    "Request in progress",
	models.EInvalidPayload:       "Invalid payload",
	models.EMissingField:         "Missing field",
	models.EInvalidSignature:     "Invalid signature",
	models.ETooLarge:             "Payload too large",
	models.EUnsupportedMediaType: "Unsupported media type",
	models.EUnauthorized:         "Unauthorized",
	models.EConflict:             "Conflict",
	models.EAlreadyExists:        "Already exists",
	models.ERejected:             "Rejected",
	models.EUnavailable:          "Service unavailable",
	models.EInternal:             "Internal error",
	"method_not_allowed":         "Method not allowed",
}

// newProblem describes code; its status comes from models.HTTPStatus, the
// one map from codes to statuses.
func newProblem(code, detail string) problem {
	status := models.HTTPStatus(code)
	if code == "method_not_allowed" {
		status = http.StatusMethodNotAllowed
	}
	title := titles[code]
	if title == "" {
		title = http.StatusText(status)
	}
	return problem{Type: "/problems/" + code, Title: title, Status: status, Detail: detail, Code: code}
}

// problemOf turns any error into a problem: coded errors keep their code
// and message; Echo's own errors (unknown route, body limit) get the
// nearest code; anything else is an internal error whose details stay in
// the log.
func problemOf(err error) problem {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return newProblem(models.ENotFound, "no such resource")
		case http.StatusMethodNotAllowed:
			return newProblem("method_not_allowed", "this method is not allowed here")
		case http.StatusRequestEntityTooLarge:
			return newProblem(models.ETooLarge, "the body is larger than "+maxAPIBody+"B")
		}
		return newProblem(models.EInternal, http.StatusText(he.Code))
	}
	return newProblem(models.ErrorCode(err), models.ErrorMessage(err))
}

// handleError is the one HTTPErrorHandler: every error a handler returns
// is answered here as problem details, and logged when it is the server's
// fault.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := problemOf(err)
	if p.Status >= 500 {
		s.log.ErrorContext(c.Request().Context(), "request failed", "request_id", requestID(c),
			"route", c.Path(), "status", p.Status, "error", err)
	}
	if p.Status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
	}
	if werr := writeProblem(c, p); werr != nil {
		s.log.WarnContext(c.Request().Context(), "could not write error response", "error", werr)
	}
}

func writeProblem(c echo.Context, p problem) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return c.Blob(p.Status, problemContentType, b)
}
