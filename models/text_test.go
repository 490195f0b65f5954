package models_test

import (
	"testing"
	"unicode/utf8"

	"github.com/sekali/sekali/models"
)

// Truncate keeps at most n bytes and never cuts a rune in two.
func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"}, {"abc", 3, "abc"}, {"abcdef", 4, "abcd"},
		{"Rp 150.000 €", 12, "Rp 150.000 "}, // € is three bytes: it does not fit
		{"€€", 4, "€"}, {"€", 2, ""}, {"", 0, ""},
	} {
		got := models.Truncate(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
