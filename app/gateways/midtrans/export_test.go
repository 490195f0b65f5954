package midtrans

// Refunded is the amount the emulation has refunded of transaction tx.
func (m *Emulator) Refunded(tx string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	refunds, _ := m.refunded.Get(tx)
	var n int64
	for _, r := range refunds {
		n += r.Amount
	}
	return n
}
