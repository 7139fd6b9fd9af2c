package engine

// The order. Whenever a slot may be free (a job was queued, a job ended, a
// limit or key changed), the caller calls Next until it returns nil, and
// each call starts the first admissible job by the order of docs/design.md (The order),
// which pick carries out step by step.
//
// Blocked work is kept out of sight rather than skipped over, by gates
// (gates.go): a type or tier at its cap is passed over as a whole (one
// check per type), a key at its cap has its lanes taken out of the fair
// orders, and a job blocked by its key's cap or a conflict is held by
// that gate. Nothing is looked at again until what blocks it changes.

// pick returns the first admissible job by the order and the step that
// took it, or nil if no pending job can start now. A job a step finds
// blocked by a gate the step cannot see from above (its key's cap, for an
// urgent job; a conflict) is held by that gate, and the search goes on.
func (e *Engine) pick(now int64) (*Job, Kind) {
	if (e.capped || e.rated) && !e.anyOpen() {
		return nil, Fair
	}
	for !e.full() && e.nqueued > 0 {
		// 1. Urgent: aged to the threshold, or based at or above it; the
		// highest score, then the oldest. Past tiers, weights and
		// reservations, never past a hard limit.
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

// anyOpen reports whether a type with pending jobs is open: neither it
// nor its tier at its cap, and its rate limit not out of tokens. Every
// step of the order passes over the other types' jobs, so while none is
// open pick finds nothing, and this says so at the cost of one look per
// type, not the steps' looks at the tops of the orders. A dispatch after
// a job ends often asks when the only free slot is one the caps leave
// unused. O(types). Without caps on tiers or types, or rate limits, every
// type is open, and pick spares the look (capped, rated).
func (e *Engine) anyOpen() bool {
	for _, t := range e.tiers {
		if t.atCap() {
			continue
		}
		for _, ty := range t.types {
			if ty.pending > 0 && !ty.closed() {
				return true
			}
		}
	}
	return false
}

// stepOf returns the step of the order that takes j when nothing else is
// pending, as pick would: urgent if it is, else reserved if its key is
// below its reservation, else fair. It lets a lone job start without being
// filed first, by the same predicates the steps of pick use.
func (e *Engine) stepOf(j *Job, now int64) Kind {
	switch {
	case e.aging.isUrgent(int(j.base), j.sub, now):
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
	return !e.full() && !j.lane.typ.blocked() && !j.lane.key.blocked() && e.conflict(j) == nil &&
		(!e.placing || e.placeable(j))
}

// placeable reports whether j has a free replica to run on, once one was
// set, and the units it needs, if resources are configured.
func (e *Engine) placeable(j *Job) bool {
	return (!e.replicated || e.replicaFor(j) != nil) && (e.resources == nil || e.fits(j))
}

// firstUrgent returns the most urgent job that no type or tier cap
// blocks, or nil. Each type keeps its queued jobs that are or may become
// urgent in urgent order, aged and in their grace period apart
// (urgent.go), and its open gates' wait lanes by their most urgent job of
// each kind, so this looks at four jobs per type.
func (e *Engine) firstUrgent(now int64) *Job {
	p := &e.aging
	if !p.urgentOn() {
		return nil
	}
	var best *Job
	var br rank
	consider := func(j *Job, r rank) {
		if j != nil && (best == nil || r.before(br)) {
			best, br = j, r
		}
	}
	for _, t := range e.tiers {
		if t.atCap() {
			continue
		}
		for _, ty := range t.types {
			if ty.closed() {
				continue
			}
			consider(ty.urgent.first(p, now))
			// The jobs that open gates hold, by wait lane.
			if w, top, ok := ty.openWaits.TopKey(); ok {
				j, _ := w.urgent.aged.Top()
				consider(p.agedUrgent(j, top, now))
			}
			if w, top, ok := ty.openFresh.TopKey(); ok {
				j, _ := w.urgent.fresh.Top()
				consider(j, p.fixedRank(top.Hi))
			}
		}
	}
	return best
}

// parkIfBlocked has the gate that blocks a job a step found hold it, and
// reports whether one did: its key's cap, which only the urgent step can
// find shut, its conflict lock, which a queued job may find held, no free
// replica to run on (replicas.go), or a resource short of units or held
// for another job (resources.go).
func (e *Engine) parkIfBlocked(j *Job, now int64) bool {
	if k := j.lane.key; k.cap.shut {
		e.hold(j, &k.cap, heldByKey, now)
		return true
	}
	if lk := e.conflict(j); lk != nil {
		e.hold(j, &lk.gate, heldByLock, now)
		return true
	}
	if e.replicated && e.replicaFor(j) == nil {
		e.holdForReplica(j, now)
		return true
	}
	if e.resources != nil {
		if g := e.resourceBlock(j, now); g != nil {
			e.hold(j, g, heldByResource, now)
			return true
		}
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
		if d <= bestDeficit || k.cap.shut || k.pending == 0 { // d > 0: belowReservation
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
			if ty.closed() {
				continue
			}
			l, ok := ty.lanes.TopAt(laneOrder)
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
