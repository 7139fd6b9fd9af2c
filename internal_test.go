package fairsched

import "github.com/fairsched/fairsched/internal/engine"

// Test access to the scheduler's insides.

// verify locks the scheduler and checks its engine's invariants.
func (s *Scheduler) verify() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.verifyLocked()
}

// verifyLocked checks the engine's invariants at the scheduler's now.
func (s *Scheduler) verifyLocked() error { return s.eng.Verify(s.nowLocked()) }

// seqOf returns the sequence number of a Submit job.
func seqOf(h Handle) uint64 { return h.Seq() }

// stateOf returns where a Submit job is in its life.
func stateOf(h Handle) engine.State {
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	return h.t.rec.State()
}
