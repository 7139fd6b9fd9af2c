package fairsched

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
	holder  *job
	waiters []*job // parked; job.idx is the position
}

// conflictLocked returns the running job that blocks j, or nil.
func (s *Scheduler) conflictLocked(j *job) *conflictSlot {
	g := j.lane.typ.cfg.ConflictGroup
	if g == "" {
		return nil
	}
	sl := s.conflicts[conflictKey{g, j.id}]
	if sl == nil || sl.holder == nil {
		return nil
	}
	return sl
}

// holdLocked records j, starting, as the holder of its conflict slot.
func (s *Scheduler) holdLocked(j *job) {
	g := j.lane.typ.cfg.ConflictGroup
	if g == "" {
		return
	}
	k := conflictKey{g, j.id}
	sl := s.conflicts[k]
	if sl == nil {
		sl = &conflictSlot{key: k}
		s.conflicts[k] = sl
	}
	sl.holder = j
	j.slot = sl
}

// releaseLocked ends j's hold on its conflict slot and returns the waiters
// to their lanes.
func (s *Scheduler) releaseLocked(j *job, now int64) {
	sl := j.slot
	if sl == nil {
		return
	}
	j.slot = nil
	sl.holder = nil
	waiters := sl.waiters
	sl.waiters = nil
	for _, w := range waiters {
		w.slot = nil
		s.parkedConflict--
		s.showLocked(w, now)
	}
	if sl.holder == nil && len(sl.waiters) == 0 {
		delete(s.conflicts, sl.key)
	}
}

// parkOnSlotLocked moves a queued job blocked by sl out of its lane.
func (s *Scheduler) parkOnSlotLocked(j *job, sl *conflictSlot) {
	s.hideLocked(j)
	s.waitOnSlotLocked(j, sl)
}

// waitOnSlotLocked adds a job that is in no order to sl's waiters.
func (s *Scheduler) waitOnSlotLocked(j *job, sl *conflictSlot) {
	j.state = stateParked
	j.slot = sl
	j.idx = int32(len(sl.waiters))
	sl.waiters = append(sl.waiters, j)
	s.parkedConflict++
}

// unparkSlotLocked removes a parked job from its slot's waiters (it was
// cancelled or failed). O(1).
func (s *Scheduler) unparkSlotLocked(j *job) {
	sl := j.slot
	i := int(j.idx)
	last := len(sl.waiters) - 1
	sl.waiters[i] = sl.waiters[last]
	sl.waiters[i].idx = int32(i)
	sl.waiters[last] = nil
	sl.waiters = sl.waiters[:last]
	j.slot = nil
	if sl.holder == nil && len(sl.waiters) == 0 {
		delete(s.conflicts, sl.key)
	}
}
