package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
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

// statusOf is the one place where an error code becomes an HTTP status
// (app/payments answers callbacks with the same statuses; a test holds
// the two to each other).
var statusOf = map[string]int{
	models.EInvalid:              422,
	models.ENotFound:             404,
	models.EInsufficientStock:    409,
	models.EInvalidTransition:    409,
	models.EChargeDisputed:       409,
	models.EIdempotencyMissing:   400,
	models.EIdempotencyInvalid:   400,
	models.EIdempotencyTooShort:  422,
	models.EIdempotencyReused:    422,
	models.ERequestInProgress:    409,
	models.EInvalidPayload:       400,
	models.EUnknownParameter:     400,
	models.EMissingField:         422,
	models.EInvalidSignature:     401,
	models.ETooLarge:             413,
	models.EUnsupportedMediaType: 415,
	models.EUnauthorized:         401,
	models.EConflict:             409,
	models.EAlreadyExists:        409,
	models.ERejected:             422,
	models.EForbidden:            403,
	models.EMethodNotAllowed:     405,
	models.ETooManyRequests:      429,
	models.EUnavailable:          503,
	models.EInternal:             500,
}

// httpStatus is the HTTP status of an error code: 200 for no code, 500
// for a code it does not know.
func httpStatus(code string) int {
	if code == "" {
		return http.StatusOK
	}
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// statusOfError is the HTTP status of err's code.
func statusOfError(err error) int { return httpStatus(models.ErrorCode(err)) }

// titles gives each code its short, fixed title.
var titles = map[string]string{
	models.EInvalid:              "Invalid request",
	models.ENotFound:             "Not found",
	models.EInsufficientStock:    "Insufficient stock",
	models.EInvalidTransition:    "Invalid transition",
	models.EChargeDisputed:       "Charge disputed",
	models.EIdempotencyMissing:   "Idempotency-Key missing",
	models.EIdempotencyInvalid:   "Idempotency-Key invalid",
	models.EIdempotencyReused:    "Idempotency-Key reused",
	models.ERequestInProgress:    "Request in progress",
	models.EInvalidPayload:       "Invalid payload",
	models.EUnknownParameter:     "Unknown parameter",
	models.EMissingField:         "Missing field",
	models.EInvalidSignature:     "Invalid signature",
	models.ETooLarge:             "Payload too large",
	models.EUnsupportedMediaType: "Unsupported media type",
	models.EUnauthorized:         "Unauthorized",
	models.EConflict:             "Conflict",
	models.EAlreadyExists:        "Already exists",
	models.ERejected:             "Rejected",
	models.EUnavailable:          "Service unavailable",
	models.EForbidden:            "Forbidden",
	models.EMethodNotAllowed:     "Method not allowed",
	models.ETooManyRequests:      "Too many requests",
	models.EInternal:             "Internal error",
}

// newProblem describes code; its status comes from statusOf.
func newProblem(code, detail string) problem {
	status := httpStatus(code)
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
			return newProblem(models.EMethodNotAllowed, "this method is not allowed here")
		case http.StatusRequestEntityTooLarge:
			return newProblem(models.ETooLarge, "the body is larger than "+maxAPIBody+"B")
		}
		return newProblem(models.EInternal, http.StatusText(he.Code))
	}
	return newProblem(models.ErrorCode(err), models.ErrorMessage(err))
}

// handleError is the one HTTPErrorHandler: every error a handler returns
// is answered here, in the form the client asked for — problem details
// for the JSON API and the callbacks (and any client that does not ask
// for HTML), a small message for an htmx request, an HTML page for a
// browser — and logged when it is the server's fault.
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
	var werr error
	switch {
	case wantsProblemJSON(c):
		werr = writeProblem(c, p)
	case isHTMX(c):
		// htmx swaps the message into the page's #flash, whatever
		// element asked.
		c.Response().Header().Set("HX-Retarget", "#flash")
		c.Response().Header().Set("HX-Reswap", "innerHTML")
		werr = renderHTML(c, p.Status, views.ErrorPartial(viewProblem(p)))
	case !strings.HasPrefix(c.Request().URL.Path, "/admin"):
		vp := customerProblem(p)
		werr = s.shopPage(c, p.Status, vp.Title, views.ErrorPage(vp))
	default:
		werr = s.page(c, p.Status, p.Title, "", views.ErrorPage(viewProblem(p)))
	}
	if werr != nil {
		s.log.WarnContext(c.Request().Context(), "could not write error response", "error", werr)
	}
}

// wantsProblemJSON reports whether an error is answered as problem
// details: always on /api and /callbacks; elsewhere unless htmx sent the
// request or its Accept ranks text/html above application/json — the
// ranking wantsJSON reads for console reads, so that an /admin page asked
// for as JSON fails as JSON, and one asked for as HTML fails as a page.
// When Accept ranks them alike (none, */*), an error is problem details:
// the client is a script more likely than a browser.
func wantsProblemJSON(c echo.Context) bool {
	path := c.Request().URL.Path
	if strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/callbacks/") {
		return true
	}
	addVary(c, echo.HeaderAccept)
	return !isHTMX(c) && preferredType(c.Request().Header.Get(echo.HeaderAccept)) != "html"
}

// customerProblem is an error as a customer reads it on the shop's pages:
// plain sentences, no status code, no problem code (the API keeps those).
func customerProblem(p problem) views.Problem {
	vp := views.Problem{Status: p.Status, InShop: true}
	switch {
	case p.Status == http.StatusNotFound:
		vp.Title, vp.Detail = "We cannot find this page", "If you followed the link to your order, check that it is whole: it carries the order's key, and the page opens only with it."
	case p.Status == http.StatusTooManyRequests:
		vp.Title, vp.Detail = "Please wait a moment", p.Detail
	case p.Status >= 500:
		vp.Title, vp.Detail = "Something went wrong on our side", "Please try again in a moment. Nothing was charged twice: every order and payment happens once, whatever you press again."
	default:
		vp.Title, vp.Detail = "This did not work", "Please go back and try again."
	}
	return vp
}

func viewProblem(p problem) views.Problem {
	return views.Problem{Status: p.Status, Title: p.Title, Detail: p.Detail, Code: p.Code}
}

func writeProblem(c echo.Context, p problem) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return c.Blob(p.Status, problemContentType, b)
}
