package engine

// The order. Whenever a slot may be free (a job was queued, a job ended, a
// limit or key changed), the caller calls Next until it returns nil, and
// each call starts the first admissible job by the order of SPEC section 3,
// which pick carries out step by step.
//
// Blocked work is kept out of sight rather than skipped over: a type or
// tier at its cap is passed over as a whole (one check per type), a key at
// its cap has its lanes taken out of the fair orders, and a job blocked by
// a conflict waits on the conflict's lock. Nothing is looked at again
// until what blocks it changes. See doc.go for the derivation.

// pick returns the first admissible job by the order and the step that
// took it, or nil if no pending job can start now. A job a step finds
// blocked by what the step cannot see from above (its key's cap, for an
// urgent job; a conflict) is parked out of sight, and the search goes on.
func (e *Engine) pick(now int64) (*Job, Kind) {
	for !e.full() && (e.nqueued > 0 || e.keyParked.Len() > 0) {
		// 1. Urgent: aged to the threshold; the highest score, then the
		// oldest. Past tiers, weights and reservations, never past a hard
		// limit.
		j, step := e.firstUrgent(now), Urgent
		// 2. Reservations: the key furthest below its MinSlots, then by
		// name; within it the highest tier, the highest effective
		// priority, the oldest. Not charged.
		if j == nil {
			j, step = e.firstReserved(now), Reserved
		}
		// 3-5. Fair share: the highest tier; within it the flow with the
		// lowest virtual time; within the flow the highest effective
		// priority, then the oldest.
		if j == nil {
			j, step = e.firstFair(now), Fair
		}
		if j == nil {
			break
		}
		if e.parkIfBlocked(j, now) {
			continue
		}
		return j, step
	}
	return nil, Fair
}

// stepOf returns the step of the order that takes j when nothing else is
// pending, as pick would: urgent if it is, else reserved if its key is
// below its reservation, else fair. It lets a lone job start without being
// filed first, by the same predicates the steps of pick use.
func (e *Engine) stepOf(j *Job, now int64) Kind {
	switch {
	case e.aging.urgentOn() && e.aging.isUrgent(int(j.base), j.sub, now):
		return Urgent
	case j.lane.key.belowReservation():
		return Reserved
	}
	return Fair
}

// full reports whether every slot is taken.
func (e *Engine) full() bool {
	return e.cfg.MaxConcurrency > 0 && e.nrunning >= e.cfg.MaxConcurrency
}

// admissible reports whether j passes every hard limit now.
func (e *Engine) admissible(j *Job) bool {
	return !e.full() && !j.lane.typ.blocked() && !j.lane.key.atCap() && e.conflict(j) == nil
}

// firstUrgent returns the most urgent job that no type or tier cap
// blocks, or nil. Each type keeps its aged jobs in urgent order, so this
// looks at one job per type, plus the best job parked on a key cap that
// has since freed.
func (e *Engine) firstUrgent(now int64) *Job {
	if !e.aging.urgentOn() {
		return nil
	}
	var best *Job
	for _, t := range e.tiers {
		if t.atCap() {
			continue
		}
		for _, ty := range t.types {
			if ty.atCap() {
				continue
			}
			j, top, ok := ty.aged.TopKey()
			if ok && e.aging.reached(agedKeyOf(top), now, e.aging.urgent) && (best == nil || byAgedKey(j, best)) {
				best = j
			}
			// The aged waiters of free conflict locks, by wait lane.
			if w, top, ok := ty.openWaits.TopKey(); ok && e.aging.reached(agedKeyOf(top), now, e.aging.urgent) {
				if j, _ := w.aged.Top(); best == nil || byAgedKey(j, best) {
					best = j
				}
			}
		}
	}
	for e.keyParked.Len() > 0 {
		k, _ := e.keyParked.Top()
		j, _ := k.parked.Top()
		if j.lane.typ.blocked() {
			// Its key is free but its type or tier is not: back to the
			// queue, where that cap hides it until it frees.
			e.unpark(j, now)
			continue
		}
		if best == nil || byAgedKey(j, best) {
			best = j
		}
		break
	}
	return best
}

// parkIfBlocked parks a job a step found that its key's cap (only an
// urgent job can find it so) or a conflict blocks, and reports whether it
// did.
func (e *Engine) parkIfBlocked(j *Job, now int64) bool {
	k := j.lane.key
	switch {
	case j.state == StateParked && j.heap == onKey: // from keyParked: its key is free now
		if lk := e.conflict(j); lk != nil {
			e.unparkKey(j)
			e.waitOn(j, lk, now)
			return true
		}
		return false
	case k.capped: // queued, or waiting on a free lock
		if j.state == StateQueued {
			e.hide(j)
		} else {
			e.unwait(j)
		}
		j.state, j.heap = StateParked, onKey
		k.parked.Push(j.agedOrder(), j)
		e.parkedKey++
		return true
	}
	// A waiter from an attached wait lane has a free lock; a queued job
	// may find it held.
	if lk := e.conflict(j); lk != nil {
		e.parkOnLock(j, lk, now)
		return true
	}
	return false
}

// firstReserved returns the first job of the key furthest below its
// reservation, or nil. Reserving keys are few (configured), so they are
// scanned; ties go to the key whose name sorts first.
func (e *Engine) firstReserved(now int64) *Job {
	var best *Job
	bestDeficit := 0
	for _, k := range e.reserving {
		d := k.cfg.MinSlots - k.reserved
		if d <= bestDeficit || k.capped || k.pending == 0 { // d > 0: belowReservation
			continue
		}
		if j := e.keyHead(k, now); j != nil {
			best, bestDeficit = j, d
		}
	}
	return best
}

// keyHead returns a key's first queued job that no cap blocks: the
// highest tier, then the highest effective priority, then the oldest.
func (e *Engine) keyHead(k *keyState, now int64) *Job {
	var best *Job
	var bestTier int
	var bestRank rank
	for _, l := range k.lanes {
		if l.n+l.nwaiting == 0 || l.typ.blocked() {
			continue
		}
		j, r := l.first(&e.aging, now)
		if level := l.typ.tier.level; best == nil || level > bestTier ||
			level == bestTier && r.before(bestRank) {
			best, bestTier, bestRank = j, level, r
		}
	}
	return best
}

// firstFair returns the first job by tier, virtual time and priority
// among the ready lanes, or nil. It looks at the first lane of each type
// not at its cap: O(types).
func (e *Engine) firstFair(now int64) *Job {
	for _, t := range e.tiers {
		if t.atCap() {
			continue
		}
		var best *lane
		var bestJob *Job
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
					bestJob, bestRank = best.first(&e.aging, now)
				}
				if j, r := l.first(&e.aging, now); r.before(bestRank) {
					best, bestJob, bestRank = l, j, r
				}
			}
		}
		if best != nil {
			if bestJob == nil {
				bestJob, _ = best.first(&e.aging, now)
			}
			return bestJob
		}
	}
	return nil
}
