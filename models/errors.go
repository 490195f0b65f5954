package models

import (
	"errors"
	"fmt"
)

// Error codes. They are the machine-readable `code` member of every problem
// response; web/errors.go maps each to exactly one HTTP status.
const (
	EInvalid              = "invalid_request"           // 422: the request is well-formed but its content is not acceptable
	ENotFound             = "not_found"                 // 404
	EInsufficientStock    = "insufficient_stock"        // 409
	EInvalidTransition    = "invalid_transition"        // 409
	EIdempotencyMissing   = "idempotency_key_missing"   // 400
	EIdempotencyReused    = "idempotency_key_reused"    // 422
	ERequestInProgress    = "request_in_progress"       // 409
	EIdempotencyInvalid   = "idempotency_key_invalid"   // 400
	EIdempotencyTooShort  = "idempotency_key_too_short" // 422: a key shorter than 16 characters
	EInvalidPayload       = "invalid_payload"           // 400: malformed JSON
	EMissingField         = "missing_field"             // 422: a required field is missing or mistyped
	EInvalidSignature     = "invalid_signature"         // 401
	ETooLarge             = "too_large"                 // 413
	EUnsupportedMediaType = "unsupported_media_type"    // 415
	EUnauthorized         = "unauthorized"              // 401
	EConflict             = "conflict"                  // 409: same callback key, different payload
	EAlreadyExists        = "already_exists"            // 409: a product with this SKU exists
	ERejected             = "rejected"                  // 422: a callback for an unknown order or with the wrong amount
	EForbidden            = "forbidden"                 // 403: a cross-origin request to the admin console
	EMethodNotAllowed     = "method_not_allowed"        // 405
	ETooManyRequests      = "too_many_requests"         // 429: too many failed log-ins
	EUnavailable          = "unavailable"               // 503: a retry may succeed
	EInternal             = "internal"                  // 500
)

// statusOf is the one place where an error code becomes an HTTP status.
var statusOf = map[string]int{
	EInvalid:              422,
	ENotFound:             404,
	EInsufficientStock:    409,
	EInvalidTransition:    409,
	EIdempotencyMissing:   400,
	EIdempotencyInvalid:   400,
	EIdempotencyTooShort:  422,
	EIdempotencyReused:    422,
	ERequestInProgress:    409,
	EInvalidPayload:       400,
	EMissingField:         422,
	EInvalidSignature:     401,
	ETooLarge:             413,
	EUnsupportedMediaType: 415,
	EUnauthorized:         401,
	EConflict:             409,
	EAlreadyExists:        409,
	ERejected:             422,
	EForbidden:            403,
	EMethodNotAllowed:     405,
	ETooManyRequests:      429,
	EUnavailable:          503,
	EInternal:             500,
}

// HTTPStatus returns the HTTP status of an error code: 200 for no code, 500
// for a code it does not know. Callback rows store it as response_code, so
// it lives here rather than in the web layer.
func HTTPStatus(code string) int {
	if code == "" {
		return 200
	}
	if s, ok := statusOf[code]; ok {
		return s
	}
	return 500
}

// Error is an error with a code from the list above and a message that is
// safe to show to the client.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// EInternal when there is none. A nil error has no code.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	default:
		return EInternal
	}
}

// ErrorMessage returns the client-safe message of the first *Error in err's
// chain; anything else is reported as a generic internal error, so database
// details never reach a client.
func ErrorMessage(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Message
	default:
		return "internal error"
	}
}
