// Package clock holds the time sources of fairsched: the real clock and a
// fake one that tests advance by hand, so scenarios run in virtual time.
package clock

import (
	"sync"
	"time"
)

// Real reads the system clock. Its readings carry Go's monotonic clock, so
// durations between them are immune to wall-clock steps.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Fake is a clock that moves only when told to. The zero value is not
// usable; create one with NewFake. Safe for concurrent use.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake clock's current reading.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d. It panics if d is negative: the
// scheduler relies on time never running backwards.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Fake.Advance with a negative duration")
	}
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// Set moves the clock to t, which must not be before the current reading.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		panic("clock: Fake.Set would move time backwards")
	}
	f.now = t
}
