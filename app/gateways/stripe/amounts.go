package stripe

import (
	"math"

	"github.com/sekali/sekali/models"
)

// exponents are the currencies Stripe does not count in hundredths (its
// "zero-decimal" and "three-decimal" currencies); every other one, IDR
// included, Stripe counts in hundredths although the rupiah has no minor
// unit.
var exponents = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "JPY": 0, "KMF": 0, "KRW": 0, "MGA": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "JOD": 3, "KWD": 3, "OMR": 3, "TND": 3,
}

func exponent(currency string) int {
	if exp, ok := exponents[currency]; ok {
		return exp
	}
	return 2
}

// MinorUnits turns a Stripe amount of currency (upper case) into Sekali's
// minor units: 15000000 IDR (Stripe's hundredths) is 150000. An amount
// that is negative, above models.MaxTotal once converted, or a fraction
// of Sekali's unit is refused.
func MinorUnits(amount int64, currency string) (int64, bool) {
	if amount < 0 {
		return 0, false
	}
	minor, ok := scale(amount, models.CurrencyExponent(currency)-exponent(currency))
	return minor, ok && minor <= models.MaxTotal
}

// Amount is MinorUnits's inverse: 150000 IDR is Stripe's 15000000.
func Amount(minor int64, currency string) (int64, bool) {
	if minor < 0 {
		return 0, false
	}
	return scale(minor, exponent(currency)-models.CurrencyExponent(currency))
}

// scale is v × 10^shift for a shift of -3 to 3 (the exponents differ by
// at most 3), exact or refused: a remainder or an int64 overflow.
func scale(v int64, shift int) (int64, bool) {
	if shift < 0 {
		d := pow10[-shift]
		return v / d, v%d == 0
	}
	m := pow10[shift]
	if v > math.MaxInt64/m {
		return 0, false
	}
	return v * m, true
}

var pow10 = [...]int64{1, 10, 100, 1000}
