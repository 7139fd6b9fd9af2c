package rt

import (
	"fmt"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// The scheduler's one clock timer. The engine keeps everything that falls
// due at a time (a delayed job's NotBefore, a start deadline) on one
// timeline; the scheduler keeps a single clock timer set at the earliest of
// them, however many jobs wait for a time, and when it fires applies what
// fell due (engine.Due), ends the jobs that expired, dispatches and sets
// the timer again.

// armLocked makes sure the clock timer fires by the engine's next due
// time. A timer already set for that time or earlier is kept: firing
// early costs one call of Due that finds nothing.
func (s *Runtime) armLocked(now int64) {
	due, ok := s.eng.NextDue()
	if !ok || (s.timerStop != nil && s.timerAt <= due) {
		return
	}
	if s.timerStop != nil {
		s.timerStop()
	}
	s.timerAt = due
	// A due time past the longest timer (a rate limit's next token,
	// centuries off) is armed for the longest: it fires early and is set
	// again for what is left.
	s.timerStop = s.clock.AfterFunc(usDuration(due-now), s.onTimer)
}

// onTimer runs when the clock timer fires.
func (s *Runtime) onTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timerStop = nil
	if s.closed {
		return
	}
	now := s.nowLocked()
	s.dueLocked(now)
	s.armLocked(now)
}

// catchUpLocked applies what fell due by now if the clock timer is late
// to fire, so that what fell due comes before what the caller does at now.
func (s *Runtime) catchUpLocked(now int64) {
	if due, ok := s.eng.NextDue(); ok && due <= now {
		s.dueLocked(now)
	}
}

// dueLocked applies what has fallen due by now, ends the jobs that
// expired, and dispatches. The clock timer calls it; so does a submission
// that comes before a timer late to fire, so that what fell due is
// applied first.
func (s *Runtime) dueLocked(now int64) {
	for _, j := range s.eng.Due(now) {
		setResultLocked(taskOf(j), s.expiredError(j, now))
		s.endedLocked(taskOf(j))
	}
	if s.eng.HasUnrun() {
		s.unrunLocked(now) // after the expired jobs, whose errors they wrap
	}
	s.dispatchLocked(now, false)
}

// expiredError returns the error of job j, which did not start by its
// start deadline, now.
func (s *Runtime) expiredError(j *engine.Job, now int64) error {
	at := s.timeOf(now).Format(time.RFC3339Nano)
	if a := attemptsOf(taskOf(j)); a != nil {
		last := a.list[len(a.list)-1].Err
		return fmt.Errorf("%w: job %d did not start again by %v, after %d attempts; the last failed with: %w",
			ErrStartDeadline, j.Seq(), at, len(a.list), last)
	}
	return fmt.Errorf("%w: job %d did not start by %v", ErrStartDeadline, j.Seq(), at)
}

// stopTimerLocked stops the clock timer: Close.
func (s *Runtime) stopTimerLocked() {
	if s.timerStop != nil {
		s.timerStop()
		s.timerStop = nil
	}
}
