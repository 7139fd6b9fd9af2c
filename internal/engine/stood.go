package engine

// A lane's paused time across a restart. A job set aside with its aging
// clock running (backing off, waiting for dependencies) keeps its lane's
// paused time of when it left (Job.at, lane.stoodAt), and moves its
// submission time on by what the lane stood since only when it comes
// back (ClockMoved). For a durable job the shell keeps both sides: the
// job's value (AsideStood) in the job's record, the lanes' (Stoods)
// with the pauses, so that a job still set aside at a restart moves its
// submission time on by their difference; and the restart gives the
// lanes their values back (RestoreStood), so that a job's value stays
// comparable with its lane's for as long as it waits.
//
// A lane's paused time counts from the time it was made (newLane), not
// from 0: it is never more than the time then, so a value kept of a lane
// since forgotten, taken by another key or let go (its key idle,
// spare.go) is never more than any value of the lane made again for the
// same key and type, and the difference the shell takes, floored at 0,
// moves no job on for it.

// LaneStood is a lane's paused time: the µs that key Key or type Type was
// paused, counted from an origin of the lane's, up to the start of a
// pause in progress.
type LaneStood struct {
	Key, Type string
	Stood     int64
}

type laneName struct{ key, typ string }

// Stoods calls fn with the paused time of each lane whose key or type
// was paused since it was made, up to the start of its pause if one
// holds it: a restart's restored pauses stop the clocks from then
// (PauseKeySince). O(lanes paused).
func (e *Engine) Stoods(fn func(LaneStood)) {
	for _, l := range e.stoodLanes {
		at := l.stoodFrom
		if l.paused() {
			at = e.pausedSince(l)
		}
		fn(LaneStood{Key: l.key.name, Type: l.typ.name, Stood: l.stoodAt(at)})
	}
}

// RestoreStood gives the lane of s.Key and s.Type, when it is made, the
// paused time s.Stood: a value Stoods returned before a restart. Call it
// before the pauses are restored and before the jobs. A lane that is
// paused when it is made has stood since its pause began.
func (e *Engine) RestoreStood(s LaneStood) {
	if e.stoodOf == nil {
		e.stoodOf = make(map[laneName]int64)
	}
	e.stoodOf[laneName{s.Key, s.Type}] = s.Stood
}

// AsideStood returns, if j is set aside with its aging clock running
// (backing off after a failed attempt, waiting for the jobs it runs
// after), its lane's paused time when it was set aside, and true. O(1).
func (e *Engine) AsideStood(j *Job) (int64, bool) {
	switch j.state {
	case StateBlocked:
		return j.at, true
	case StateDelayed:
		if tm := e.timed[j]; tm != nil && tm.retry {
			return j.at, true
		}
	}
	return 0, false
}

// restoreStood gives l, made at now, the paused time restored for it, if
// one was.
func (e *Engine) restoreStood(l *lane, now int64) {
	name := laneName{l.key.name, l.typ.name}
	stood, ok := e.stoodOf[name]
	if !ok {
		return
	}
	delete(e.stoodOf, name)
	l.stood, l.stoodFrom = stood, now
	if l.paused() {
		l.stoodFrom = min(e.pausedSince(l), now)
	}
	e.keepStood(l)
}

// keepStood adds l to the lanes Stoods reports.
func (e *Engine) keepStood(l *lane) {
	if l.stoodIdx < 0 {
		l.stoodIdx = len(e.stoodLanes)
		e.stoodLanes = append(e.stoodLanes, l)
	}
}

// dropStood takes l, forgotten, out of the lanes Stoods reports.
func (e *Engine) dropStood(l *lane) {
	if l.stoodIdx >= 0 {
		e.stoodLanes = swapRemove(e.stoodLanes, l.stoodIdx, func(x *lane, i int) { x.stoodIdx = i })
		l.stoodIdx = -1
	}
}
