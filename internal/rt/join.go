package rt

import (
	"context"
	"slices"
)

// Joining duplicates (docs/design.md, Duplicates; a job is identified
// by its type and ID). For a type whose Duplicates policy is JoinQueued or
// JoinRunning, a submission of a (type, ID) whose job is waiting (or, for
// JoinRunning, running) does not make a second job: it joins that one.
//
// Every submission of such a type is a joiner of its job, the first
// included; a Handle on such a job names its joiner, so that cancelling
// it detaches that joiner alone. One joiner is the job's runner, whose
// function the job runs: the first, or, once it detaches while the job
// waits, the earliest still waiting (a RunSync joiner's function runs on
// its own goroutine, a Submit joiner's on the scheduler's). The job is
// cancelled when no joiner is left. It runs once, at the highest priority
// a joiner asked for, charged to its first submitter's key; a joiner's
// other fields are ignored.

// joinableLocked returns the job a submission of desc would join, or nil.
func (s *Runtime) joinableLocked(desc *Job) *task {
	if !s.joinsType(desc.Type) {
		return nil
	}
	return s.dups.current[dupKey{desc.Type, desc.ID}]
}

// registerJoinLocked gives t, just accepted, the record of its joiners,
// its submitter the first, and returns that joiner. fn and ctx are a
// Submit's; nil for RunSync.
func (s *Runtime) registerJoinLocked(t *task, fn func(context.Context) error, ctx context.Context) *joiner {
	js := &joined{done: make(chan struct{})}
	w := &joiner{js: js, fn: fn, ctx: ctx, runner: true}
	js.waiters = []*joiner{w}
	s.dups.joiners[t] = js
	return w
}

// joinLocked attaches a duplicate described by desc to job t at now: the
// job's priority rises to the duplicate's if that is higher.
func (s *Runtime) joinLocked(t *task, desc *Job, w *joiner, now int64) {
	js := s.dups.joiners[t]
	w.js = js
	js.waiters = append(js.waiters, w)
	s.dups.joins++
	if p, ok := s.decider().BasePriority(*descOf(desc)); ok && t.waiting() {
		s.decider().Raise(&t.rec, p, now)
	}
	if s.cfg.Signals != nil {
		s.cfg.Signals.Joined <- t.rec.Seq()
	}
}

// detachLocked detaches joiner w from job t at now. The job is cancelled
// if no joiner is left; if w ran it and the job waits, the earliest joiner
// left runs it instead.
func (s *Runtime) detachLocked(t *task, w *joiner, now int64) {
	js := w.js
	if w.gone || js != s.dups.joiners[t] {
		return // detached before, or the job has ended
	}
	w.gone = true
	js.waiters = slices.DeleteFunc(js.waiters, func(x *joiner) bool { return x == w })
	if len(js.waiters) == 0 {
		switch {
		case t.waiting():
			s.cancelQueuedLocked(t, context.Canceled, now)
		case t.granted():
			t.ctx.cancel(context.Canceled)
		}
		return
	}
	if !w.runner || !t.waiting() {
		return
	}
	next := js.waiters[0]
	next.runner = true
	if next.fn != nil { // a Submit joiner: the scheduler's goroutine runs it
		t.fn, t.submitCtx, t.ctx = next.fn, next.ctx, nil
		return
	}
	// A RunSync joiner runs it on its own goroutine, as the RunSync job
	// it now is.
	t.fn, t.submitCtx = nil, nil
	t.ctx = &jobContext{parent: next.ctx}
	if t.wake == nil {
		t.wake = make(chan struct{}) // closed as it starts, which may be before next looks
	}
	close(next.promoted)
}

// runnerOf returns the joiner that runs t, if t has joiners.
func (s *Runtime) runnerOf(t *task) *joiner {
	if js := s.dups.joiners[t]; js != nil {
		for _, w := range js.waiters {
			if w.runner {
				return w
			}
		}
	}
	return nil
}

// handleLocked returns the Handle of Submit job t, just accepted: for a
// type that joins duplicates, on its first joiner, its submitter.
func (s *Runtime) handleLocked(t *task) Handle {
	h := Handle{t: t}
	if s.dups.policy != nil && s.joinsLocked(t) {
		h.w = s.registerJoinLocked(t, t.fn, t.submitCtx)
	}
	return h
}

// joinsLocked reports whether duplicates may join t, just accepted: its
// type joins, and it has not ended already.
func (s *Runtime) joinsLocked(t *task) bool {
	return s.joinsType(t.rec.Type()) && !t.ended()
}

// joinsType reports whether the type name joins duplicates.
func (s *Runtime) joinsType(name string) bool {
	p := s.dups.policy[name]
	return p == JoinQueued || p == JoinRunning
}

// submitJoinLocked joins a Submit job of task t, described by desc, to
// the job it duplicates, if there is one, at now, and returns the Handle
// of the submission, and whether it joined.
func (s *Runtime) submitJoinLocked(t *task, desc *Job, now int64) (Handle, bool, error) {
	if err := s.disabling.refuses(desc, now); err != nil {
		return Handle{}, false, err // a disabled pair joins nothing either
	}
	existing := s.joinableLocked(desc)
	if existing == nil {
		return Handle{}, false, nil
	}
	if s.stopping {
		return Handle{}, false, ErrClosed
	}
	s.inheritLocked(t.submitCtx, desc)
	w := &joiner{fn: t.fn, ctx: t.submitCtx}
	s.joinLocked(existing, desc, w, now)
	return Handle{t: existing, w: w}, true, nil
}
