package payments

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/sekali/sekali/models"
)

// Amounts arrive in each gateway's own notation: "150000.00",
// a JSON number in the currency's major unit, the
// admin a form field or a JSON number in major units, the sandbox an
// integer in minor units, or an integer in the gateway's own minor
// unit (its package converts). Sekali keeps every amount in the currency's own
// minor unit (models.CurrencyExponent: IDR 0, USD 2), so each reader
// converts, exactly, or refuses.
//
// Every such text is read here, and bounded before any arithmetic: a
// text is refused on its length before its characters are looked at, so
// a 60 KB digit string or "1e1000000" (which math/big would expand into
// a million digits) costs as little as "1". The arithmetic is int64,
// checked against models.MaxTotal before it can overflow.

// Bounds of an amount written in text.
const (
	// MaxAmountDigits bounds the digits before the point: the largest
	// amount, models.MaxTotal (10¹⁵ minor units), has 16.
	MaxAmountDigits = 16
	// MaxAmountDecimals bounds the digits after it. No currency has more
	// than 3 (models.CurrencyExponent); the rest must be zeros, which
	// gateways write ("150000.00" rupiah, which have no minor unit), and
	// the admin's refund amount has always taken up to 6.
	MaxAmountDecimals = 6
	// MaxAmountText is the longest amount text: 16 digits, a point, 6.
	MaxAmountText = MaxAmountDigits + 1 + MaxAmountDecimals
)

// pow10 holds the powers of ten up to 10¹⁸, the largest below 2⁶³.
var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// Why an amount's text is refused, as a clause that follows "is not an
// amount of IDR: ".
var (
	errAmountEmpty    = errors.New("it is empty")
	errAmountLong     = fmt.Errorf("it is longer than %d characters", MaxAmountText)
	errAmountExponent = errors.New("it has an exponent")
	errAmountChars    = errors.New("it has a sign, a space or another character than digits and one decimal point")
	errAmountBare     = errors.New("it needs digits on both sides of its point")
	errAmountDigits   = fmt.Errorf("it has more than %d digits before the point", MaxAmountDigits)
	errAmountDecimals = fmt.Errorf("it has more than %d digits after the point", MaxAmountDecimals)
	errAmountPoint    = errors.New("it has a point, and minor units are whole")
	errAmountAbove    = fmt.Errorf("it is above %d minor units, the most one payment can be", int64(models.MaxTotal))
)

// splitAmount checks text's form — ASCII digits, then optionally a point
// and more digits, within the bounds above — and returns the digits
// before and after the point. It reads no more than MaxAmountText bytes.
func splitAmount(text string) (whole, frac string, point bool, err error) {
	if text == "" {
		return "", "", false, errAmountEmpty
	}
	if len(text) > MaxAmountText {
		return "", "", false, errAmountLong
	}
	whole, frac = text, ""
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == 'e' || c == 'E':
			return "", "", false, errAmountExponent
		case c == '.' && !point:
			whole, frac, point = text[:i], text[i+1:], true
		case c < '0' || c > '9':
			return "", "", false, errAmountChars
		}
	}
	switch {
	case whole == "" || point && frac == "": // ".5" and "5." are not how anyone writes money
		return "", "", false, errAmountBare
	case len(whole) > MaxAmountDigits:
		return "", "", false, errAmountDigits
	case len(frac) > MaxAmountDecimals:
		return "", "", false, errAmountDecimals
	}
	return whole, frac, point, nil
}

// CheckAmountText checks that text is written as ParseAmount reads an
// amount of some currency, for a form checked before its currency is
// known.
func CheckAmountText(text string) error {
	_, _, _, err := splitAmount(text)
	return err
}

// ParseAmount reads text, a decimal in currency's major unit ("150000",
// "150000.00", "12.5"), as minor units of currency, 0 to models.MaxTotal:
// the one reader of every amount written in major units, from a gateway
// or a form. Refused: a sign, a space, an exponent, any character but
// ASCII digits and one point between digits, more than MaxAmountDigits
// digits before the point or MaxAmountDecimals after it, and a fraction
// the currency cannot hold ("150000.50" IDR, "1.234" USD). The error says
// why, as a clause: "it has an exponent".
func ParseAmount(text, currency string) (int64, error) {
	whole, frac, _, err := splitAmount(text)
	if err != nil {
		return 0, err
	}
	exp := models.CurrencyExponent(currency)
	v := digitsValue(whole) // below 10¹⁶
	if v > models.MaxTotal/pow10[exp] {
		return 0, errAmountAbove
	}
	v *= pow10[exp]
	for i := 0; i < len(frac); i++ {
		d := int64(frac[i] - '0')
		if i >= exp {
			if d != 0 {
				return 0, fractionError(currency, exp)
			}
			continue
		}
		v += d * pow10[exp-1-i]
	}
	if v > models.MaxTotal {
		return 0, errAmountAbove
	}
	return v, nil
}

// ParseMinorUnits reads text, a whole number of minor units written as
// digits ("150000"), 0 to models.MaxTotal, with ParseAmount's bounds.
func ParseMinorUnits(text string) (int64, error) {
	whole, _, point, err := splitAmount(text)
	switch {
	case err != nil:
		return 0, err
	case point:
		return 0, errAmountPoint
	}
	if v := digitsValue(whole); v <= models.MaxTotal {
		return v, nil
	}
	return 0, errAmountAbove
}

// digitsValue is the value of at most MaxAmountDigits ASCII digits.
func digitsValue(digits string) int64 {
	var v int64
	for i := 0; i < len(digits); i++ {
		v = v*10 + int64(digits[i]-'0')
	}
	return v
}

func fractionError(currency string, exp int) error {
	if exp == 0 {
		return fmt.Errorf("%s has no fraction", currency)
	}
	return fmt.Errorf("%s has %d decimals", currency, exp)
}

// QuoteAmount quotes an amount's text for an error message, cut to
// MaxAmountText bytes: the text may be a 60 KB body's worth of digits.
func QuoteAmount(text string) string {
	if len(text) <= MaxAmountText {
		return strconv.Quote(text)
	}
	return strconv.Quote(models.Truncate(text, MaxAmountText)) + "…"
}

// MajorText writes minor units of currency as a decimal text in its major
// unit with at least `decimals` decimals: 150000 IDR, 2 → "150000.00".
// ParseAmount reads it back as the same amount.
func MajorText(amount int64, currency string, decimals int) string {
	exp := models.CurrencyExponent(currency)
	u := uint64(amount) // the magnitude of math.MinInt64 too
	sign := ""
	if amount < 0 {
		u, sign = -u, "-"
	}
	whole := strconv.FormatUint(u/uint64(pow10[exp]), 10)
	places := max(decimals, exp)
	if places == 0 {
		return sign + whole
	}
	frac := make([]byte, places)
	for i := range frac {
		frac[i] = '0'
	}
	rest := u % uint64(pow10[exp])
	for i := exp - 1; i >= 0; i-- {
		frac[i] = byte('0' + rest%10)
		rest /= 10
	}
	return sign + whole + "." + string(frac)
}
