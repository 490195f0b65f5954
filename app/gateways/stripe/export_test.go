package stripe

// HoldBeginning makes each request under a new idempotency key call hold
// as it begins, before it acts: a test keeps one in progress so.
func (s *Emulator) HoldBeginning(hold func()) {
	s.mu.Lock()
	s.beginning = hold
	s.mu.Unlock()
}
