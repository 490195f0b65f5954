package models

import (
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
