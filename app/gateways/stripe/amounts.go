package stripe

import (
	"math/big"

	"github.com/sekali/sekali/app/payments"
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
// minor units: 15000000 IDR (Stripe's hundredths) is 150000.
func MinorUnits(amount int64, currency string) (int64, bool) {
	r := new(big.Rat).SetFrac(big.NewInt(amount), payments.Pow10(exponent(currency)))
	r.Mul(r, new(big.Rat).SetInt(payments.Pow10(models.CurrencyExponent(currency))))
	if amount < 0 || !r.IsInt() || !r.Num().IsInt64() || r.Num().Int64() > models.MaxTotal {
		return 0, false
	}
	return r.Num().Int64(), true
}

// Amount is MinorUnits's inverse: 150000 IDR is Stripe's 15000000.
func Amount(minor int64, currency string) (int64, bool) {
	r := new(big.Rat).SetFrac(big.NewInt(minor), payments.Pow10(models.CurrencyExponent(currency)))
	r.Mul(r, new(big.Rat).SetInt(payments.Pow10(exponent(currency))))
	if minor < 0 || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}
