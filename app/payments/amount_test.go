package payments_test

import (
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// ParseAmount reads what gateways and admins write, and refuses, with a
// reason, everything else: signs, spaces, exponents, other digits and
// separators, too many digits, and fractions the currency cannot hold.
func TestParseAmount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		text, currency string
		want           int64
		refused        string // "" when accepted; else a part of the reason
	}{
		{"150000", "IDR", 150000, ""},
		{"150000.00", "IDR", 150000, ""}, // rupiah with decimals, as some gateways write it
		{"150000.000000", "IDR", 150000, ""},
		{"0", "IDR", 0, ""},
		{"007", "IDR", 7, ""},
		{"12.5", "USD", 1250, ""},
		{"12.50", "USD", 1250, ""},
		{"0.01", "USD", 1, ""},
		{"12.345", "KWD", 12345, ""},
		{"1000000000000000", "IDR", models.MaxTotal, ""},
		{"10000000000000.00", "USD", models.MaxTotal, ""},
		{"1000000000000.000", "KWD", models.MaxTotal, ""},

		{"", "IDR", 0, "empty"},
		{" ", "IDR", 0, "a space"},
		{" 150000", "IDR", 0, "a space"},
		{"150000 ", "IDR", 0, "a space"},
		{"1e5", "IDR", 0, "exponent"},
		{"1E1000000", "IDR", 0, "exponent"},
		{"1e" + strings.Repeat("9", 60_000), "IDR", 0, "longer than 23"},
		{strings.Repeat("9", 60_000), "IDR", 0, "longer than 23"},
		{"0x10", "IDR", 0, "another character"},
		{"+5", "IDR", 0, "a sign"},
		{"-5", "IDR", 0, "a sign"},
		{"-0", "IDR", 0, "a sign"},
		{"NaN", "USD", 0, "another character"},
		{"Inf", "USD", 0, "another character"},
		{"١٢٣", "IDR", 0, "another character"}, // Arabic-Indic digits
		{"１２３", "IDR", 0, "another character"}, // fullwidth digits
		{"1_000", "IDR", 0, "another character"},
		{"1,000", "IDR", 0, "another character"},
		{"1.000.000", "IDR", 0, "another character"},
		{".5", "USD", 0, "both sides"},
		{"5.", "USD", 0, "both sides"},
		{".", "USD", 0, "both sides"},
		{"1.234", "USD", 0, "USD has 2 decimals"},
		{"1.2340", "USD", 0, "USD has 2 decimals"},
		{"150000.50", "IDR", 0, "IDR has no fraction"},
		{"150000.0000001", "IDR", 0, "more than 6 digits after"},
		{"12345678901234567", "IDR", 0, "more than 16 digits before"},
		{"99999999999999999999", "IDR", 0, "more than 16 digits before"},
		{"1000000000000001", "IDR", 0, "above"},
		{"9999999999999999", "IDR", 0, "above"},
		{"10000000000000.01", "USD", 0, "above"},
		{"9999999999999999.999", "KWD", 0, "above"}, // would overflow int64 unchecked
	} {
		got, err := payments.ParseAmount(tt.text, tt.currency)
		switch {
		case tt.refused == "" && (err != nil || got != tt.want):
			t.Errorf("ParseAmount(%q, %s) = %d, %v; want %d", tt.text, tt.currency, got, err, tt.want)
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
			t.Errorf("ParseAmount(%q, %s) = %d, %v; want refused: %s", tt.text, tt.currency, got, err, tt.refused)
		}
	}
}

// Minor units are digits only, within the same bounds.
func TestParseMinorUnits(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]int64{"150000": 150000, "0": 0, "1000000000000000": models.MaxTotal,
		"1.0": -1, "1e3": -1, "-0": -1, "+1": -1, "": -1, "1000000000000001": -1, "99999999999999999": -1} {
		got, err := payments.ParseMinorUnits(text)
		if (err == nil) != (want >= 0) || err == nil && got != want {
			t.Errorf("ParseMinorUnits(%q) = %d, %v; want %d (-1: refused)", text, got, err, want)
		}
	}
}

// MajorText writes what ParseAmount reads back.
func TestMajorText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		amount   int64
		currency string
		decimals int
		want     string
	}{
		{150000, "IDR", 2, "150000.00"},
		{150000, "IDR", 0, "150000"},
		{1250, "USD", 0, "12.50"},
		{5, "USD", 2, "0.05"},
		{5, "USD", 4, "0.0500"},
		{12345, "KWD", 2, "12.345"},
		{0, "USD", 0, "0.00"},
		{-150, "USD", 2, "-1.50"},
		{models.MaxTotal, "IDR", 2, "1000000000000000.00"},
	} {
		if got := payments.MajorText(tt.amount, tt.currency, tt.decimals); got != tt.want {
			t.Errorf("MajorText(%d, %s, %d) = %q, want %q", tt.amount, tt.currency, tt.decimals, got, tt.want)
		}
	}
}

// amountForm is ParseAmount's grammar, for the reference below.
var amountForm = regexp.MustCompile(`^[0-9]{1,16}(\.[0-9]{1,6})?$`)

// referenceAmount is ParseAmount the slow way: the grammar as a regular
// expression, the value with math/big — safe here, because the grammar
// has refused every long text and every exponent first.
func referenceAmount(text, currency string) (int64, bool) {
	if !amountForm.MatchString(text) {
		return 0, false
	}
	r, _ := new(big.Rat).SetString(text)
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(models.CurrencyExponent(currency))), nil)))
	if !r.IsInt() || r.Num().Cmp(big.NewInt(models.MaxTotal)) > 0 {
		return 0, false
	}
	return r.Num().Int64(), true
}

// FuzzParseAmount: ParseAmount never panics, agrees with the slow
// reference, and what it accepts MajorText writes back as the same
// amount, at every number of decimals it may be written with.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"150000", "150000.00", "12.5", "0.001", "1e5", "1E1000000", "0x10", "+5", "-5", "", " ",
		"1.234", "150000.50", "99999999999999999999", "NaN", "Inf", "١٢٣", "1_000", ".5", "5.", "1000000000000000",
		"9999999999999999.999999", "0000000000000001.000000"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
		f.Add(s, uint8(2))
	}
	currencies := []string{"IDR", "USD", "KWD"} // exponents 0, 2, 3
	f.Fuzz(func(t *testing.T, text string, c uint8) {
		currency := currencies[int(c)%len(currencies)]
		got, err := payments.ParseAmount(text, currency)
		want, ok := referenceAmount(text, currency)
		if (err == nil) != ok || ok && got != want {
			t.Fatalf("ParseAmount(%q, %s) = %d, %v; the reference says %d, %v", text, currency, got, err, want, ok)
		}
		if err != nil {
			return
		}
		for d := 0; d <= payments.MaxAmountDecimals; d++ {
			written := payments.MajorText(got, currency, d)
			if back, err := payments.ParseAmount(written, currency); err != nil || back != got {
				t.Fatalf("%q (%s) is %d, written %q with %d decimals, read back as %d, %v", text, currency, got, written, d, back, err)
			}
		}
	})
}
