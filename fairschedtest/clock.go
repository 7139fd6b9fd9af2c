// Package fairschedtest helps test code that uses fairsched: a clock that
// moves only when the test says, so that waits, aging and timers run in
// virtual time, exactly and at once, with no sleep in the test.
//
// The clock is virtual, the goroutines are not: a job still runs on a
// goroutine, and ends when it returns, whatever the clock reads. A test
// that moves the clock past a time that depends on a job's end waits for
// that end first (Handle.Wait). For example, a periodic job's next
// occurrence is skipped if the previous one has not ended when it falls
// due: a test that saw an occurrence run waits for it (Periodic.Last,
// then Wait) before it moves the clock to the next. Likewise, an event
// hook (Config.OnEvent) runs on a goroutine of its own and may see an
// event before the scheduler has finished the change it reports (set a
// retry's backoff timer, say): a test that moves the clock on an event
// first calls a Scheduler method that waits for the change to end, such
// as Stats.
package fairschedtest

import (
	"time"

	"github.com/fairsched/fairsched/internal/clock"
)

// Clock is a fairsched.Clock that moves only when told to. Its timers fire
// in virtual time: Advance and Set run, in time order and on the caller's
// goroutine, the function of every timer that falls due, with the clock
// reading each timer's time while it runs. Create one with NewClock; the
// zero value is not usable. Safe for concurrent use.
type Clock struct {
	fake *clock.Fake
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{fake: clock.NewFake(start)} }

// Now returns the clock's reading.
func (c *Clock) Now() time.Time { return c.fake.Now() }

// AfterFunc arranges for f to run once the clock has moved d past its
// reading (at the next Advance or Set, if d <= 0), and returns a function
// that cancels that and reports whether it did so before f started.
func (c *Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return c.fake.AfterFunc(d, f)
}

// Advance moves the clock forward by d, firing the timers that fall due on
// the way. It panics if d is negative.
func (c *Clock) Advance(d time.Duration) { c.fake.Advance(d) }

// Set moves the clock to t, firing the timers that fall due on the way. It
// panics if t is before the clock's reading.
func (c *Clock) Set(t time.Time) { c.fake.Set(t) }

// Timers returns how many timers wait to fire.
func (c *Clock) Timers() int { return c.fake.Pending() }
