package fairsched

import (
	"fmt"
)

// Fair share between fairness keys is configured per key (KeyConfig, in
// Config.Keys or at run time with SetKey) and decided by the engine; see
// the package documentation for the order and its guarantees.

// SetKey sets the configuration of fairness key name, which is then never
// forgotten. The change applies from the next dispatch: a new weight to the
// cost charged from then on, a cap or reservation to the next start. It
// fails, changing nothing, if the configuration is invalid or the keys'
// reservations would add up to more than MaxConcurrency.
func (s *Scheduler) SetKey(name string, c KeyConfig) error {
	if err := c.validate(fmt.Sprintf("key %q", name)); err != nil {
		return err
	}
	return s.rt.SetKey(name, c.engine())
}

// SetKeyWeight changes the weight of fairness key name, keeping the rest
// of its configuration. The weight must be positive.
func (s *Scheduler) SetKeyWeight(name string, weight float64) error {
	if problem := weightProblem(weight); problem != "" {
		return fmt.Errorf("fairsched: key %q: weight %v %s", name, weight, problem)
	}
	return s.rt.SetKeyWeight(name, weight)
}

// ResetKey returns fairness key name to Config.DefaultKey (the empty key
// to the zero KeyConfig), as ResetKeys does every key: it is configured no
// more, so it is forgotten once it has been idle for IdleTTL. Its virtual
// time is kept. A key the scheduler does not know is left unknown.
func (s *Scheduler) ResetKey(name string) {
	s.rt.ResetKey(name)
}

// ResetKeys returns every fairness key to Config.DefaultKey (the empty key
// to the zero KeyConfig): equal weights, no reservations, the default
// caps. Virtual times are kept. The keys of
// Config.Keys are reset too: none is configured afterwards, so, like any
// other key, each is forgotten once it has been idle for IdleTTL.
func (s *Scheduler) ResetKeys() {
	s.rt.ResetKeys()
}
