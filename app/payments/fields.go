package payments

import (
	"encoding/json"

	"github.com/sekali/sekali/models"
)

// What every gateway's Parse needs to turn a body into a valid Event.

// MaxFieldLength bounds the strings of an event that are stored.
const MaxFieldLength = 255

// Fields reads an event's fields from a decoded JSON object and checks
// them, keeping the first problem: an EMissingField error for a field
// missing, of the wrong type or holding bad text, an EInvalid one
// (Invalid) for an amount written in a way no amount is (an exponent, a
// sign, a fraction its currency has not, beyond any order). Either is a
// 422.
type Fields struct {
	Object map[string]any // the decoded body (canonjson.Decode: numbers are json.Number)
	Err    error
}

// Fail records a problem, unless one is recorded already.
func (f *Fields) Fail(format string, args ...any) {
	if f.Err == nil {
		f.Err = models.Errorf(models.EMissingField, format, args...)
	}
}

// Invalid records a malformed value of a field that is there (an
// amount), unless a problem is recorded already.
func (f *Fields) Invalid(format string, args ...any) {
	if f.Err == nil {
		f.Err = models.Errorf(models.EInvalid, format, args...)
	}
}

// String is the required string member name of Object, checked by Text.
func (f *Fields) String(name string) string {
	s, ok := f.Object[name].(string)
	if !ok {
		f.Fail("%s is missing or not a string", name)
		return s
	}
	f.Text(name, s)
	return s
}

// OptionalString is the string member name of Object, or "" when it is
// absent or null; any other type is a problem.
func (f *Fields) OptionalString(name string) string {
	switch v := f.Object[name].(type) {
	case nil:
		return ""
	case string:
		if v != "" {
			f.Text(name, v)
		}
		return v
	}
	f.Fail("%s must be a string", name)
	return ""
}

// Text checks a string field that has been read: 1 to MaxFieldLength
// bytes of text PostgreSQL can store.
func (f *Fields) Text(name, s string) {
	switch {
	case s == "" || len(s) > MaxFieldLength:
		f.Fail("%s must be 1 to %d characters", name, MaxFieldLength)
	case !models.CleanText(s):
		f.Fail("%s must be text without NUL", name)
	}
}

// Number is the required member name of Object as the JSON number it was
// written as: a number in quotes is a string, and refused.
func (f *Fields) Number(name string) json.Number {
	n, ok := f.Object[name].(json.Number)
	if !ok {
		f.Fail("%s is missing or not a number", name)
	}
	return n
}

// MinorUnits is the required member name of Object as a whole number of
// minor units, 0 to models.MaxTotal.
func (f *Fields) MinorUnits(name string) int64 {
	n, ok := f.Object[name].(json.Number)
	if !ok {
		f.Fail("%s is missing or not a number", name)
		return 0
	}
	v, err := ParseMinorUnits(string(n))
	if err != nil {
		f.Invalid("%s must be a whole number of minor units, 0 to %d: %v", name, int64(models.MaxTotal), err)
	}
	return v
}

// Amount reads text, the member name, as ParseAmount does: minor units
// of currency, or a problem that says why not.
func (f *Fields) Amount(name, text, currency string) int64 {
	v, err := ParseAmount(text, currency)
	if err != nil {
		f.Invalid("%s %s is not an amount of %s: %v", name, QuoteAmount(text), currency, err)
	}
	return v
}

// Currency checks an ISO 4217 code such as IDR.
func (f *Fields) Currency(name, code string) {
	if !models.ValidCurrency(code) {
		f.Fail("%s must be an ISO 4217 code such as IDR", name)
	}
}
