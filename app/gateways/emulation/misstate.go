package emulation

import "sync"

// Misstate is the switch that makes an emulated gateway answer what it
// was not asked: a gateway whose answer states another amount or
// currency than the call asked (a connector's bug, a page or refund of
// someone else's), which Sekali must neither offer nor count. An
// emulation holds one and reads it (Misstated) where its answers state
// an amount: what it makes, keeps and tells stays what was asked; only
// the answer says otherwise. The zero value misstates nothing; it is
// safe for concurrent use.
type Misstate struct {
	mu       sync.Mutex
	n        int
	by       int64
	currency string
}

// MisstateNext makes the next n answers that state an amount state it by
// more (in Sekali's minor units of the currency asked; less when by is
// negative) and, when currency is not "", in currency.
func (m *Misstate) MisstateNext(n int, by int64, currency string) {
	m.mu.Lock()
	m.n, m.by, m.currency = n, by, currency
	m.mu.Unlock()
}

// Misstated says how the answer being written now misstates its amount
// and currency: ok false when it states them as they are.
func (m *Misstate) Misstated() (by int64, currency string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == 0 {
		return 0, "", false
	}
	m.n--
	return m.by, m.currency, true
}
