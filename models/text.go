package models

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CleanText reports whether s can be stored as PostgreSQL text: valid
// UTF-8 without a NUL byte. Text from outside is checked with it before
// it reaches a query, so that such input is a 4xx that names the field,
// never a database error (SQLSTATE 22021) answered 500 or 503.
func CleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// Upper bounds of money and quantities, checked before any arithmetic.
// With them no price × quantity and no order total can overflow int64
// (MaxPrice × MaxQty = 10^18 < 2^63), and the database's CHECKs hold the
// same bounds as the last guard.
const (
	MaxPrice   = 1_000_000_000_000     // minor units per unit: Rp 1,000,000,000,000
	MaxQty     = 1_000_000             // units of one item in one order
	MaxTotal   = 1_000_000_000_000_000 // minor units of one order, or of one payment
	MaxStock   = 1_000_000_000_000     // units of one product in stock
	MaxRestock = 1_000_000_000         // units added by one restock
)

// Truncate cuts s to at most n bytes, at a rune boundary, so that text of
// our own making fits a bounded column.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Money formats an amount in minor units for people: "Rp 150.000" for
// rupiah (no minor unit), "12.34 USD" for currencies with cents: what
// the shop, the console and the customer's emails show.
func Money(amount int64, currency string) string {
	switch currency {
	case "IDR":
		return "Rp " + GroupThousands(amount, ".")
	case "JPY", "KRW", "VND":
		return GroupThousands(amount, ",") + " " + currency
	}
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}
	return fmt.Sprintf("%s%s.%02d %s", sign, GroupThousands(amount/100, ","), amount%100, currency)
}

// GroupThousands writes n with sep between groups of three digits.
func GroupThousands(n int64, sep string) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(sep)
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
