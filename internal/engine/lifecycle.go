package engine

// endGrace moves the queued jobs whose grace period ended into the
// aged orders (in their lanes, and the urgent order). Amortised O(log n)
// per job.
func (e *Engine) endGrace(now int64) {
	for {
		j := e.grace.popDue(&e.aging, now)
		if j == nil {
			return
		}
		e.endGraceOf(j, now)
	}
}

// endGraceOf moves a pending job whose grace period ended into the aged
// orders.
func (e *Engine) endGraceOf(j *Job, now int64) {
	switch j.state {
	case StateQueued:
		e.refile(j, now)
	case StateParked:
		e.regrace(j, now)
	}
}

// refile moves a queued job whose grace period ended within its lane and
// its type's urgent order, to where its phase at now puts it. The lane
// keeps its jobs, so it stays where it is among its type's ready lanes and
// the queue's counts stand: of hide and show, only the moves are made. A
// job in its lane's sorted run stays there: the run's order holds in every
// phase (sortedrun.go). O(log n).
func (e *Engine) refile(j *Job, now int64) {
	l := j.lane
	if j.heap != inRun {
		l.remove(j)
		l.insert(&e.aging, j, now)
	}
	if j.uidx != -1 {
		l.typ.urgent.unfile(j)
	}
	if e.aging.mayBeUrgent(j, now) {
		l.typ.urgent.file(&e.aging, j, now)
	}
}

// show makes a job visible: in its lane, its type's urgent order, and
// its lane ready.
func (e *Engine) show(j *Job, now int64) {
	j.state = StateQueued
	l := j.lane
	l.insert(&e.aging, j, now)
	if e.aging.mayBeUrgent(j, now) {
		l.typ.urgent.file(&e.aging, j, now)
	}
	e.nqueued++
	e.ready(l)
}

// hide takes a visible job out of its lane and urgent order.
func (e *Engine) hide(j *Job) {
	l := j.lane
	l.remove(j)
	if j.uidx != -1 {
		l.typ.urgent.unfile(j)
	}
	e.nqueued--
	if l.n+l.nwaiting == 0 {
		e.unready(l)
	}
}

// start gives j a slot.
func (e *Engine) start(j *Job, how Kind, now int64) {
	l := j.lane
	k, f, t := l.key, l.flow, l.typ
	switch j.state {
	case StateQueued:
		e.hide(j)
	case StateParked: // from an open gate's wait lane
		e.unhold(j)
	} // StateNew: a lone job starting at once
	if j.inGrace {
		e.grace.leave(j) // before at becomes its start time
	}
	if j.is(flagTimed) {
		if e.timed[j].deadlineAt > 0 {
			e.pause(j) // kept: the deadline bounds its retries
		} else {
			e.untime(j)
		}
	}
	j.state, j.at, j.kind = StateRunning, now, how
	e.npending--
	k.pending--
	f.pending--
	t.pending--
	e.nrunning++
	t.running++
	t.tier.running++
	k.running++
	f.running++
	l.running++
	if t.paused {
		k.pausedRunning++
	}
	j.idx = int32(len(e.running))
	e.running = append(e.running, runningJob{j, e.acquire(j), k.cfg.Weight})
	if e.rated {
		e.takeTokens(j, now)
	}
	if e.placing {
		if e.resources != nil {
			e.takeUnits(j, now)
		}
		if e.replicated {
			e.place(j)
		}
	}
	if k.blocked() && !k.cap.shut {
		e.capKey(k)
	}
	if how == Reserved {
		k.reserved++
	} else {
		j.est = e.costs.lookup(t, j.id)
		j.estimate = t.cost
		if j.est != nil {
			j.estimate = j.est.seconds
		}
		e.charge(f, j.estimate, j.guessOf(), k.cfg.Weight)
	}
	e.recordStart(j, now)
}

// finish ends a running job. With NotRun its function did not run (its
// caller gave up as it started), so no cost is learnt.
func (e *Engine) finish(j *Job, o Outcome, now int64) {
	e.stop(j, o, now)
	e.recordFinish(j, o, now)
	e.end(j, o, now)
}

// stop takes a running job's attempt out of the running jobs and accounts
// for it: its slot, its conflict lock, its key's charge corrected to the
// time it took, and, if it ran, the cost learnt.
func (e *Engine) stop(j *Job, o Outcome, now int64) {
	l := j.lane
	k, f, t := l.key, l.flow, l.typ
	lk, weight := e.running[j.idx].lock, e.running[j.idx].weight
	last := len(e.running) - 1
	e.running[j.idx] = e.running[last]
	e.running[j.idx].j.idx = j.idx
	e.running[last] = runningJob{}
	e.running = e.running[:last]
	e.nrunning--
	t.running--
	t.tier.running--
	k.running--
	f.running--
	l.running--
	if t.paused {
		k.pausedRunning--
	}
	e.release(lk, j)
	if e.placing {
		if e.resources != nil {
			e.releaseUnits(j, now)
		}
		if j.is(flagPlaced) {
			e.unplace(j)
		}
	}
	if k.cap.shut && !k.blocked() {
		e.uncapKey(k)
	}
	dur := float64(now-j.at) / 1e6
	if j.kind == Reserved {
		k.reserved--
	} else {
		// Correct the charge from the estimate to the slot time used.
		e.charge(f, dur-j.estimate, -j.guessOf(), weight)
	}
	if o != NotRun {
		e.costs.observe(t, j.id, j.est, dur, now)
		t.typical = e.costs.alpha*dur + (1-e.costs.alpha)*t.typical
	}
}

// end moves j to its final state and settles what it leaves behind.
func (e *Engine) end(j *Job, o Outcome, now int64) {
	j.state, j.heap, j.est = StateDone, uint8(o), nil // the caller may keep the record long after
	if e.nown > 0 {
		e.forgetNeeds(j)
	}
	if j.flags&(flagTimed|flagBound|flagAdopted) != 0 {
		if j.is(flagTimed) {
			e.untime(j)
		}
		if j.is(flagBound) {
			e.unbind(j)
		}
		j.set(flagAdopted, false) // the record may be enqueued again
	}
	e.settle(j, now)
	if j.is(flagLinked) {
		e.resolve(j, o, now) // after its flow and key are settled
	}
}

// settle settles what a job that leaves the pending and running jobs
// leaves behind: its place in the grace queue, its flow's activity, its
// key's work.
func (e *Engine) settle(j *Job, now int64) {
	f, k := j.lane.flow, j.lane.key
	if e.npending == 0 {
		e.grace.reset() // nothing waits
	} else {
		e.grace.leave(j)
	}
	if f.pending == 0 && f.running == 0 && f.actIdx >= 0 {
		e.deactivate(f)
	}
	e.rebusy(k, ReasonRebalance, now)
	if k.pending == 0 && k.running == 0 && k.aside == 0 {
		e.markIdle(k, now)
	}
}

// removeQueued takes a job that has not started out of the queue and
// ends it (cancelled, or the scheduler closed).
func (e *Engine) removeQueued(j *Job, now int64) {
	if j.is(flagTimed) {
		e.untime(j)
	}
	if j.aside() {
		e.unsetAside(j)
		e.recordCancel(j, now)
		e.endAside(j, NotRun, now)
	} else {
		e.leaveQueue(j, now)
		e.recordCancel(j, now)
		e.end(j, NotRun, now)
	}
}

// leaveQueue takes a job that has not started out of the queue and its
// counts.
func (e *Engine) leaveQueue(j *Job, now int64) {
	if j.state == StateQueued {
		e.hide(j)
	} else {
		e.unhold(j)
	}
	if e.resources != nil {
		e.dropClaims(j, now)
	}
	e.npending--
	j.lane.key.pending--
	j.lane.flow.pending--
	j.lane.typ.pending--
}
