package fairsched

import (
	"errors"
	"fmt"
	"time"

	"github.com/fairsched/fairsched/internal/rt"
)

// The disable policy (docs/design.md, Disable policy; failures, window and
// time disabled): a (type, ID) pair whose attempts keep failing is
// turned away for a while instead of failing again and again.

// DisablePolicy disables a (type, ID) pair after Failures failed attempts
// of jobs of that pair within Window (failures at times in (now − Window,
// now]): new submissions of the pair then fail at once with an error
// matching ErrDisabled, for For, or until Enable if For is 0. Jobs of the
// pair already queued or backing off are not touched, and their later
// failures count. The zero value never disables.
type DisablePolicy struct {
	Failures int
	Window   time.Duration
	For      time.Duration
}

func (p DisablePolicy) validate(name string) error {
	var errs []error
	add := func(problem string) {
		errs = append(errs, fmt.Errorf("fairsched: job type %q: Disable.%s", name, problem))
	}
	switch {
	case p.Failures < 0:
		add(fmt.Sprintf("Failures is %d; it must be 0 (never) or positive", p.Failures))
	case p.Failures > 0 && p.Window <= 0:
		add(fmt.Sprintf("Window is %v; with Failures set it must be positive", p.Window))
	}
	if p.For < 0 {
		add(fmt.Sprintf("For is %v; it must be 0 (until Enable) or positive", p.For))
	}
	return errors.Join(errs...)
}

// DisabledPair describes a disabled (type, ID) pair.
type DisabledPair struct {
	Type, ID string
	Since    time.Time
	Until    time.Time // the zero time: until Enable
}

// Enable enables the (type, ID) pair again, if it was disabled, and
// forgets its recent failures.
func (s *Scheduler) Enable(typ, id string) {
	s.rt.Enable(typ, id)
}

// Disable disables the (type, ID) pair by hand, as its type's
// DisablePolicy would: new submissions of the pair fail at once with an
// error matching ErrDisabled, for d from now, or until Enable if d is 0;
// a negative d is an error, as a negative DisablePolicy.For is. As the
// policy does, it forgets the pair's recent failures, counts in
// Stats.DisabledTotal and sends an EventDisabled (with no job: Seq 0, Key
// empty). Jobs of the pair already queued, backing off or running are
// not touched. Disabling a disabled pair again replaces its time. The type
// need not have a DisablePolicy; it must be registered (else the error
// wraps ErrUnknownType). O(1).
func (s *Scheduler) Disable(typ, id string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("fairsched: Disable of job type %q, ID %q for %v: it must be 0 (until Enable) or positive", typ, id, d)
	}
	return s.rt.Disable(typ, id, d)
}

// Disabled lists the (type, ID) pairs disabled now, by type then ID.
// O(p log p) for p pairs, sorted after the lock is released: the lock is
// held O(p). Where there may be many, DisabledSoonest lists a bounded
// number.
func (s *Scheduler) Disabled() []DisabledPair {
	return disabledPairs(s.rt.Disabled())
}

// DisabledSoonest lists at most n of the pairs disabled now, those whose
// time is up soonest first, then those disabled until Enable (by type,
// then ID, among equals), and returns how many pairs are disabled in all.
// It is for a page that shows a few of what may be many: O(p log n) for p
// pairs, with the lock held for the selection of n, never a sort of all
// p.
func (s *Scheduler) DisabledSoonest(n int) (pairs []DisabledPair, total int) {
	list, total := s.rt.DisabledSoonest(n)
	return disabledPairs(list), total
}

// disabledPairs returns the run-time layer's list as the API's: the same
// fields.
func disabledPairs(list []rt.DisabledPair) []DisabledPair {
	return convertAll(list, func(x rt.DisabledPair) DisabledPair { return DisabledPair(x) })
}
