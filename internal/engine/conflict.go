package engine

// Conflict groups. Two jobs conflict when their types share a non-empty
// conflict group and the jobs share an ID; at most one of them runs at a
// time. A slot per (group, ID) exists while one of them runs or waits.
//
// A queued job found blocked by a running holder is parked on the slot,
// out of every order, holding no slot of the scheduler's. When the holder
// ends, the slot's waiters return to their lanes and compete again by the
// full order; one of them may start, and the others are parked again only
// if the dispatcher reaches them while the slot is held. Each release thus
// costs O(w log n) for w waiters on that one resource, and nothing for the
// rest of the queue.

type conflictKey struct {
	group string
	id    string
}

type conflictSlot struct {
	key     conflictKey
	holder  *Job
	waiters []*Job // parked; job.idx is the position
}

// slotOf returns the slot of j's (group, ID), or nil if j's type has no
// conflict group or the slot is not there. A pending job keeps no pointer
// to its slot, which would cost eight bytes on every queued job; a running
// one's is kept beside it in the running list.
func (e *Engine) slotOf(j *Job) *conflictSlot {
	g := j.lane.typ.cfg.ConflictGroup
	if g == "" {
		return nil
	}
	return e.conflicts[conflictKey{g, j.id}]
}

// conflict returns the slot whose running holder blocks j, or nil.
func (e *Engine) conflict(j *Job) *conflictSlot {
	if sl := e.slotOf(j); sl != nil && sl.holder != nil {
		return sl
	}
	return nil
}

// hold records j, starting, as the holder of its conflict slot, and
// returns the slot, or nil if j's type has no conflict group.
func (e *Engine) hold(j *Job) *conflictSlot {
	g := j.lane.typ.cfg.ConflictGroup
	if g == "" {
		return nil
	}
	k := conflictKey{g, j.id}
	sl := e.conflicts[k]
	if sl == nil {
		sl = &conflictSlot{key: k}
		e.conflicts[k] = sl
	}
	sl.holder = j
	return sl
}

// release ends the hold of a job that ended on its conflict slot sl (nil
// if it had none) and returns the waiters to their lanes.
func (e *Engine) release(sl *conflictSlot, now int64) {
	if sl == nil {
		return
	}
	sl.holder = nil
	waiters := sl.waiters
	sl.waiters = nil
	for _, w := range waiters {
		e.parkedConflict--
		e.show(w, now)
	}
	if sl.holder == nil && len(sl.waiters) == 0 {
		delete(e.conflicts, sl.key)
	}
}

// parkOnSlot moves a queued job blocked by sl out of its lane.
func (e *Engine) parkOnSlot(j *Job, sl *conflictSlot) {
	e.hide(j)
	e.waitOnSlot(j, sl)
}

// waitOnSlot adds a job that is in no order to sl's waiters.
func (e *Engine) waitOnSlot(j *Job, sl *conflictSlot) {
	j.state, j.heap = StateParked, onSlot
	j.idx = int32(len(sl.waiters))
	sl.waiters = append(sl.waiters, j)
	e.parkedConflict++
}

// unparkSlot removes a parked job from its slot's waiters (it was
// cancelled or failed). O(1).
func (e *Engine) unparkSlot(j *Job) {
	sl := e.slotOf(j)
	i := int(j.idx)
	last := len(sl.waiters) - 1
	sl.waiters[i] = sl.waiters[last]
	sl.waiters[i].idx = int32(i)
	sl.waiters[last] = nil
	sl.waiters = sl.waiters[:last]
	if sl.holder == nil && len(sl.waiters) == 0 {
		delete(e.conflicts, sl.key)
	}
}
