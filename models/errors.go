package models

import (
	"errors"
	"fmt"
)

// Error codes: what went wrong, for a program to tell apart. They are the
// machine-readable `code` member of every problem response; web/errors.go
// maps each to exactly one HTTP status (and app/payments those a callback
// can be answered with), so the domain does not speak HTTP.
const (
	EInvalid              = "invalid_request" // the request is well-formed but its content is not acceptable
	ENotFound             = "not_found"
	EInsufficientStock    = "insufficient_stock"
	EInvalidTransition    = "invalid_transition"
	EChargeDisputed       = "charge_disputed" // a refund of a charge whose dispute is open or lost
	EIdempotencyMissing   = "idempotency_key_missing"
	EIdempotencyReused    = "idempotency_key_reused"
	ERequestInProgress    = "request_in_progress"
	EIdempotencyInvalid   = "idempotency_key_invalid"
	EIdempotencyTooShort  = "idempotency_key_too_short" // a key shorter than 16 characters
	EInvalidPayload       = "invalid_payload"           // malformed JSON
	EUnknownParameter     = "unknown_parameter"         // a query parameter the list does not take
	EMissingField         = "missing_field"             // a required field is missing or mistyped
	EInvalidSignature     = "invalid_signature"
	ETooLarge             = "too_large"
	EUnsupportedMediaType = "unsupported_media_type"
	EUnauthorized         = "unauthorized"
	EConflict             = "conflict"       // same callback key, different payload
	EAlreadyExists        = "already_exists" // a product with this SKU exists
	ERejected             = "rejected"       // a callback for an unknown order or with the wrong amount
	EForbidden            = "forbidden"      // a cross-origin request to the admin console
	EMethodNotAllowed     = "method_not_allowed"
	ETooManyRequests      = "too_many_requests" // too many failed log-ins
	EUnavailable          = "unavailable"       // a retry may succeed
	EInternal             = "internal"
)

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
