package rt

import (
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// The decisions, as the life asks for them (internal/decide): the
// engine's, asked directly, in this process; or, when Config.Decider made
// one, a Decider's, whose grants may come later and from elsewhere (the
// tests' stand-in today). The life's hot points (enqueueAtLocked,
// dispatchLocked, finishLocked, catchUpLocked) make the choice themselves,
// for a measured reason: asking decide.Local through the interface, or
// through a helper holding both calls, which Go does not inline, cost an
// uncontended RunSync about a hundred instructions more (4%), and an
// interface's arguments escape, so a description read in place would be
// copied to the heap. The other points ask here.

// enqueueElsewhereLocked admits t, described by desc and tm (nil: no
// times), through the Decider, and marks it granted if the grant came
// with the answer. The times are copied to the Runtime's own record for
// the call: an interface's arguments escape, and the caller's are on its
// stack.
func (s *Runtime) enqueueElsewhereLocked(t *task, desc *Job, tm *engine.Times, now int64) *engine.Refusal {
	var times *engine.Times
	if tm != nil {
		s.times = *tm
		times = &s.times
		defer func() { s.times = engine.Times{} }() // what it refers to is not kept
	}
	startsNow, r := s.dec.Enqueue(&t.rec, *descOf(desc), times, now)
	if r == nil && startsNow {
		t.rec.Tag = tagGranted
	}
	return r
}

// restoreEnqueueLocked admits a durable job restored from the store,
// described by desc and tm: with its submission time set, it is never
// granted with the answer.
func (s *Runtime) restoreEnqueueLocked(dt *durableTask, desc *Job, tm *engine.Times, now int64) *engine.Refusal {
	if s.dec == nil {
		return s.eng.Enqueue(&dt.rec, descOf(desc), tm, now)
	}
	return s.enqueueElsewhereLocked(&dt.task, desc, tm, now)
}

// decider returns the Decider the points off the hot path ask: the one
// Config.Decider made, or the engine's in this process.
func (s *Runtime) decider() decide.Decider {
	if s.dec != nil {
		return s.dec
	}
	return s.inProc
}
