package stripe_test

import (
	"math"
	"testing"

	"github.com/sekali/sekali/app/gateways/stripe"
	"github.com/sekali/sekali/models"
)

// Stripe counts most currencies in hundredths (the rupiah included,
// although it has no minor unit), its zero-decimal ones in units and its
// three-decimal ones in thousandths (docs.stripe.com/currencies); Sekali
// counts each in its own minor unit. The conversion is exact or refused.
func TestStripeAmounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stripe   int64
		currency string
		minor    int64 // Sekali's; -1: Stripe's amount has none
	}{
		{15000000, "IDR", 150000}, // Rp150.000: Stripe's hundredths, whole rupiah here
		{15000050, "IDR", -1},     // half a rupiah
		{0, "IDR", 0},
		{1999, "USD", 1999}, // cents at both
		{1, "EUR", 1},
		{5000, "JPY", 5000},   // zero-decimal at both
		{50000, "KRW", 50000}, // zero-decimal at both
		{500, "BIF", 50000},   // zero-decimal at Stripe; hundredths here
		{12345, "KWD", 12345}, // thousandths at both
		{1500, "TND", 1500},
		{-1, "USD", -1},
		{models.MaxTotal, "USD", models.MaxTotal},
		{models.MaxTotal + 1, "USD", -1},
		{models.MaxTotal * 100, "IDR", models.MaxTotal},
		{models.MaxTotal*100 + 100, "IDR", -1}, // beyond any order
		{math.MaxInt64, "IDR", -1},             // a fraction of a rupiah, and beyond any order
		{math.MaxInt64 - 7, "IDR", -1},         // whole rupiah, beyond any order
		{math.MaxInt64, "BIF", -1},             // × 100 would overflow
	} {
		minor, ok := stripe.MinorUnits(tc.stripe, tc.currency)
		if want := tc.minor >= 0; ok != want || ok && minor != tc.minor {
			t.Errorf("MinorUnits(%d, %s) = %d, %v; want %d", tc.stripe, tc.currency, minor, ok, tc.minor)
		}
		if tc.minor < 0 {
			continue
		}
		// Amount is the inverse: what the Sender writes, Parse reads back.
		if back, ok := stripe.Amount(tc.minor, tc.currency); !ok || back != tc.stripe {
			t.Errorf("Amount(%d, %s) = %d, %v; want %d", tc.minor, tc.currency, back, ok, tc.stripe)
		}
	}
}

// An amount Stripe cannot state is refused rather than rounded.
func TestStripeAmountRefusesWhatStripeCannotState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor    int64
		currency string
	}{
		{-1, "USD"},
		{50050, "BIF"}, // 500.50 BIF: Stripe has no fraction of a franc
		{1, "BIF"},
		{math.MaxInt64/100 + 1, "IDR"}, // × 100 would overflow
	} {
		if got, ok := stripe.Amount(tc.minor, tc.currency); ok {
			t.Errorf("Amount(%d, %s) = %d, want refused", tc.minor, tc.currency, got)
		}
	}
}
