package fairsched

import "context"

// The dispatcher. Whenever a slot may be free (a job was queued, a job
// ended, a limit or key changed), dispatchLocked starts jobs until none is
// admissible, each time taking the first admissible job by the order of
// SPEC section 3:
//
//  1. urgent jobs, highest aged score first, then oldest;
//  2. a key below its reservation, the one furthest below first;
//  3. the highest tier;
//  4. within the tier, the ready flow with the lowest virtual time;
//  5. within the flow, the highest effective priority, then the oldest.
//
// Blocked work is kept out of sight rather than skipped over: a type or
// tier at its cap is passed over as a whole (one check per type), a key at
// its cap has its lanes taken out of the fair orders, and a job blocked by
// a conflict is parked on the conflict's slot. Nothing is looked at again
// until what blocks it changes. See doc.go for the derivation.

// dispatchLocked starts every job that can start now. If self is true the
// caller is a job goroutine that can run one more Submit job itself: the
// first one started is returned instead of being given a new goroutine.
func (s *Scheduler) dispatchLocked(now int64, self bool) (next *job) {
	if s.aging.on && s.aging.grace > 0 {
		s.endGraceLocked(now)
	}
	for {
		j, how := s.pickLocked(now)
		if j == nil {
			return next
		}
		s.startLocked(j, how, now)
		switch {
		case j.sync:
			close(j.wake)
			j.wake = nil
		case self && next == nil:
			next = j
		default:
			s.wg.Add(1)
			go s.work(j)
		}
	}
}

// kickLocked dispatches after a change that may have made jobs admissible.
func (s *Scheduler) kickLocked() {
	if s.npending > 0 {
		s.dispatchLocked(s.nowLocked(), false)
	}
}

// full reports whether every slot is taken.
func (s *Scheduler) full() bool {
	return s.cfg.MaxConcurrency > 0 && s.nrunning >= s.cfg.MaxConcurrency
}

// pickLocked returns the first admissible job by the order, parking the
// blocked jobs it meets, or nil if none can start.
func (s *Scheduler) pickLocked(now int64) (*job, startKind) {
	for !s.full() && s.nqueued > 0 || !s.full() && s.keyParked.Len() > 0 {
		if s.aging.urgentOn() {
			if j := s.firstUrgentLocked(now); j != nil {
				if s.parkIfBlockedLocked(j) {
					continue
				}
				return j, startUrgent
			}
		}
		if len(s.reserving) > 0 {
			if j := s.firstReservedLocked(now); j != nil {
				if sl := s.conflictLocked(j); sl != nil {
					s.parkOnSlotLocked(j, sl)
					continue
				}
				return j, startReserved
			}
		}
		if j := s.firstFairLocked(now); j != nil {
			if sl := s.conflictLocked(j); sl != nil {
				s.parkOnSlotLocked(j, sl)
				continue
			}
			return j, startFair
		}
		break
	}
	return nil, startFair
}

// firstUrgentLocked returns the most urgent job that no type or tier cap
// blocks, or nil. Each type keeps its aged jobs in urgent order, so this
// looks at one job per type, plus the best job parked on a key cap that
// has since freed.
func (s *Scheduler) firstUrgentLocked(now int64) *job {
	var best *job
	for _, t := range s.tiers {
		if t.atCap() {
			continue
		}
		for _, ty := range t.types {
			if ty.atCap() {
				continue
			}
			j, top, ok := ty.aged.TopKey()
			if ok && s.aging.reached(agedKeyOf(top), now, s.aging.urgent) && (best == nil || byAgedKey(j, best)) {
				best = j
			}
		}
	}
	for s.keyParked.Len() > 0 {
		k, _ := s.keyParked.Top()
		j, _ := k.parked.Top()
		if j.lane.typ.blocked() {
			// Its key is free but its type or tier is not: back to the
			// queue, where that cap hides it until it frees.
			s.unparkLocked(j, now)
			continue
		}
		if best == nil || byAgedKey(j, best) {
			best = j
		}
		break
	}
	return best
}

// parkIfBlockedLocked parks an urgent job that its key's cap or a conflict
// blocks, and reports whether it did.
func (s *Scheduler) parkIfBlockedLocked(j *job) bool {
	if j.state == stateParked { // from its key's parked heap: key now free
		if sl := s.conflictLocked(j); sl != nil {
			s.unparkKeyLocked(j)
			s.waitOnSlotLocked(j, sl)
			return true
		}
		return false
	}
	if k := j.lane.key; k.capped {
		s.hideLocked(j)
		j.state = stateParked
		k.parked.Push(j.agedOrder(), j)
		s.parkedKey++
		return true
	}
	if sl := s.conflictLocked(j); sl != nil {
		s.parkOnSlotLocked(j, sl)
		return true
	}
	return false
}

// firstReservedLocked returns the first job of the key furthest below its
// reservation, or nil. Reserving keys are few (configured), so they are
// scanned; ties go to the key whose name sorts first.
func (s *Scheduler) firstReservedLocked(now int64) *job {
	var best *job
	bestDeficit := 0
	for _, k := range s.reserving {
		d := k.cfg.MinSlots - k.reserved
		if d <= bestDeficit || k.capped || k.pending == 0 {
			continue
		}
		if j := s.keyHeadLocked(k, now); j != nil {
			best, bestDeficit = j, d
		}
	}
	return best
}

// keyHeadLocked returns a key's first queued job that no cap blocks: the
// highest tier, then the highest effective priority, then the oldest.
func (s *Scheduler) keyHeadLocked(k *keyState, now int64) *job {
	var best *job
	var bestTier Tier
	var bestRank rank
	for _, l := range k.lanes {
		if l.n == 0 || l.typ.blocked() {
			continue
		}
		j, r := l.head(&s.aging, now)
		if level := l.typ.tier.level; best == nil || level > bestTier ||
			level == bestTier && r.before(bestRank) {
			best, bestTier, bestRank = j, level, r
		}
	}
	return best
}

// firstFairLocked returns the first job by tier, virtual time and priority
// among the ready lanes, or nil. It looks at the first lane of each type
// not at its cap: O(types).
func (s *Scheduler) firstFairLocked(now int64) *job {
	for _, t := range s.tiers {
		if t.atCap() {
			continue
		}
		var best *lane
		var bestJob *job
		var bestRank rank
		for _, ty := range t.types {
			if ty.atCap() {
				continue
			}
			l, ok := ty.lanes.Top()
			if !ok {
				continue
			}
			switch {
			case best == nil || flowBefore(l.flow, best.flow):
				best, bestJob = l, nil
			case l.flow == best.flow:
				// Two types of one flow: priority decides.
				if bestJob == nil {
					bestJob, bestRank = best.head(&s.aging, now)
				}
				if j, r := l.head(&s.aging, now); r.before(bestRank) {
					best, bestJob, bestRank = l, j, r
				}
			}
		}
		if best != nil {
			if bestJob == nil {
				bestJob, _ = best.head(&s.aging, now)
			}
			return bestJob
		}
	}
	return nil
}

// endGraceLocked moves the queued jobs whose grace period ended into the
// aged orders. Amortised O(log n) per job.
func (s *Scheduler) endGraceLocked(now int64) {
	for {
		j := s.grace.popDue(&s.aging, now)
		if j == nil {
			return
		}
		if j.state != stateQueued {
			continue // parked jobs are placed when they return
		}
		s.hideLocked(j)
		s.showLocked(j, now)
	}
}

// showLocked makes a job visible: in its lane, its type's aged order, and
// its lane ready.
func (s *Scheduler) showLocked(j *job, now int64) {
	j.state = stateQueued
	l := j.lane
	l.insert(&s.aging, j, now)
	if s.aging.urgentOn() && s.aging.pastGrace(j.sub, now) {
		l.typ.aged.Push(j.agedOrder(), j)
	}
	s.nqueued++
	s.readyLocked(l)
}

// hideLocked takes a visible job out of its lane and aged order.
func (s *Scheduler) hideLocked(j *job) {
	l := j.lane
	l.remove(j)
	if j.uidx >= 0 {
		l.typ.aged.Remove(int(j.uidx))
	}
	s.nqueued--
	if l.n == 0 {
		s.unreadyLocked(l)
	}
}

// unparkLocked returns a parked job to the queue.
// Only key-parked jobs come back this way; conflict waiters return in
// releaseLocked.
func (s *Scheduler) unparkLocked(j *job, now int64) {
	s.unparkKeyLocked(j)
	s.showLocked(j, now)
}

func (s *Scheduler) unparkKeyLocked(j *job) {
	k := j.lane.key
	top, _ := k.parked.Top()
	k.parked.Remove(int(j.idx))
	s.parkedKey--
	if k.kpIdx >= 0 {
		if k.parked.Len() == 0 {
			s.keyParked.Remove(k.kpIdx)
		} else if top == j {
			next, _ := k.parked.Top()
			s.keyParked.Fix(k.kpIdx, next.agedOrder())
		}
	}
}

// startLocked gives j a slot.
func (s *Scheduler) startLocked(j *job, how startKind, now int64) {
	l := j.lane
	k, f, t := l.key, l.flow, l.typ
	switch j.state {
	case stateQueued:
		s.hideLocked(j)
	case stateParked:
		s.unparkKeyLocked(j)
	}
	j.state, j.start, j.kind = stateRunning, now, how
	if j.ctx == nil { // a Submit job: its context is made as it starts
		j.ctx = &jobContext{parent: context.Background()}
	}
	s.npending--
	k.pending--
	f.pending--
	t.pending--
	s.nrunning++
	t.running++
	t.tier.running++
	k.running++
	f.running++
	j.idx = int32(len(s.running))
	s.running = append(s.running, j)
	s.holdLocked(j)
	if k.atCap() && !k.capped {
		s.capKeyLocked(k)
	}
	if how == startReserved {
		k.reserved++
	} else {
		j.est = s.costs.lookup(t, j.id)
		j.estimate, j.guessed = t.cost, j.est == nil
		if !j.guessed {
			j.estimate = j.est.seconds
		}
		j.weight = k.cfg.Weight
		s.chargeLocked(f, j.estimate, j.guessOf(), j.weight)
	}
	s.recordStartLocked(j, now)
}

// finishLocked ends a running job with err. observed is false when fn did
// not run (its caller gave up as it started), so no cost is learnt.
func (s *Scheduler) finishLocked(j *job, err error, observed bool, now int64) {
	l := j.lane
	k, f, t := l.key, l.flow, l.typ
	last := len(s.running) - 1
	s.running[j.idx] = s.running[last]
	s.running[j.idx].idx = j.idx
	s.running[last] = nil
	s.running = s.running[:last]
	s.nrunning--
	t.running--
	t.tier.running--
	k.running--
	f.running--
	s.releaseLocked(j, now)
	if k.capped && !k.atCap() {
		s.uncapKeyLocked(k)
	}
	dur := float64(now-j.start) / 1e6
	if j.kind == startReserved {
		k.reserved--
	} else {
		// Correct the charge from the estimate to the slot time used.
		s.chargeLocked(f, dur-j.estimate, -j.guessOf(), j.weight)
	}
	if observed {
		s.costs.observe(t, j.id, j.est, dur, now)
	}
	s.recordFinishLocked(j, err, observed, now)
	s.endLocked(j, err, now)
}

// endLocked moves j to its final state and wakes whoever waits for it.
func (s *Scheduler) endLocked(j *job, err error, now int64) {
	f, k := j.lane.flow, j.lane.key
	j.state, j.err = stateDone, err
	j.fn, j.est, j.ctx = nil, nil, nil // a Handle may keep the record long after
	if s.npending == 0 {
		s.grace.reset() // nothing waits
	} else {
		s.grace.leave(j)
	}
	if f.pending == 0 && f.running == 0 && f.actIdx >= 0 {
		s.deactivateLocked(f)
	}
	if k.pending == 0 && k.running == 0 {
		s.unbusyLocked(k)
		s.idleLocked(k, now)
		s.emitAllocationLocked(k, ReasonKeyDrained)
	}
	if j.wake != nil {
		close(j.wake)
	}
	if s.npending == 0 && s.nrunning == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// removeQueuedLocked takes a job that has not started out of the queue and
// ends it with err (cancelled, or the scheduler closed).
func (s *Scheduler) removeQueuedLocked(j *job, err error, now int64) {
	switch {
	case j.state == stateQueued:
		s.hideLocked(j)
	case j.slot != nil:
		s.unparkSlotLocked(j)
		s.parkedConflict--
	default:
		s.unparkKeyLocked(j)
	}
	s.npending--
	j.lane.key.pending--
	j.lane.flow.pending--
	j.lane.typ.pending--
	s.recordCancelLocked(j, err, now)
	s.endLocked(j, err, now)
}
