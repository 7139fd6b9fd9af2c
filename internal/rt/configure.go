package rt

import (
	"fmt"

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
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.eng.SetMaxConcurrency(n, s.nowLocked()) {
		return fmt.Errorf("fairsched: MaxConcurrency %d is less than the keys' reservations, %d", n, s.eng.ReservedTotal())
	}
	s.kickLocked()
	return nil
}

// SetTierLimit changes the cap on a tier's running jobs; 0 means none. It
// fails, changing nothing, if n is negative.
func (s *Runtime) SetTierLimit(t int, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eng.SetTierLimit(t, n)
	s.kickLocked()
	return nil
}

// SetTypeLimit changes the cap on a job type's running jobs (its
// TypeConfig.MaxConcurrency); 0 means none. It fails, changing nothing, if
// n is negative or the type is not registered (the error wraps
// ErrUnknownType). RegisterType still compares with the configuration the
// type was registered with.
func (s *Runtime) SetTypeLimit(name string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.eng.SetTypeLimit(name, n) {
		return fmt.Errorf("%w %q", ErrUnknownType, name)
	}
	s.kickLocked()
	return nil
}

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

// SetResource changes the capacity of a named resource of
// Config.Resources. Jobs running keep their units (a lowered capacity may
// be exceeded until they end; nothing new starts meanwhile); jobs waiting
// are looked at again, and a waiting job that needs more than the new
// capacity waits until it grows. It fails, changing nothing, if the
// resource is not configured or the capacity is negative.
func (s *Runtime) SetResource(name string, capacity int) error {
	if !s.changeNow(func(now int64) bool { return s.eng.SetResource(name, capacity, now) }) {
		return fmt.Errorf("%w %q", ErrUnknownResource, name)
	}
	return nil
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
	s.changePauses(func(now int64) bool { s.eng.PauseKey(name, now); return true })
}

// ResumeKey resumes the fairness key name. Its waiting jobs whose type
// is not paused join the queue, and the key re-enters fair share as a key
// returning from idle does: at the lowest virtual time of the keys with
// work, or its own if that is higher. Resuming a key that is not paused
// does nothing.
//
// It takes the lock for O(m log n) time, for the key's m paused jobs.
func (s *Runtime) ResumeKey(name string) {
	s.changePauses(func(now int64) bool { s.eng.ResumeKey(name, now); return true })
}

// PauseType pauses the job type name, as PauseKey does a key: its queued
// jobs and those submitted later wait, holding nothing, until ResumeType.
// Its running jobs finish, and for allocation none of its jobs, waiting or
// running, is work of their key: a key whose only work is of the type
// counts as one with no work. A job waits while its key or its type is
// paused. It fails, changing
// nothing, if the type is not registered (the error wraps ErrUnknownType).
func (s *Runtime) PauseType(name string) error {
	if !s.changePauses(func(now int64) bool { return s.eng.PauseType(name, now) }) {
		return errUnknownType(name)
	}
	return nil
}

// ResumeType resumes the job type name, as ResumeKey does a key. It fails
// if the type is not registered (the error wraps ErrUnknownType), and for
// a type of durable jobs found in the Store without a handler here, whose
// jobs wait for a process that has one (WaitNoHandler).
func (s *Runtime) ResumeType(name string) error {
	if s.durable != nil && s.durable.orphans[name] > 0 {
		return fmt.Errorf("fairsched: job type %q has no handler: its durable jobs wait for a Scheduler with one", name)
	}
	if !s.changePauses(func(now int64) bool { return s.eng.ResumeType(name, now) }) {
		return errUnknownType(name)
	}
	return nil
}

// changeNow applies change to the engine at the scheduler's time, after
// what fell due by then, and dispatches if it reports that it changed
// something.
func (s *Runtime) changeNow(change func(now int64) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	s.catchUpLocked(now)
	if !change(now) {
		return false
	}
	s.kickLocked()
	return true
}

// changePauses applies a change of pauses as changeNow does, and records
// the pauses in the Store, if the Scheduler has one.
func (s *Runtime) changePauses(change func(now int64) bool) bool {
	return s.changeNow(func(now int64) bool {
		if !change(now) {
			return false
		}
		if s.durable != nil {
			s.savePausesLocked()
		}
		return true
	})
}
