package rt

import (
	"fmt"

	"github.com/fairsched/fairsched/internal/engine"
)

// Fair share between fairness keys is configured per key (KeyConfig, in
// Config.Keys or at run time with SetKey) and decided by the engine; see
// the package documentation for the order and its guarantees.

// SetKey sets the configuration of fairness key name, which is then never
// forgotten. The change applies from the next dispatch: a new weight to the
// cost charged from then on, a cap or reservation to the next start. It
// fails, changing nothing, if the configuration is invalid or the keys'
// reservations would add up to more than MaxConcurrency.
func (s *Runtime) SetKey(name string, c engine.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if !s.eng.SetKey(name, c, now) {
		total := s.eng.ReservedWith(name, c.MinSlots)
		return fmt.Errorf("fairsched: key %q: MinSlots %d would make the reservations add up to %d, more than MaxConcurrency %d",
			name, c.MinSlots, total, s.eng.MaxConcurrency())
	}
	s.kickLocked()
	return nil
}

// SetKeyWeight changes the weight of fairness key name, keeping the rest
// of its configuration. The weight must be positive.
func (s *Runtime) SetKeyWeight(name string, weight float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eng.SetKeyWeight(name, weight, s.nowLocked())
	s.kickLocked()
	return nil
}

// ResetKey returns fairness key name to Config.DefaultKey (the empty key
// to the zero KeyConfig), as ResetKeys does every key: it is configured no
// more, so it is forgotten once it has been idle for IdleTTL. Its virtual
// time is kept. A key the scheduler does not know is left unknown.
func (s *Runtime) ResetKey(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eng.ResetKey(name, s.nowLocked())
	s.kickLocked()
}

// ResetKeys returns every fairness key to Config.DefaultKey (the empty key
// to the zero KeyConfig): equal weights, no reservations, the default
// caps. Virtual times are kept. The keys of
// Config.Keys are reset too: none is configured afterwards, so, like any
// other key, each is forgotten once it has been idle for IdleTTL.
func (s *Runtime) ResetKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eng.ResetKeys(s.nowLocked())
	s.kickLocked()
}
