package rt

import "fmt"

// Limits changed at run time, as a service scales its workers up and down
// (docs/design.md, Hard limits). A lowered limit stops new starts until the running jobs drop
// below it; nothing running is cancelled. A raised one lets queued jobs
// start at once.

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
