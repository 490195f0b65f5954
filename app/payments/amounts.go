package payments

import (
	"math/big"
	"strings"

	"github.com/sekali/sekali/models"
)

// Amounts arrive in each gateway's own notation: Midtrans writes
// "150000.00", Xendit a JSON number in the currency's major unit, Stripe
// an integer in *its* minor unit — and Stripe counts IDR in hundredths
// although the rupiah has no minor unit. Sekali keeps every amount in the
// currency's own minor unit (models.CurrencyExponent: IDR 0, USD 2), so
// each adapter converts here, exactly, or refuses.

// minorFromDecimal turns a decimal text in the currency's major unit
// ("150000.00", "12.5") into minor units; a fraction the currency cannot
// hold ("150000.50" IDR) or a number beyond the bounds is an error.
func minorFromDecimal(text, currency string) (int64, bool) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(text))
	if !ok || r.Sign() < 0 {
		return 0, false
	}
	r.Mul(r, new(big.Rat).SetInt(pow10(models.CurrencyExponent(currency))))
	if !r.IsInt() || !r.Num().IsInt64() || r.Num().Int64() > models.MaxTotal {
		return 0, false
	}
	return r.Num().Int64(), true
}

// stripeExponents are the currencies Stripe does not count in hundredths
// (its "zero-decimal" and "three-decimal" currencies); every other one,
// IDR included, Stripe counts in hundredths.
var stripeExponents = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "JPY": 0, "KMF": 0, "KRW": 0, "MGA": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "JOD": 3, "KWD": 3, "OMR": 3, "TND": 3,
}

// minorFromStripe turns a Stripe amount of currency (upper case) into
// Sekali's minor units: 15000000 IDR (Stripe's hundredths) is 150000.
func minorFromStripe(amount int64, currency string) (int64, bool) {
	stripeExp, ok := stripeExponents[currency]
	if !ok {
		stripeExp = 2
	}
	r := new(big.Rat).SetFrac(big.NewInt(amount), pow10(stripeExp))
	r.Mul(r, new(big.Rat).SetInt(pow10(models.CurrencyExponent(currency))))
	if amount < 0 || !r.IsInt() || !r.Num().IsInt64() || r.Num().Int64() > models.MaxTotal {
		return 0, false
	}
	return r.Num().Int64(), true
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }
