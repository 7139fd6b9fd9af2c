package rt

import (
	"fmt"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// Configuration changed at run time: the slots, tiers', types' and keys'
// limits, keys' weights, resources' capacities and pauses. Each takes
// the lock once, applies the change in the engine, and dispatches what
// the change let start.

// SetMaxConcurrency changes the number of slots; 0 means no global limit.
// It fails, changing nothing, if n is negative or the keys' reservations
// (MinSlots) would add up to more than n.
func (s *Runtime) SetMaxConcurrency(n int) error {
	return s.configure(decide.Change{Kind: decide.SetMaxConcurrency, N: n}, false, func() error {
		return fmt.Errorf("fairsched: MaxConcurrency %d is less than the keys' reservations, %d", n, s.eng.ReservedTotal())
	})
}

// SetTierLimit changes the cap on a tier's running jobs; 0 means none. It
// fails, changing nothing, if n is negative.
func (s *Runtime) SetTierLimit(t int, n int) error {
	return s.configure(decide.Change{Kind: decide.SetTierLimit, Tier: t, N: n}, false, nil)
}

// SetTypeLimit changes the cap on a job type's running jobs (its
// TypeConfig.MaxConcurrency); 0 means none. It fails, changing nothing, if
// n is negative or the type is not registered (the error wraps
// ErrUnknownType). RegisterType still compares with the configuration the
// type was registered with.
func (s *Runtime) SetTypeLimit(name string, n int) error {
	return s.configure(decide.Change{Kind: decide.SetTypeLimit, Name: name, N: n}, false, func() error {
		return fmt.Errorf("%w %q", ErrUnknownType, name)
	})
}

// SetKey sets the configuration of fairness key name, which is then never
// forgotten. The change applies from the next dispatch: a new weight to the
// cost charged from then on, a cap or reservation to the next start. It
// fails, changing nothing, if the configuration is invalid or the keys'
// reservations would add up to more than MaxConcurrency.
func (s *Runtime) SetKey(name string, c engine.Key) error {
	return s.configure(decide.Change{Kind: decide.SetKey, Name: name, Key: c}, false, func() error {
		total := s.eng.ReservedWith(name, c.MinSlots)
		return fmt.Errorf("fairsched: key %q: MinSlots %d would make the reservations add up to %d, more than MaxConcurrency %d",
			name, c.MinSlots, total, s.eng.MaxConcurrency())
	})
}

// SetKeyWeight changes the weight of fairness key name, keeping the rest
// of its configuration. The weight must be positive.
func (s *Runtime) SetKeyWeight(name string, weight float64) error {
	return s.configure(decide.Change{Kind: decide.SetKeyWeight, Name: name, Weight: weight}, false, nil)
}

// ResetKey returns fairness key name to Config.DefaultKey (the empty key
// to the zero KeyConfig), as ResetKeys does every key: it is configured no
// more, so it is forgotten once it has been idle for IdleTTL. Its virtual
// time is kept. A key the scheduler does not know is left unknown.
func (s *Runtime) ResetKey(name string) {
	_ = s.configure(decide.Change{Kind: decide.ResetKey, Name: name}, false, nil)
}

// ResetKeys returns every fairness key to Config.DefaultKey (the empty key
// to the zero KeyConfig): equal weights, no reservations, the default
// caps. Virtual times are kept. The keys of
// Config.Keys are reset too: none is configured afterwards, so, like any
// other key, each is forgotten once it has been idle for IdleTTL.
func (s *Runtime) ResetKeys() {
	_ = s.configure(decide.Change{Kind: decide.ResetKeys}, false, nil)
}

// SetResource changes the capacity of a named resource of
// Config.Resources. Jobs running keep their units (a lowered capacity may
// be exceeded until they end; nothing new starts meanwhile); jobs waiting
// are looked at again, and a waiting job that needs more than the new
// capacity waits until it grows. It fails, changing nothing, if the
// resource is not configured or the capacity is negative.
func (s *Runtime) SetResource(name string, capacity int) error {
	return s.configure(decide.Change{Kind: decide.SetResource, Name: name, N: capacity}, true, func() error {
		return fmt.Errorf("%w %q", ErrUnknownResource, name)
	})
}

// PauseKey pauses the fairness key name. Its queued jobs, and those
// submitted to it later, wait holding nothing, out of the order and out
// of fair share: for allocation the key counts as one with no work, so
// its share goes to the other keys at once. Its running jobs finish. A
// paused job's aging clock stands still, as does that of a job of the
// key backing off or waiting for jobs it runs after; its start deadline
// does not.
// A key the scheduler has not seen may be paused: the pause applies when
// it appears. Pausing a paused key does nothing.
//
// It takes the lock for O(m log n) time, for the key's m waiting jobs.
func (s *Runtime) PauseKey(name string) {
	_ = s.configure(decide.Change{Kind: decide.PauseKey, Name: name}, true, nil)
}

// ResumeKey resumes the fairness key name. Its waiting jobs whose type
// is not paused join the queue, and the key re-enters fair share as a key
// returning from idle does: at the lowest virtual time of the keys with
// work, or its own if that is higher. Resuming a key that is not paused
// does nothing.
//
// It takes the lock for O(m log n) time, for the key's m paused jobs.
func (s *Runtime) ResumeKey(name string) {
	_ = s.configure(decide.Change{Kind: decide.ResumeKey, Name: name}, true, nil)
}

// PauseType pauses the job type name, as PauseKey does a key: its queued
// jobs and those submitted later wait, holding nothing, until ResumeType.
// Its running jobs finish, and for allocation none of its jobs, waiting or
// running, is work of their key: a key whose only work is of the type
// counts as one with no work. A job waits while its key or its type is
// paused. It fails, changing
// nothing, if the type is not registered (the error wraps ErrUnknownType).
func (s *Runtime) PauseType(name string) error {
	return s.configure(decide.Change{Kind: decide.PauseType, Name: name}, true, func() error { return errUnknownType(name) })
}

// ResumeType resumes the job type name, as ResumeKey does a key. It fails
// if the type is not registered (the error wraps ErrUnknownType), and for
// a type of durable jobs found in the Store without a handler here, whose
// jobs wait for a process that has one (WaitNoHandler).
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
