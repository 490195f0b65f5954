package payments

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/sekali/sekali/models"
)

// What every gateway's Parse needs to turn a body into a valid Event.

// MaxFieldLength bounds the strings of an event that are stored.
const MaxFieldLength = 255

// Fields reads an event's fields from a decoded JSON object and checks
// them, keeping the first problem as an EMissingField error: the 422 a
// delivery with a missing, mistyped or invalid field is answered.
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
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v < 0 || v > models.MaxTotal {
		f.Fail("%s must be a whole number of minor units, 0 to %d", name, int64(models.MaxTotal))
	}
	return v
}

// Currency checks an ISO 4217 code such as IDR.
func (f *Fields) Currency(name, code string) {
	if !models.ValidCurrency(code) {
		f.Fail("%s must be an ISO 4217 code such as IDR", name)
	}
}

// Amounts arrive in each gateway's own notation: Midtrans writes
// "150000.00", Xendit a JSON number in the currency's major unit, Stripe
// an integer in *its* minor unit (its package converts). Sekali keeps
// every amount in the currency's own minor unit (models.CurrencyExponent:
// IDR 0, USD 2), so each adapter converts, exactly, or refuses.

// MinorFromDecimal turns a decimal text in the currency's major unit
// ("150000.00", "12.5") into minor units; a fraction the currency cannot
// hold ("150000.50" IDR) or a number beyond the bounds is refused.
func MinorFromDecimal(text, currency string) (int64, bool) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(text))
	if !ok || r.Sign() < 0 {
		return 0, false
	}
	r.Mul(r, new(big.Rat).SetInt(Pow10(models.CurrencyExponent(currency))))
	if !r.IsInt() || !r.Num().IsInt64() || r.Num().Int64() > models.MaxTotal {
		return 0, false
	}
	return r.Num().Int64(), true
}

// MajorText writes minor units of currency as a decimal text in its major
// unit with at least `decimals` decimals: 150000 IDR, 2 → "150000.00".
func MajorText(amount int64, currency string, decimals int) string {
	exp := models.CurrencyExponent(currency)
	return new(big.Rat).SetFrac(big.NewInt(amount), Pow10(exp)).FloatString(max(decimals, exp))
}

// Pow10 is 10ⁿ.
func Pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }
