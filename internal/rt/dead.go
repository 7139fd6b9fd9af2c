package rt

import (
	"context"
	"fmt"
	"maps"
	"time"
)

// Dead jobs. A Submit job that fails for good (its last attempt failed, or
// it returned an error matching ErrPermanent) is dead: the scheduler keeps
// it, newest first, in a list of Config.DeadJobs, so that an operator can
// see what failed and try it again by hand (RetryDead) once the cause is
// fixed. A RunSync job is never dead: its caller has the error. Jobs that
// were cancelled, or expired, are not dead either.

// defaultDeadJobs is how many dead jobs are kept when Config.DeadJobs is 0.
const defaultDeadJobs = 100

// DeadJob is a dead job as the API's DeadJobs lists it.
type DeadJob struct {
	Seq      uint64
	Job      Job // as submitted, without its times
	Err      error
	Attempts []AttemptInfo
	Died     time.Time
}

// dead is a dead job as the scheduler keeps it: what RetryDead needs to
// submit it again.
type dead struct {
	info     DeadJob
	fn       func(context.Context) error
	parent   context.Context // the values its attempts' contexts carry
	attempts *attempts
	// durableID is a durable job's identity in the store; 0 otherwise.
	durableID int64
}

// buryLocked adds t, whose last attempt failed at now with err and which
// is about to end, to the dead list.
func (s *Runtime) buryLocked(t *task, err error, now int64) {
	if t.isSync() {
		return
	}
	dt := s.durableOf(t)
	if dt != nil {
		dt.dead = true
	}
	s.deadTotal++
	j := &t.rec
	if s.events != nil {
		s.events.send(Event{Kind: EventDead, Time: s.timeOf(now), Seq: j.Seq(), Type: j.Type(),
			ID: j.ID(), Key: j.Key(), Tier: Tier(j.Tier()), Err: err})
	}
	if s.cfg.DeadJobs < 0 {
		return
	}
	a := attemptsOf(t)
	if a == nil { // one attempt: its record is made here
		a = s.newAttemptsLocked(t)
		s.addAttemptLocked(a, t, err, now)
	}
	d := &dead{
		info: DeadJob{
			Seq: j.Seq(), Job: Job{Type: j.Type(), ID: j.ID(), Key: j.Key(), Priority: priorityOf(j.Base()), Needs: s.needsOf(j)},
			Err: err, Attempts: append([]AttemptInfo(nil), a.list...), Died: s.timeOf(now),
		},
		fn: t.fn, parent: a.parent, attempts: a,
	}
	if dt != nil {
		d.durableID = dt.id
	}
	s.addDeadLocked(d)
}

// deadLimit returns how many dead jobs are kept: Config.DeadJobs, or its
// default; negative for none.
func (s *Runtime) deadLimit() int {
	if s.cfg.DeadJobs == 0 {
		return defaultDeadJobs
	}
	return s.cfg.DeadJobs
}

// addDeadLocked adds d to the dead list, dropping the oldest if it is
// full.
func (s *Runtime) addDeadLocked(d *dead) {
	limit := s.deadLimit()
	if len(s.dead) == limit {
		copy(s.dead, s.dead[1:])
		s.dead = s.dead[:limit-1]
	}
	s.dead = append(s.dead, d) // oldest first
}

// DeadJobs returns the dead jobs the scheduler keeps, newest first.
func (s *Runtime) DeadJobs() []DeadJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DeadJob, len(s.dead))
	for i, d := range s.dead {
		out[len(out)-1-i] = d.info
		out[len(out)-1-i].Job.Needs = maps.Clone(d.info.Job.Needs) // the caller's to change
	}
	return out
}

// RetryDead takes the dead job seq out of the dead list and submits it
// again with its function and its context's values, as if newly
// submitted (a fresh aging clock, and its type's StartTimeout from now),
// for one more attempt: its attempt numbers go on, and if that attempt
// fails too, the job is dead again. It returns the new job's Handle. It
// fails with ErrNotDead if seq is not in the dead list, and as Submit
// does otherwise (the job then stays dead).
func (s *Runtime) RetryDead(seq uint64) (Handle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := -1
	for k, d := range s.dead {
		if d.info.Seq == seq {
			i = k
		}
	}
	if i < 0 {
		return Handle{}, fmt.Errorf("%w: %d", ErrNotDead, seq)
	}
	d := s.dead[i]
	t := newSubmitTask(d.parent, d.fn)
	a := &attempts{list: append([]AttemptInfo(nil), d.attempts.list...), parent: d.parent}
	a.allowed = len(a.list) + 1
	if d.durableID != 0 {
		t = s.requeueDurableLocked(d.durableID, len(a.list), a.allowed)
		a.parent = durableParent
	}
	t.err = a
	desc := d.info.Job
	now := s.nowLocked()
	if err := s.enqueueLocked(t, &desc, now); err != nil {
		return Handle{}, err
	}
	s.dead = append(s.dead[:i], s.dead[i+1:]...)
	h := s.handleLocked(t)
	s.launchLocked(t, now)
	return h, nil
}

// priorityOf returns the Job.Priority that gives the base priority base.
func priorityOf(base int) int {
	if base == 0 {
		return priorityLowest // 0 would mean the default
	}
	return base
}
