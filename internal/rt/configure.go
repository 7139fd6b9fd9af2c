package rt

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// Configuration changed at run time: the job types registered, the
// slots, tiers', types' and keys' limits, keys' weights, resources'
// capacities and pauses. Each takes the lock once, applies the change
// through the decisions, and dispatches what the change let start.

// SetMaxConcurrency is the API's Scheduler.SetMaxConcurrency, which documents it.
func (s *Runtime) SetMaxConcurrency(n int) error {
	return s.configure(decide.Change{Kind: decide.SetMaxConcurrency, N: n}, false, func() error {
		_, total, _ := s.decider().Reserved("", 0)
		return fmt.Errorf("fairsched: MaxConcurrency %d is less than the keys' reservations, %d", n, total)
	})
}

// SetTierLimit changes the cap on a tier's running jobs; 0 means none. It
// fails, changing nothing, if n is negative.
func (s *Runtime) SetTierLimit(t int, n int) error {
	return s.configure(decide.Change{Kind: decide.SetTierLimit, Tier: t, N: n}, false, nil)
}

// SetTypeLimit is the API's Scheduler.SetTypeLimit, which documents it.
func (s *Runtime) SetTypeLimit(name string, n int) error {
	return s.configure(decide.Change{Kind: decide.SetTypeLimit, Name: name, N: n}, false, func() error {
		return fmt.Errorf("%w %q", ErrUnknownType, name)
	})
}

// SetKey is the API's Scheduler.SetKey, which documents it.
func (s *Runtime) SetKey(name string, c engine.Key) error {
	return s.configure(decide.Change{Kind: decide.SetKey, Name: name, Key: c}, false, func() error {
		total, _, slots := s.decider().Reserved(name, c.MinSlots)
		return fmt.Errorf("fairsched: key %q: MinSlots %d would make the reservations add up to %d, more than MaxConcurrency %d",
			name, c.MinSlots, total, slots)
	})
}

// SetKeyWeight changes the weight of fairness key name, keeping the rest
// of its configuration. The weight must be positive.
func (s *Runtime) SetKeyWeight(name string, weight float64) error {
	return s.configure(decide.Change{Kind: decide.SetKeyWeight, Name: name, Weight: weight}, false, nil)
}

// ResetKey is the API's Scheduler.ResetKey, which documents it.
func (s *Runtime) ResetKey(name string) {
	_ = s.configure(decide.Change{Kind: decide.ResetKey, Name: name}, false, nil)
}

// ResetKeys is the API's Scheduler.ResetKeys, which documents it.
func (s *Runtime) ResetKeys() {
	_ = s.configure(decide.Change{Kind: decide.ResetKeys}, false, nil)
}

// SetResource is the API's Scheduler.SetResource, which documents it.
func (s *Runtime) SetResource(name string, capacity int) error {
	return s.configure(decide.Change{Kind: decide.SetResource, Name: name, N: capacity}, true, func() error {
		return fmt.Errorf("%w %q", ErrUnknownResource, name)
	})
}

// PauseKey is the API's Scheduler.PauseKey, which documents it.
func (s *Runtime) PauseKey(name string) {
	_ = s.configure(decide.Change{Kind: decide.PauseKey, Name: name}, true, nil)
}

// ResumeKey is the API's Scheduler.ResumeKey, which documents it.
func (s *Runtime) ResumeKey(name string) {
	_ = s.configure(decide.Change{Kind: decide.ResumeKey, Name: name}, true, nil)
}

// PauseType is the API's Scheduler.PauseType, which documents it.
func (s *Runtime) PauseType(name string) error {
	return s.configure(decide.Change{Kind: decide.PauseType, Name: name}, true, func() error { return errUnknownType(name) })
}

// ResumeType is the API's Scheduler.ResumeType, which documents it.
func (s *Runtime) ResumeType(name string) error {
	if s.durable != nil && s.durable.orphans[name] > 0 {
		return fmt.Errorf("fairsched: job type %q has no handler: its durable jobs wait for a Scheduler with one", name)
	}
	return s.configure(decide.Change{Kind: decide.ResumeType, Name: name}, true, func() error { return errUnknownType(name) })
}

// configure applies c through the decisions, with the lock held, and
// dispatches what it lets start. catchUp: what fell due is applied first,
// so that a limit's state is as of now (a resource's capacity, a pause).
// A change of the pauses is recorded in the store. If the decisions refuse
// c, nothing changed, and configure returns refused's error, made under
// the lock.
func (s *Runtime) configure(c decide.Change, catchUp bool, refused func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if catchUp {
		s.catchUpLocked(now)
	}
	if !s.decider().Configure(c, now) {
		return refused()
	}
	switch c.Kind {
	case decide.PauseKey, decide.ResumeKey, decide.PauseType, decide.ResumeType:
		if s.durable != nil {
			s.savePausesLocked()
		}
	}
	s.kickLocked()
	return nil
}

// registerLocked registers job type name with the decisions, and keeps
// its retry, disable and duplicate policies.
func (s *Runtime) registerLocked(name string, c TypeConfig) error {
	if _, known := s.decider().TypeTier(name); known && (s.retries.byType[name] != c.Retry || s.disabling.policies[name] != c.Disable ||
		s.dups.policy[name] != c.Duplicates) {
		return errors.New("fairsched: job type " + strconv.Quote(name) + " is already registered with a different configuration")
	}
	if err := s.decider().RegisterType(name, c.Engine); err != nil {
		return err
	}
	s.noteRetriesLocked(name, c)
	s.dups.note(name, c.Duplicates)
	if c.Duplicates != AllowDuplicates {
		s.watchEnds = true
	}
	return nil
}

// noteRetriesLocked keeps type name's retry and disable policies, if it
// has them.
func (s *Runtime) noteRetriesLocked(name string, c TypeConfig) {
	s.retries.note(name, c.Retry)
	if c.Disable != (DisablePolicy{}) {
		d := &s.disabling
		if d.policies == nil {
			d.policies = make(map[string]DisablePolicy)
		}
		d.policies[name] = c.Disable
	}
}

// RegisterType is the API's Scheduler.RegisterType, which documents it.
func (s *Runtime) RegisterType(name string, c TypeConfig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, known := s.decider().TypeTier(name); !known && s.cfg.Cluster != nil {
		// The leader decides with the types every replica has from New.
		return errors.New("fairsched: job type " + strconv.Quote(name) +
			": a replica of several registers its job types in Config.Types, alike on every replica")
	}
	return s.registerLocked(name, c)
}
