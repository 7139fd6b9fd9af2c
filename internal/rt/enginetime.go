package rt

import (
	"math"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
)

// The scheduler's time. The engine counts time in whole µs (engine time);
// the Scheduler turns the times it is given (time.Time) and those its
// store keeps (µs since the Unix epoch) into engine time and back, here
// and nowhere else.
//
// The epoch, New's instant taken down to a whole µs, is engine time
// origin, and engine time e is the instant epoch + (e - origin) µs.
// Every conversion into engine time takes a time down to the whole µs at
// or before it and keeps the result within [1, maxEngine]; every
// conversion out of it takes a time within those limits first. With the
// epoch on a whole µs, a time of a whole µs (every time the store holds)
// and its engine time convert into each other exactly, whichever way it
// goes, however often: a durable job's times are the same in the process
// that stored them and in one that restores them with the same epoch.

// origin is the engine's time at the epoch. The engine takes 0 in its
// Times for "none"; starting its clock that far past 0 keeps every time
// since origin before the epoch a positive count, so that a time in the
// past keeps its meaning, however soon after New it is given: a NotBefore
// already past is no delay, a StartBy already past is refused, a restored
// job's aging clock runs from its admission. A time earlier still is
// taken as 1 µs, as past as it.
const origin = 1 << 50 // µs, about 35 years

// maxEngine is the latest engine time: the epoch and the longest
// time.Duration, about 292 years. A later time (a NotBefore in the year
// 9999) is taken as this one, as far off as it, so that a span between
// engine times is a time.Duration: a timer's, an Event's.
const maxEngine = origin + math.MaxInt64/int64(time.Microsecond)

// clampEngine returns the engine time us kept within [1, maxEngine].
func clampEngine(us int64) int64 { return min(max(us, 1), maxEngine) }

// wholeMicro returns t taken down to a whole µs, keeping its monotonic
// clock reading: the epoch.
func wholeMicro(t time.Time) time.Time {
	return t.Add(-time.Duration(t.Nanosecond() % int(time.Microsecond)))
}

// usDuration returns the span of us µs as a time.Duration, at most the
// longest one.
func usDuration(us int64) time.Duration {
	return time.Duration(min(us, math.MaxInt64/int64(time.Microsecond))) * time.Microsecond
}

// timebase converts between the engine's times, µs from origin at the
// epoch, and the clock's and the store's. It is set by New, then
// read-only: its conversions are pure functions of their argument.
type timebase struct {
	clock     Clock
	realClock bool      // clock is the system clock: read it with time.Since
	epoch     time.Time // New's instant, taken down to a whole µs
	// wallOnly: the epoch carries no monotonic clock reading (a fake
	// clock's times carry none), so that every span from it is one of
	// wall clock readings; epochSec and epochNsec are its Unix seconds
	// and nanoseconds.
	wallOnly  bool
	epochSec  int64
	epochNsec int64
}

// newTimebase returns the timebase of clock (nil: the system clock) from
// now on.
func newTimebase(c Clock) timebase {
	if c == nil {
		c = clock.Real{}
	}
	_, real := c.(clock.Real)
	epoch := wholeMicro(c.Now())
	return timebase{
		clock: c, realClock: real, epoch: epoch,
		wallOnly: epoch == epoch.Round(0), // Round(0) strips a monotonic reading, if any
		epochSec: epoch.Unix(), epochNsec: int64(epoch.Nanosecond()),
	}
}

// nowLocked returns the scheduler's time: the engine's, in µs. With the
// system clock it reads only the monotonic clock (time.Since on a reading
// that carries one), which costs half of time.Now; that clock never reads
// before the epoch, so truncating the span is taking it down.
func (s *timebase) nowLocked() int64 {
	if s.realClock {
		return origin + time.Since(s.epoch).Microseconds()
	}
	return s.engineTime(s.clock.Now())
}

// engineTime returns the engine's time of t: never 0 (none).
func (s *timebase) engineTime(t time.Time) int64 {
	if s.wallOnly {
		// t.Sub would take the span of the wall clock readings, and check
		// whether it overflows a time.Duration: within 2^35 s (a thousand
		// years) of the epoch, this is that span in whole µs, taken down,
		// at a third of the instructions.
		if sec := t.Unix() - s.epochSec; sec > -1<<35 && sec < 1<<35 {
			ns := int64(t.Nanosecond()) - s.epochNsec // in (-1e9, 1e9)
			us := ns / 1e3
			if ns%1e3 < 0 {
				us--
			}
			return clampEngine(origin + sec*1e6 + us)
		}
	}
	d := t.Sub(s.epoch) // within the longest time.Duration
	us := int64(d / time.Microsecond)
	if d%time.Microsecond < 0 {
		us-- // down, as for a time after the epoch
	}
	return clampEngine(origin + us)
}

// timeOf returns the time of the engine's time us.
func (s *timebase) timeOf(us int64) time.Time {
	return s.epoch.Add(time.Duration(clampEngine(us)-origin) * time.Microsecond)
}

// wallOf returns the store's time of the engine's time us: µs since the
// Unix epoch.
func (s *timebase) wallOf(us int64) int64 {
	return s.epoch.UnixMicro() + clampEngine(us) - origin
}

// engineTimeOf returns the engine's time of the store's time wall, µs
// since the Unix epoch: never 0 (none).
func (s *timebase) engineTimeOf(wall int64) int64 {
	e := s.epoch.UnixMicro()
	// Kept within the limits before subtracting, which cannot overflow.
	return min(max(wall, e-origin+1), e+maxEngine-origin) - e + origin
}

// Clock is the time source (the API's Clock).
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// timesOf returns job's times in µs of the scheduler's clock (0 for the
// zero time).
func (s *timebase) timesOf(job *Job) engine.Times {
	// job.After is converted, and checked, by afterOf.
	var tm engine.Times
	if !job.NotBefore.IsZero() {
		tm.NotBefore = s.engineTime(job.NotBefore)
	}
	if !job.StartBy.IsZero() {
		tm.StartBy = s.engineTime(job.StartBy)
	}
	return tm
}
