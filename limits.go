package fairsched

import "fmt"

// Limits changed at run time, as a service scales its workers up and down
// (docs/design.md, Hard limits). A lowered limit stops new starts until the running jobs drop
// below it; nothing running is cancelled. A raised one lets queued jobs
// start at once.

// SetMaxConcurrency changes the number of slots; 0 means no global limit.
// It fails, changing nothing, if n is negative or the keys' reservations
// (MinSlots) would add up to more than n.
func (s *Scheduler) SetMaxConcurrency(n int) error {
	if n < 0 {
		return fmt.Errorf("fairsched: MaxConcurrency %d; it must be 0 (no limit) or positive", n)
	}
	return s.rt.SetMaxConcurrency(n)
}

// SetTierLimit changes the cap on a tier's running jobs; 0 means none. It
// fails, changing nothing, if n is negative.
func (s *Scheduler) SetTierLimit(t Tier, n int) error {
	if n < 0 {
		return fmt.Errorf("fairsched: tier %v: limit %d; it must be 0 (no cap) or positive", t, n)
	}
	return s.rt.SetTierLimit(int(t), n)
}

// SetTypeLimit changes the cap on a job type's running jobs (its
// TypeConfig.MaxConcurrency); 0 means none. It fails, changing nothing, if
// n is negative or the type is not registered (the error wraps
// ErrUnknownType). RegisterType still compares with the configuration the
// type was registered with.
func (s *Scheduler) SetTypeLimit(name string, n int) error {
	if n < 0 {
		return fmt.Errorf("fairsched: job type %q: limit %d; it must be 0 (no cap) or positive", name, n)
	}
	return s.rt.SetTypeLimit(name, n)
}
