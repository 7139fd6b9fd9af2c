package rt

import (
	"errors"
	"fmt"
	"strconv"
)

// errUnknownType is the error of a job whose type name is not registered.
func errUnknownType(name string) error { return fmt.Errorf("%w %q", ErrUnknownType, name) }

// RegisterType registers a job type. Registering a name again with the same
// configuration does nothing; with a different one it fails with an error
// and changes nothing (types are part of the scheduler's shape, so change
// them by building a new Scheduler).
func (s *Runtime) RegisterType(name string, c Type) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.registerLocked(name, c)
}

// registerLocked registers job type name with the engine, and its retry
// policy.
func (s *Runtime) registerLocked(name string, c Type) error {
	if _, known := s.eng.TypeTier(name); known && (s.retries[name] != c.Retry || s.disabling.policies[name] != c.Disable ||
		s.dups.policy[name] != c.Duplicates) {
		return errors.New("fairsched: job type " + strconv.Quote(name) + " is already registered with a different configuration")
	}
	if err := s.eng.RegisterType(name, c.Engine); err != nil {
		return err
	}
	s.noteRetriesLocked(name, c)
	s.dups.note(name, c)
	if c.Duplicates != AllowDuplicates {
		s.watchEnds = true
	}
	return nil
}

// noteRetriesLocked keeps type name's retry and disable policies, if it
// has them.
func (s *Runtime) noteRetriesLocked(name string, c Type) {
	if c.Retry != (RetryPolicy{}) {
		if s.retries == nil {
			s.retries = make(map[string]RetryPolicy)
		}
		s.retries[name] = c.Retry
	}
	if c.Disable != (DisablePolicy{}) {
		d := &s.disabling
		if d.policies == nil {
			d.policies = make(map[string]DisablePolicy)
			d.failures = make(map[pairKey][]int64)
		}
		d.policies[name] = c.Disable
	}
}
