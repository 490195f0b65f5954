package gatewaycalls

import (
	"cmp"
	"fmt"

	"github.com/sekali/sekali/models"
)

// Stated is what a gateway's answer states of the money of what it made
// — a refund, a hosted payment page: its amount, in Sekali's minor
// units, and its currency. Currency "" states none (the amount is then
// read in the currency asked); the zero value states nothing, as
// a page answered with a token and a URL only does.
type Stated struct {
	Amount   int64
	Currency string
}

// states reports whether s states anything.
func (s Stated) states() bool { return s.Amount != 0 || s.Currency != "" }

// Disagreement is the integrity check of a gateway's answer: how what it
// states differs from the amount and currency asked, in words that show
// both ("the gateway answered Rp 40.000, not the Rp 50.000 asked"), or
// "" when it agrees or states nothing. Hyperswitch checks every
// connector's answers for the same two: an answer that disagrees is a
// gateway's bug or someone else's object, and changes no money.
func (s Stated) Disagreement(amount int64, currency string) string {
	if !s.states() || s.Amount == amount && (s.Currency == "" || s.Currency == currency) {
		return ""
	}
	return fmt.Sprintf("the gateway answered %s, not the %s asked",
		models.Money(s.Amount, cmp.Or(s.Currency, currency)), models.Money(amount, currency))
}

// columns are the gateway_requests columns that record s.
func (s Stated) columns() map[string]any {
	if !s.states() {
		return map[string]any{"answered_amount": nil, "answered_currency": ""}
	}
	return map[string]any{"answered_amount": s.Amount, "answered_currency": s.Currency}
}
