// Package clock holds the time sources of fairsched: the real clock and a
// fake one that tests advance by hand, so scenarios run in virtual time.
// Both read the time and run a function at a time (AfterFunc), which is
// all a scheduler needs of a clock: a deadline, a backoff or a rate
// limit's next token falls due without waiting for the next submission.
package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Real reads the system clock. Its readings carry Go's monotonic clock, so
// durations between them are immune to wall-clock steps.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc runs f on its own goroutine once d has passed, as
// time.AfterFunc does. stop cancels it and reports whether it did so
// before f started, as time.Timer.Stop does.
func (Real) AfterFunc(d time.Duration, f func()) (stop func() bool) { return time.AfterFunc(d, f).Stop }

// Fake is a clock that moves only when told to. Its timers fire in virtual
// time: Advance and Set run, in time order and on the caller's goroutine,
// the function of every timer that falls due, with the clock reading each
// timer's time while its function runs. The zero value is not usable;
// create one with NewFake. Safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers fakeTimers
	seq    uint64 // timers made, for the order of timers due at one time
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake clock's current reading.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc arranges for fn to run once the clock has moved d past its
// current reading (at the next Advance or Set, if d <= 0). Timers due at
// the same time fire in the order they were made. stop cancels the timer
// and reports whether it did so before fn started.
func (f *Fake) AfterFunc(d time.Duration, fn func()) (stop func() bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	t := &fakeTimer{clock: f, when: f.now.Add(d), seq: f.seq, fn: fn, idx: -1}
	heap.Push(&f.timers, t)
	return t.stop
}

// Advance moves the clock forward by d, firing the timers that fall due on
// the way. It panics if d is negative: the scheduler relies on time never
// running backwards.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Fake.Advance with a negative duration")
	}
	f.mu.Lock()
	to := f.now.Add(d)
	f.mu.Unlock()
	f.advanceTo(to)
}

// Set moves the clock to t, which must not be before the current reading,
// firing the timers that fall due on the way.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	before := t.Before(f.now)
	f.mu.Unlock()
	if before {
		panic("clock: Fake.Set would move time backwards")
	}
	f.advanceTo(t)
}

// Pending returns how many timers wait to fire.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// advanceTo fires every timer due by to, each with the clock at its time,
// then leaves the clock at to. A timer made by a firing function fires in
// the same call if it falls due by to.
func (f *Fake) advanceTo(to time.Time) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 || f.timers[0].when.After(to) {
			if to.After(f.now) {
				f.now = to
			}
			f.mu.Unlock()
			return
		}
		t := heap.Pop(&f.timers).(*fakeTimer)
		if t.when.After(f.now) {
			f.now = t.when
		}
		f.mu.Unlock()
		t.fn() // outside the lock: it may read the clock or make timers
	}
}

// fakeTimer is a timer of a Fake clock.
type fakeTimer struct {
	clock *Fake
	when  time.Time
	seq   uint64
	fn    func()
	idx   int // in clock.timers, -1 once fired or stopped
}

// stop cancels the timer; it reports false if the timer had already fired
// or been stopped.
func (t *fakeTimer) stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.idx < 0 {
		return false
	}
	heap.Remove(&t.clock.timers, t.idx)
	return true
}

// fakeTimers is a heap of timers by time, then by the order they were
// made (container/heap's interface).
type fakeTimers []*fakeTimer

func (h fakeTimers) Len() int { return len(h) }
func (h fakeTimers) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h fakeTimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *fakeTimers) Push(x any) {
	t := x.(*fakeTimer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *fakeTimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}
